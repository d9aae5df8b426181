// kernel_main.cpp: the kernel's process (kernel.h): signals, captured output, the debugger's
// prompt through Jupyter's input, xeus's kernel; and the kernelspec.
#include "kernel.h"

#include <pthread.h>
#include <unistd.h>

#include <csignal>
#include <ext/stdio_filebuf.h>
#include <iostream>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <lua.hpp>
#include <memory>
#include <thread>
#include <xeus/xkernel.hpp>
#include <xeus/xkernel_configuration.hpp>
#include <xeus/xserver_zmq.hpp>

#include "debugger.h"
#include "kernel_history.h"
#include "kernel_interpreter.h"
#include "repl.h"
#include "tape.h"

namespace {

// The kernel's one interpreter, for the debugger's line source (a plain function pointer).
KernelInterpreter*& running_interpreter() {
    static KernelInterpreter* interpreter = nullptr;
    return interpreter;
}

// The debugger's stops read their commands from the notebook (KernelInterpreter::read_stop_line).
LineSource& kernel_stop_source() {
    static FunctionLineSource source([](const char* prompt, std::string& line) {
        return running_interpreter() && running_interpreter()->read_stop_line(prompt, line);
    });
    return source;
}

void on_wake(int) {}   // SIGUSR2: only ends a blocking wait for the frontend's input (EINTR)

// Jupyter interrupts a kernel with SIGINT. It is blocked in every thread but this one, which
// takes it with sigwait: so ZeroMQ's waits never see EINTR, and running Lua stops as in the
// terminal ("interrupted!"). While a stop waits for the frontend's answer, the main thread gets
// SIGUSR2 instead, which ends that wait (the cell is abandoned).
void interrupt_thread(pthread_t main_thread) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    for (;;) {
        int signal = 0;
        if (sigwait(&set, &signal) != 0) continue;
        KernelInterpreter* interpreter = running_interpreter();
        if (!interpreter || !interpreter->waiting_for_input) {
            repl_deliver_interrupt();
            continue;
        }
        // Again every 50 ms while the wait goes on: a signal that came between sending the input
        // request and starting to wait for its answer interrupted nothing.
        for (int tries = 0; tries < 40 && interpreter->waiting_for_input; ++tries) {
            pthread_kill(main_thread, SIGUSR2);
            usleep(50000);
        }
    }
}

void block_sigint_start_thread() {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGUSR2);                    // unblocked only while a stop waits (read_stop_line)
    pthread_sigmask(SIG_BLOCK, &set, nullptr);   // threads made from now on inherit it
    struct sigaction action {};
    action.sa_handler = on_wake;                 // no SA_RESTART: the wait returns EINTR
    sigemptyset(&action.sa_mask);
    sigaction(SIGUSR2, &action, nullptr);
    std::thread(interrupt_thread, pthread_self()).detach();
}

}  // namespace

bool kernel_built() { return true; }

int kernel_run(lua_State* L, const std::string& connection_file) {
    if (!std::filesystem::is_regular_file(connection_file)) {
        fprintf(stderr, "tapedeck --kernel: no connection file '%s' (Jupyter writes one and starts the kernel with it)\n",
                connection_file.c_str());
        return 1;
    }
    xeus::xconfiguration config;
    try {
        config = xeus::load_configuration(connection_file);
    } catch (const std::exception& e) {
        fprintf(stderr, "tapedeck --kernel: cannot read the connection file '%s': %s\n", connection_file.c_str(), e.what());
        return 1;
    }
    block_sigint_start_thread();
    td::engine_keep_backward_graph(true);   // a person looks at the graphs afterwards, as at the REPL
    lua_newtable(L);                        // `arg`, as lua.c always makes it: no script, no arguments
    lua_setglobal(L, "arg");
    debugger_detach();
    debugger_attach(L, kernel_stop_source, false);
    static OutputCapture output;   // lives until exit: xeus ends the process from inside start()
    // Immortal: the streams flush through it after static destructors ran (std::exit in start()).
    auto* kernel_log = new __gnu_cxx::stdio_filebuf<char>(dup(output.original_stderr()), std::ios::out);
    std::clog.rdbuf(kernel_log);   // xeus's log lines go to the kernel's log, not into a cell:
    std::cerr.rdbuf(kernel_log);   // its errors too ("received bad message": a comm nobody opened)
    auto interpreter = std::make_unique<KernelInterpreter>(L, output);
    running_interpreter() = interpreter.get();
    interpreter->install_live_output();
    xeus::register_interpreter(interpreter.get());
    KernelInterpreter* cells = interpreter.get();
    auto history = std::make_unique<KernelHistory>([cells] { return cells->execution_count(); });
    auto context = xeus::make_context<zmq::context_t>();
    xeus::xkernel kernel(config, xeus::get_user_name(), std::move(context), std::move(interpreter),
                         xeus::make_xserver_zmq, std::move(history), nullptr,
                         xeus::make_null_debugger, nl::json::object(), nl::json::error_handler_t::replace);
    kernel.start();
    return 0;
}
