// kernel_output.h: what the program writes to stdout and stderr while it is a Jupyter kernel,
// caught at the file descriptors (Lua's print and io.write, every ':' command's printf, Graphviz's
// warnings) so that the kernel can send it to the notebook as stream messages.
//
// Descriptors 1 and 2 become the write ends of two pipes. A reader thread moves what arrives into
// memory (so a cell that prints more than a pipe holds never blocks); the kernel's thread takes it
// with drain() at the points where order matters: before a picture, an input prompt, a result or
// an error, and at the end of a cell. Only the kernel's thread publishes (xeus's sockets are not
// thread-safe).
#pragma once

#include <atomic>
#include <mutex>
#include <string>
#include <thread>

class OutputCapture {
public:
    OutputCapture();   // throws std::runtime_error when the pipes cannot be made
    ~OutputCapture();  // stdout and stderr are the original descriptors again
    OutputCapture(const OutputCapture&) = delete;
    OutputCapture& operator=(const OutputCapture&) = delete;

    // Everything written since the last drain (C stdio flushed first), each cut after its last
    // whole UTF-8 character (the rest waits for the next drain).
    void drain(std::string& out, std::string& err);
    // The process's stderr from before the capture (the kernel's log, which Jupyter's server keeps).
    int original_stderr() const { return saved_[1]; }

private:
    void read_available(int which);   // with mutex_ held
    void reader_loop();

    int saved_[2] = {-1, -1};      // the original stdout and stderr
    int read_end_[2] = {-1, -1};   // the pipes' read ends
    int wake_[2] = {-1, -1};       // a pipe that wakes the reader to end it
    std::string pending_[2];
    std::mutex mutex_;
    std::thread reader_;
};
