// dap_session.h: one DAP session: the requests of one client, the Lua script it launches, the
// debugger's stops shown to it.
//
// Threads. The main thread runs Lua: the script, and at a debugger stop the stop's loop, whose line
// source (read_stop_line) serves requests until one resumes the program. A reader thread reads
// the client's messages into a queue; while the script runs it answers `pause` itself (the
// debugger breaks in, as on Ctrl-C), asks the debugger to call serve_while_running for requests
// that change breakpoints, and breaks in to end the program on `terminate` and `disconnect`. An
// output thread sends what the script prints as output events every 30 ms. Only the main thread
// touches Lua; sending is one mutex.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "dap_variables.h"
#include "debugger.h"

struct lua_State;
class OutputCapture;

using nlohmann::json;

class DapSession {
public:
    // The protocol on in_fd and out_fd; the script's output caught by `output`.
    DapSession(lua_State* L, int in_fd, int out_fd, OutputCapture& output);
    ~DapSession();
    // Serve until the client disconnects or its input ends. Returns the exit status.
    int run();
    // A debugger stop's line: the stop is shown to the client (a stopped event), then requests are
    // served until one resumes the program (`line` is then the ':' command that does it).
    bool read_stop_line(std::string& line);
    // On the Lua thread, from the debugger (debugger_request_service) while the script runs: serve
    // the requests that came meanwhile (breakpoints, threads; the others are refused while running).
    void serve_while_running();

    // A request's handler (the table in dap_session.cpp).
    typedef void (DapSession::*Handler)(const json& request);

private:
    // ---- messages (dap_session.cpp)
    void send(json message);
    void respond(const json& request, json body = json::object());
    void fail(const json& request, const std::string& message);
    void event(const std::string& name, json body = json::object());
    void send_output(const std::string& category, const std::string& text);
    void flush_output();   // what the program printed so far, as output events

    // ---- threads
    void reader_loop();
    void take_message(const std::string& body);
    void output_loop();
    bool next_request(json& request);   // blocks; false once the input ended and nothing is queued
    void end_program_soon();            // terminate, disconnect, input ended: break in and abandon

    // ---- dispatch
    void handle(const json& request);

    // ---- session and program (dap_session.cpp)
    void on_initialize(const json& request);
    void on_launch(const json& request);
    void on_configuration_done(const json& request);
    void on_threads(const json& request);
    void on_pause(const json& request);
    void on_terminate(const json& request);
    void on_disconnect(const json& request);
    void run_program();

    // ---- breakpoints (dap_breakpoints.cpp)
    void on_set_breakpoints(const json& request);
    void on_set_function_breakpoints(const json& request);
    void on_set_exception_breakpoints(const json& request);
    json add_breakpoint(const std::string& spec, const json& wanted, std::vector<int>& ids);
    void delete_breakpoints(std::vector<int>& ids);

    // ---- at a stop (dap_stop.cpp)
    void announce_stop();
    std::string stop_reason(const DebugStop& stop) const;
    void on_stack_trace(const json& request);
    void on_scopes(const json& request);
    void on_variables(const json& request);
    void on_set_variable(const json& request);
    void on_evaluate(const json& request);
    void on_completions(const json& request);
    void on_exception_info(const json& request);
    void on_continue(const json& request);
    void on_next(const json& request);
    void on_step_in(const json& request);
    void on_step_out(const json& request);
    void on_step_back(const json& request);
    void on_reverse_continue(const json& request);
    std::string run_command_captured(const std::string& line);
    void move_view(const json& request, const std::string& command);
    void step_forward(const json& request, const char* at_line, const char* at_op);
    void resume_with(const json& request, const std::string& command, json body = json::object());

    lua_State* L_;
    int in_fd_, out_fd_;
    OutputCapture& output_;

    std::mutex send_mutex_;
    int seq_ = 0;
    bool client_gone_ = false;   // a send failed: nobody reads any more

    std::mutex queue_mutex_;
    std::condition_variable queue_cv_;
    std::deque<json> queue_;
    bool input_ended_ = false;
    std::thread reader_, output_thread_;
    std::atomic<bool> output_running_{true};
    std::mutex capture_mutex_;   // held while a command's output is taken as its result

    // Where the session is (the reader reads it).
    enum Phase { PHASE_NEW, PHASE_READY, PHASE_RUNNING, PHASE_ENDED };
    std::atomic<int> phase_{PHASE_NEW};
    std::atomic<bool> at_stop_{false};
    std::atomic<bool> abandon_{false};   // terminate, disconnect or input ended: the program is abandoned
    std::atomic<bool> pause_asked_{false};
    bool disconnected_ = false;
    std::atomic<int> exit_status_{0};   // the reader sets 1 on a broken header

    // launch's arguments
    bool launched_ = false, configured_ = false, stop_on_entry_ = false, entry_pending_ = false, no_debug_ = false;
    std::string program_, cwd_;
    std::vector<std::string> args_;

    // the stop shown: its serial and rewound event; a resume that did not end it shows it again
    uint64_t shown_serial_ = 0, shown_rewound_ = 0;
    bool resumed_ = false;
    std::string resume_line_;
    DapVariables variables_;

    // breakpoints the client set (the debugger's ids)
    std::map<std::string, std::vector<int>> line_breaks_;   // by source path
    std::vector<int> function_breaks_;
    std::vector<int> exception_breaks_;   // the NaN filters' breakpoints
    std::map<int, std::string> exception_of_break_;   // breakpoint id -> "nan_forward" / "nan_backward"
    bool break_on_error_ = false;
};
