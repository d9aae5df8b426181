// output_capture.cpp: stdout and stderr caught at the descriptors (output_capture.h).
#include "output_capture.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cstdio>
#include <stdexcept>

namespace {

// The length of the longest prefix of `text` that ends at a whole UTF-8 character.
size_t whole_utf8_prefix(const std::string& text) {
    size_t n = text.size();
    size_t back = 0;   // continuation bytes at the end
    while (back < 3 && back < n && (static_cast<unsigned char>(text[n - 1 - back]) & 0xC0) == 0x80) ++back;
    if (back == n) return n;
    unsigned char lead = static_cast<unsigned char>(text[n - 1 - back]);
    size_t need = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
    return need > back + 1 ? n - 1 - back : n;   // the last character is cut: keep it for later
}

}  // namespace

OutputCapture::OutputCapture() {
    fflush(stdout);
    fflush(stderr);
    if (pipe2(wake_, O_CLOEXEC) != 0) throw std::runtime_error("tapedeck: cannot make a pipe to capture the output");
    for (int which = 0; which < 2; ++which) {
        int fds[2];
        if (pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error("tapedeck: cannot make a pipe to capture the output");
        fcntl(fds[0], F_SETFL, O_NONBLOCK);
        fcntl(fds[0], F_SETPIPE_SZ, 1 << 20);
        saved_[which] = dup(1 + which);
        dup2(fds[1], 1 + which);
        close(fds[1]);
        read_end_[which] = fds[0];
    }
    setvbuf(stdout, nullptr, _IOFBF, 1 << 16);   // a pipe now: flushed by drain()
    reader_ = std::thread([this] { reader_loop(); });
}

OutputCapture::~OutputCapture() {
    fflush(stdout);
    fflush(stderr);
    char end = 'x';
    if (write(wake_[1], &end, 1) != 1) {}
    reader_.join();
    for (int which = 0; which < 2; ++which) {
        dup2(saved_[which], 1 + which);
        close(saved_[which]);
        close(read_end_[which]);
    }
    close(wake_[0]);
    close(wake_[1]);
}

void OutputCapture::read_available(int which) {
    char buffer[1 << 14];
    for (;;) {
        ssize_t got = read(read_end_[which], buffer, sizeof buffer);
        if (got <= 0) return;
        pending_[which].append(buffer, static_cast<size_t>(got));
    }
}

void OutputCapture::reader_loop() {
    for (;;) {
        struct pollfd fds[3] = {{read_end_[0], POLLIN, 0}, {read_end_[1], POLLIN, 0}, {wake_[0], POLLIN, 0}};
        if (poll(fds, 3, -1) < 0) continue;   // EINTR
        if (fds[2].revents) return;
        std::lock_guard<std::mutex> lock(mutex_);
        for (int which = 0; which < 2; ++which)
            if (fds[which].revents) read_available(which);
    }
}

void OutputCapture::drain(std::string& out, std::string& err) {
    fflush(stdout);
    fflush(stderr);
    std::lock_guard<std::mutex> lock(mutex_);
    std::string* taken[2] = {&out, &err};
    for (int which = 0; which < 2; ++which) {
        read_available(which);
        size_t whole = whole_utf8_prefix(pending_[which]);
        taken[which]->assign(pending_[which], 0, whole);
        pending_[which].erase(0, whole);
    }
}
