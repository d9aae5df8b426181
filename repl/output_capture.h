// output_capture.h: what the program writes to stdout and stderr while a front end other than the
// terminal drives it (the Jupyter kernel, the DAP server), caught at the file descriptors (Lua's
// print and io.write, every ':' command's printf, Graphviz's warnings) so that the front end can
// send it on as messages (a notebook's stream messages, DAP's output events).
//
// Descriptors 1 and 2 become the write ends of two pipes. A reader thread moves what arrives into
// memory (so a cell that prints more than a pipe holds never blocks); the front end takes it
// with drain() at the points where order matters (the kernel: before a picture, an input prompt, a
// result or an error, and at the end of a cell; the DAP server: also every 30 ms from a thread of
// its own).
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
    // The process's stdout and stderr from before the capture (the kernel's log, which Jupyter's
    // server keeps; the DAP server's protocol on stdout).
    int original_stdout() const { return saved_[0]; }
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
