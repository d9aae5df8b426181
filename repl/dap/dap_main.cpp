// dap_main.cpp: the DAP server's process (dap.h): the transports (stdin/stdout; a local TCP port
// with a child process per session), the captured output, and the debugger's stops read from the
// session.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <lua.hpp>

#include "dap.h"
#include "dap_session.h"
#include "debugger.h"
#include "output_capture.h"
#include "repl.h"

namespace {

DapSession*& serving_session() {
    static DapSession* session = nullptr;
    return session;
}

// The debugger's stops read their commands from the session (DapSession::read_stop_line).
class DapStopSource : public LineSource {
public:
    bool read_line(const char*, std::string& line) override {
        interrupted = false;
        return serving_session() && serving_session()->read_stop_line(line);
    }
};

LineSource& dap_stop_source() {
    static DapStopSource source;
    return source;
}

// The script's stdin is /dev/null: the protocol is no input of its.
void stdin_from_dev_null() {
    int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (null_fd >= 0) {
        dup2(null_fd, STDIN_FILENO);
        close(null_fd);
    }
}

// One session on in_fd/out_fd (-1: the process's stdout from before the capture).
int serve(lua_State* L, int in_fd, int out_fd) {
    try {
        OutputCapture output;
        DapSession session(L, in_fd, out_fd >= 0 ? out_fd : output.original_stdout(), output);
        serving_session() = &session;
        debugger_detach();
        debugger_attach(L, dap_stop_source, true);   // true: pause breaks in at the next op or line
        int status = session.run();
        debugger_detach();
        serving_session() = nullptr;
        return status;
    } catch (const std::exception& e) {
        fprintf(stderr, "tapedeck --dap: %s\n", e.what());
        return 1;
    }
}

}  // namespace

bool dap_built() { return true; }

int dap_serve_stdio(lua_State* L) {
    int in_fd = fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 3);
    if (in_fd < 0) {
        fprintf(stderr, "tapedeck --dap: cannot read stdin: %s\n", strerror(errno));
        return 1;
    }
    stdin_from_dev_null();
    return serve(L, in_fd, -1);
}

int dap_serve_port(lua_State* L, int port) {
    int listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int yes = 1;
    setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<uint16_t>(port));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);   // this machine only: a debugger runs any code it is sent
    socklen_t size = sizeof address;
    if (listener < 0 || bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 || listen(listener, 4) != 0 ||
        getsockname(listener, reinterpret_cast<sockaddr*>(&address), &size) != 0) {
        fprintf(stderr, "tapedeck --dap-port: cannot listen on 127.0.0.1:%d: %s\n", port, strerror(errno));
        return 1;
    }
    fprintf(stderr, "tapedeck: DAP server on 127.0.0.1:%d (one session per connection; Ctrl-C ends it)\n", ntohs(address.sin_port));
    fflush(stderr);
    signal(SIGCHLD, SIG_IGN);   // sessions end on their own; nobody waits for them
    signal(SIGINT, SIG_DFL);
    for (;;) {
        int connection = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
        if (connection < 0) {
            if (errno == EINTR || errno == ECONNABORTED) continue;
            fprintf(stderr, "tapedeck --dap-port: %s\n", strerror(errno));
            return 1;
        }
        pid_t child = fork();
        if (child == 0) {   // the session, with the fresh Lua state main() made
            close(listener);
            signal(SIGCHLD, SIG_DFL);
            repl_install_interrupt_handler(L);
            stdin_from_dev_null();
            int status = serve(L, connection, connection);
            close(connection);
            return status;
        }
        if (child < 0) fprintf(stderr, "tapedeck --dap-port: cannot start a session: %s\n", strerror(errno));
        close(connection);
    }
}
