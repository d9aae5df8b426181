// dap_session.cpp: one DAP session (dap_session.h): messages, the reader and output threads, the
// request table, and the session's own requests (initialize, launch, configurationDone, threads,
// pause, terminate, disconnect) and the program's run.
//
// [SECTION] messages
// [SECTION] threads
// [SECTION] dispatch     the request table: each request, its handler and when it may come
// [SECTION] session      initialize, launch, configurationDone, threads, pause, terminate, disconnect
// [SECTION] program      running the script
#include "dap_session.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <lua.hpp>

#include "dap_wire.h"
#include "debugger.h"
#include "output_capture.h"
#include "repl.h"
#include "repl_state.h"

namespace {

DapSession* running_session = nullptr;   // the one session of this process, for the debugger's callbacks

void serve_from_debugger(lua_State*) {
    if (running_session) running_session->serve_while_running();
}

}  // namespace

DapSession::DapSession(lua_State* L, int in_fd, int out_fd, OutputCapture& output)
    : L_(L), in_fd_(in_fd), out_fd_(out_fd), output_(output) {
    running_session = this;
}

DapSession::~DapSession() {
    output_running_ = false;
    if (output_thread_.joinable()) output_thread_.join();
    if (reader_.joinable()) reader_.detach();   // blocked in read(): the process ends around it
    running_session = nullptr;
}

// ============================================================================================
// [SECTION] messages

void DapSession::send(json message) {
    std::lock_guard<std::mutex> lock(send_mutex_);
    if (client_gone_) return;
    message["seq"] = ++seq_;
    if (!dap_wire_write(out_fd_, message.dump(-1, ' ', false, json::error_handler_t::replace))) client_gone_ = true;
}

void DapSession::respond(const json& request, json body) {
    json message = {{"type", "response"}, {"request_seq", request.value("seq", 0)}, {"success", true},
                    {"command", request.value("command", "")}};
    if (!body.empty()) message["body"] = std::move(body);
    send(std::move(message));
}

void DapSession::fail(const json& request, const std::string& message) {
    std::string command = request.value("command", "");
    send(json{{"type", "response"}, {"request_seq", request.value("seq", 0)}, {"success", false}, {"command", command},
              {"message", command + ": " + message},
              {"body", {{"error", {{"id", 1}, {"format", command + ": " + message}, {"showUser", false}}}}}});
}

void DapSession::event(const std::string& name, json body) {
    json message = {{"type", "event"}, {"event", name}};
    if (!body.is_null()) message["body"] = std::move(body);
    send(std::move(message));
}

void DapSession::send_output(const std::string& category, const std::string& text) {
    if (!text.empty()) event("output", {{"category", category}, {"output", text}});
}

void DapSession::flush_output() {
    std::string out, err;
    output_.drain(out, err);
    send_output("stdout", out);
    send_output("stderr", err);
}

// ============================================================================================
// [SECTION] threads

void DapSession::reader_loop() {
    DapReader reader(in_fd_);
    std::string body, error;
    while (reader.read(body, error)) take_message(body);
    if (!error.empty()) {   // the stream cannot be followed: say so, and end as if it ended
        std::string text = "tapedeck --dap: " + error + ": ending the session\n";
        if (write(output_.original_stderr(), text.data(), text.size()) < 0) {}
        send_output("important", text);
        exit_status_ = 1;
    }
    {
        std::lock_guard<std::mutex> lock(queue_mutex_);
        input_ended_ = true;
    }
    queue_cv_.notify_all();
    end_program_soon();
}

// One message from the client: a request is queued (or answered here while the script runs).
void DapSession::take_message(const std::string& body) {
    json message = json::parse(body, nullptr, false);
    if (message.is_discarded() || !message.is_object()) {
        send_output("important", "tapedeck --dap: a message that is not a JSON object was ignored: " + body.substr(0, 80) + "\n");
        return;
    }
    if (message.value("type", "") != "request" || !message.contains("command") || !message["command"].is_string()) {
        send_output("important", "tapedeck --dap: a message that is no request was ignored: " + body.substr(0, 80) + "\n");
        return;
    }
    std::string command = message["command"];
    bool running = phase_ == PHASE_RUNNING && !at_stop_;
    if (running && command == "pause") {   // the debugger breaks in at the next op or Lua line
        respond(message);
        pause_asked_ = true;
        repl_deliver_interrupt();
        return;
    }
    {
        std::lock_guard<std::mutex> lock(queue_mutex_);
        queue_.push_back(std::move(message));
    }
    queue_cv_.notify_all();
    if (command == "disconnect" || command == "terminate") end_program_soon();
    else if (running) debugger_request_service(serve_from_debugger);
}

// Break in to abandon a running program (the stop it makes ends at once); a watchdog ends the
// process when it does not come back (a long op, a C loop) while the client is gone.
void DapSession::end_program_soon() {
    if (phase_ != PHASE_RUNNING) return;
    abandon_ = true;
    if (!at_stop_) repl_deliver_interrupt();
    bool gone;
    {
        std::lock_guard<std::mutex> lock(queue_mutex_);
        gone = input_ended_;
    }
    if (gone) std::thread([] {
        std::this_thread::sleep_for(std::chrono::seconds(5));
        _exit(0);
    }).detach();
}

void DapSession::output_loop() {
    while (output_running_) {
        std::this_thread::sleep_for(std::chrono::milliseconds(30));
        std::unique_lock<std::mutex> lock(capture_mutex_, std::try_to_lock);
        if (lock.owns_lock()) flush_output();
    }
}

bool DapSession::next_request(json& request) {
    std::unique_lock<std::mutex> lock(queue_mutex_);
    queue_cv_.wait(lock, [this] { return !queue_.empty() || input_ended_; });
    if (queue_.empty()) return false;
    request = std::move(queue_.front());
    queue_.pop_front();
    return true;
}

// ============================================================================================
// [SECTION] dispatch

namespace {

enum When : uint8_t {
    WHEN_IDLE = 1,      // before the program runs, and after it ended
    WHEN_RUNNING = 2,   // while it runs (served from the debugger's service call)
    WHEN_STOPPED = 4,   // at a stop
    WHEN_ANY = 7,
};

struct RequestRow {
    const char* command;
    DapSession::Handler handler;
    uint8_t when;
};

}  // namespace

void DapSession::handle(const json& request) {
    static const RequestRow ROWS[] = {
        {"initialize", &DapSession::on_initialize, WHEN_IDLE},
        {"launch", &DapSession::on_launch, WHEN_IDLE},
        {"configurationDone", &DapSession::on_configuration_done, WHEN_IDLE},
        {"setBreakpoints", &DapSession::on_set_breakpoints, WHEN_ANY},
        {"setFunctionBreakpoints", &DapSession::on_set_function_breakpoints, WHEN_ANY},
        {"setExceptionBreakpoints", &DapSession::on_set_exception_breakpoints, WHEN_ANY},
        {"threads", &DapSession::on_threads, WHEN_ANY},
        {"stackTrace", &DapSession::on_stack_trace, WHEN_STOPPED},
        {"scopes", &DapSession::on_scopes, WHEN_STOPPED},
        {"variables", &DapSession::on_variables, WHEN_STOPPED},
        {"setVariable", &DapSession::on_set_variable, WHEN_STOPPED},
        {"evaluate", &DapSession::on_evaluate, WHEN_STOPPED | WHEN_IDLE},
        {"completions", &DapSession::on_completions, WHEN_STOPPED | WHEN_IDLE},
        {"exceptionInfo", &DapSession::on_exception_info, WHEN_STOPPED},
        {"continue", &DapSession::on_continue, WHEN_STOPPED},
        {"next", &DapSession::on_next, WHEN_STOPPED},
        {"stepIn", &DapSession::on_step_in, WHEN_STOPPED},
        {"stepOut", &DapSession::on_step_out, WHEN_STOPPED},
        {"stepBack", &DapSession::on_step_back, WHEN_STOPPED},
        {"reverseContinue", &DapSession::on_reverse_continue, WHEN_STOPPED},
        {"pause", &DapSession::on_pause, WHEN_ANY},
        {"terminate", &DapSession::on_terminate, WHEN_ANY},
        {"disconnect", &DapSession::on_disconnect, WHEN_ANY},
    };
    std::string command = request.value("command", "");
    uint8_t now = at_stop_ ? WHEN_STOPPED : phase_ == PHASE_RUNNING ? WHEN_RUNNING : WHEN_IDLE;
    for (const RequestRow& row : ROWS) {
        if (command != row.command) continue;
        if (phase_ == PHASE_NEW && command != "initialize" && command != "disconnect")
            return fail(request, "the session is not initialized: send initialize first");
        if (!(row.when & now))
            return fail(request, now == WHEN_RUNNING ? "only while the program is stopped (it is running: pause first)"
                                 : now == WHEN_IDLE  ? "only while the program is stopped (it is not running)"
                                                     : "not while the program is stopped");
        try {
            (this->*row.handler)(request);
        } catch (const std::exception& e) {   // a malformed argument (json's type errors)
            fail(request, std::string("bad arguments: ") + e.what());
        }
        return;
    }
    fail(request, "unknown request '" + command + "'");
}

// ============================================================================================
// [SECTION] session

void DapSession::on_initialize(const json& request) {
    if (phase_ != PHASE_NEW) return fail(request, "the session is initialized already");
    json filters = json::array({
        {{"filter", "error"}, {"label", "Errors (post-mortem)"}, {"default", false},
         {"description", "stop in the failing frame, before the stack unwinds"}},
        {{"filter", "nan_forward"}, {"label", "NaN/Inf in forward"}, {"default", false},
         {"description", "stop after the first forward op that makes a NaN or Inf from finite inputs"}},
        {{"filter", "nan_backward"}, {"label", "NaN/Inf in backward"}, {"default", false},
         {"description", "stop after the first backward op that makes a NaN or Inf gradient from finite ones"}},
    });
    json capabilities = {
        {"supportsConfigurationDoneRequest", true}, {"supportsConditionalBreakpoints", true},
        {"supportsHitConditionalBreakpoints", true}, {"supportsFunctionBreakpoints", true},
        {"supportsStepBack", true}, {"supportsEvaluateForHovers", true}, {"supportsSetVariable", true},
        {"supportsTerminateRequest", true}, {"supportsExceptionInfoRequest", true},
        {"supportsCompletionsRequest", true}, {"completionTriggerCharacters", json::array({".", ":"})},
        {"exceptionBreakpointFilters", filters},
    };
    phase_ = PHASE_READY;
    respond(request, capabilities);
    event("initialized");
}

namespace {

// The keys of a launch's arguments that tapedeck does not read, said rather than ignored
// ("'env', 'console'"); the client's own keys (a configuration's name, tasks, "__" keys) are not.
std::string launch_keys_ignored(const json& arguments) {
    static const char* const READ[] = {"program", "args", "cwd", "stopOnEntry", "noDebug", "tapedeck", "type", "request",
                                       "name", "presentation", "preLaunchTask", "postDebugTask", "internalConsoleOptions",
                                       "debugServer", "serverReadyAction", "suppressMultipleSessionWarning"};
    std::string ignored;
    for (auto it = arguments.begin(); it != arguments.end(); ++it) {
        if (it.key().compare(0, 2, "__") == 0 ||
            std::find(std::begin(READ), std::end(READ), it.key()) != std::end(READ))
            continue;
        ignored += (ignored.empty() ? "'" : ", '") + it.key() + "'";
    }
    return ignored;
}

}  // namespace

void DapSession::on_launch(const json& request) {
    if (launched_) return fail(request, "the program is launched already (one program a session)");
    json arguments = request.value("arguments", json::object());
    std::string program = arguments.value("program", "");
    cwd_ = arguments.value("cwd", "");
    if (program.empty()) return fail(request, "give the Lua script to run as \"program\"");
    std::error_code error;
    if (!cwd_.empty() && !std::filesystem::is_directory(cwd_, error)) return fail(request, "no directory '" + cwd_ + "' (cwd)");
    std::filesystem::path path(program);
    if (path.is_relative() && !cwd_.empty()) path = std::filesystem::path(cwd_) / path;
    if (!std::filesystem::is_regular_file(path, error)) return fail(request, "no script '" + path.string() + "' (program)");
    program_ = std::filesystem::absolute(path, error).lexically_normal().string();
    args_.clear();
    for (const json& a : arguments.value("args", json::array())) args_.push_back(a.is_string() ? a.get<std::string>() : a.dump());
    stop_on_entry_ = arguments.value("stopOnEntry", false);
    no_debug_ = arguments.value("noDebug", false);
    launched_ = true;
    respond(request);
    std::string ignored = launch_keys_ignored(arguments);
    if (!ignored.empty())
        send_output("important", "tapedeck: launch does not read " + ignored + " (it takes program, args, cwd, stopOnEntry, noDebug)\n");
}

void DapSession::on_configuration_done(const json& request) {
    configured_ = true;
    respond(request);
}

void DapSession::on_threads(const json& request) {
    respond(request, {{"threads", json::array({{{"id", 1}, {"name", "main"}}})}});
}

void DapSession::on_pause(const json& request) {
    respond(request);   // stopped already, or not running: nothing to pause
}

void DapSession::on_terminate(const json& request) {
    respond(request);
    if (phase_ == PHASE_RUNNING) abandon_ = true;
    else if (phase_ != PHASE_ENDED) {
        phase_ = PHASE_ENDED;
        event("terminated");
    }
}

void DapSession::on_disconnect(const json& request) {
    respond(request);
    if (phase_ == PHASE_RUNNING) abandon_ = true;
    disconnected_ = true;
}

// ============================================================================================
// [SECTION] program

void DapSession::run_program() {
    phase_ = PHASE_RUNNING;
    std::error_code error;
    if (!cwd_.empty()) std::filesystem::current_path(cwd_, error);
    lua_createtable(L_, static_cast<int>(args_.size()), 1);   // arg, as lua.c makes it
    lua_pushstring(L_, program_.c_str());
    lua_rawseti(L_, -2, 0);
    for (size_t i = 0; i < args_.size(); ++i) {
        lua_pushstring(L_, args_[i].c_str());
        lua_rawseti(L_, -2, static_cast<lua_Integer>(i + 1));
    }
    lua_setglobal(L_, "arg");
    for (const std::string& a : args_) lua_pushstring(L_, a.c_str());
    entry_pending_ = stop_on_entry_ && !no_debug_;
    if (no_debug_) debugger_detach();   // Run Without Debugging: nothing stops it
    else if (stop_on_entry_) debugger_pause();
    debugger_set_post_mortem_on_error(break_on_error_);
    int status = repl_run_chunk(L_, program_, "", true, static_cast<int>(args_.size()));
    debugger_set_post_mortem_on_error(false);
    repl_state.quit_requested = false;
    {
        std::lock_guard<std::mutex> lock(capture_mutex_);
        flush_output();
    }
    phase_ = PHASE_ENDED;
    event("exited", {{"exitCode", status == LUA_OK ? 0 : 1}});
    event("terminated");
}

int DapSession::run() {
    variables_.note_startup_globals(L_);
    reader_ = std::thread([this] { reader_loop(); });
    output_thread_ = std::thread([this] { output_loop(); });
    json request;
    while (!disconnected_ && next_request(request)) {
        handle(request);
        if (launched_ && configured_ && phase_ == PHASE_READY && !disconnected_) run_program();
    }
    output_running_ = false;
    output_thread_.join();
    flush_output();
    return exit_status_;
}

void DapSession::serve_while_running() {
    std::deque<json> waiting;
    {
        std::lock_guard<std::mutex> lock(queue_mutex_);
        waiting.swap(queue_);
    }
    std::deque<json> kept;   // terminate and disconnect wait for the stop they break in to
    for (json& request : waiting) {
        std::string command = request.value("command", "");
        if (command == "terminate" || command == "disconnect") kept.push_back(std::move(request));
        else handle(request);
    }
    if (kept.empty()) return;
    std::lock_guard<std::mutex> lock(queue_mutex_);
    for (auto it = kept.rbegin(); it != kept.rend(); ++it) queue_.push_front(std::move(*it));
}
