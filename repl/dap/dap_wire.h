// dap_wire.h: DAP's framing: each message is "Content-Length: N\r\n\r\n" and N bytes of JSON.
#pragma once

#include <string>

// The largest message body read: a request past it is refused (the session ends).
constexpr size_t DAP_MOST_BODY_BYTES = size_t(64) << 20;

// Reads messages from a descriptor (blocking), keeping what it read past one.
class DapReader {
public:
    explicit DapReader(int fd) : fd_(fd) {}
    // The next message's body. False at the end of input (`error` empty) or on a header that is
    // not DAP's (`error` says what was wrong; the stream cannot be followed after it).
    bool read(std::string& body, std::string& error);

private:
    bool fill();   // read more into buffer_; false at end of input or on an error
    int fd_;
    std::string buffer_;
};

// Write one message (header and body) whole to `fd`; false when the other end is gone.
bool dap_wire_write(int fd, const std::string& body);
