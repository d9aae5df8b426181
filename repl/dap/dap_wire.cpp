// dap_wire.cpp: DAP's framing (dap_wire.h).
#include "dap_wire.h"

#include <errno.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>

namespace {

constexpr size_t MOST_HEADER_BYTES = 8192;

std::string lower(std::string s) {
    for (char& c : s) c = static_cast<char>(tolower(static_cast<unsigned char>(c)));
    return s;
}

// The Content-Length of a header block (its lines without the blank one); -1 with `error` set.
long long content_length(const std::string& header, std::string& error) {
    long long length = -1;
    for (size_t at = 0; at < header.size();) {
        size_t end = header.find("\r\n", at);
        if (end == std::string::npos) end = header.size();
        std::string line = header.substr(at, end - at);
        at = end + 2;
        size_t colon = line.find(':');
        if (colon == std::string::npos) {
            error = "a header line without ':' (" + line.substr(0, 60) + ")";
            return -1;
        }
        if (lower(line.substr(0, colon)) != "content-length") continue;   // Content-Type and the like
        std::string value = line.substr(colon + 1);
        size_t first = value.find_first_not_of(' ');
        char* stop = nullptr;
        long long n = first == std::string::npos ? -1 : strtoll(value.c_str() + first, &stop, 10);
        if (first == std::string::npos || !isdigit(static_cast<unsigned char>(value[first])) || (*stop && *stop != ' ')) {
            error = "Content-Length is not a number ('" + value.substr(0, 40) + "')";
            return -1;
        }
        length = n;
    }
    if (length < 0) error = "a message without Content-Length";
    return length;
}

}  // namespace

bool DapReader::fill() {
    char chunk[65536];
    for (;;) {
        ssize_t got = ::read(fd_, chunk, sizeof chunk);
        if (got > 0) {
            buffer_.append(chunk, static_cast<size_t>(got));
            return true;
        }
        if (got < 0 && errno == EINTR) continue;
        return false;
    }
}

bool DapReader::read(std::string& body, std::string& error) {
    error.clear();
    size_t end;
    while ((end = buffer_.find("\r\n\r\n")) == std::string::npos) {
        if (buffer_.size() > MOST_HEADER_BYTES) {
            error = "a header longer than 8 KB (is this DAP?)";
            return false;
        }
        if (!fill()) {
            if (buffer_.find_first_not_of("\r\n \t") != std::string::npos) error = "the input ended inside a message's header";
            return false;
        }
    }
    long long length = content_length(buffer_.substr(0, end), error);
    if (length < 0) return false;
    if (static_cast<unsigned long long>(length) > DAP_MOST_BODY_BYTES) {
        error = "a message of " + std::to_string(length) + " bytes (at most 64 MB)";
        return false;
    }
    size_t start = end + 4, size = static_cast<size_t>(length);
    while (buffer_.size() < start + size) {
        if (!fill()) {
            error = "the input ended inside a message (" + std::to_string(buffer_.size() - start) + " of " +
                    std::to_string(size) + " bytes)";
            return false;
        }
    }
    body = buffer_.substr(start, size);
    buffer_.erase(0, start + size);
    return true;
}

bool dap_wire_write(int fd, const std::string& body) {
    std::string message = "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
    for (size_t at = 0; at < message.size();) {
        ssize_t put = ::write(fd, message.data() + at, message.size() - at);
        if (put < 0 && errno == EINTR) continue;
        if (put <= 0) return false;
        at += static_cast<size_t>(put);
    }
    return true;
}
