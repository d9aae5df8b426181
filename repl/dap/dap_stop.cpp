// dap_stop.cpp: the session at a debugger stop: the stopped event, stack frames (the op whose
// gradient is being computed first, at its forward line), scopes and variables, evaluate and
// setVariable, and the stepping requests mapped to the debugger's commands (docs/debugger.md).
//
// [SECTION] the stop     serving requests at a stop, the stopped event and its one-line description
// [SECTION] frames       stackTrace, scopes, variables, setVariable, exceptionInfo
// [SECTION] evaluate     Lua in the stop's context, ':' commands in the debug console, completions
// [SECTION] stepping     continue, next, stepIn, stepOut, stepBack, reverseContinue
#include <lua.hpp>

#include <algorithm>
#include <filesystem>

#include "commands.h"
#include "completion.h"
#include "dap_session.h"
#include "debugger.h"
#include "history.h"
#include "node_names.h"
#include "output_capture.h"
#include "repl.h"
#include "tapedeck_lua.h"
#include "value_text.h"

namespace {

constexpr int OP_FRAME_ID = 1;   // the op frame; Lua frame i of the stop is i + 2

std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

// A node as the banner names it: "att (softmax)" by its name; an expression of its inputs' names
// that shows its op already as it is ("softmax(att)"), else with its op ("num / den (div)");
// without either "#12 softmax".
std::string node_text(const td::Node* node) {
    std::string label = td::node_label(node);
    std::string op = node->shown_op();
    if (label.empty() || label[0] == '#') return "#" + std::to_string(node->id) + " " + op;
    if (label.compare(0, op.size() + 1, op + "(") == 0) return label;
    return label + " (" + op + ")";
}

// The forward node a stop is about: a backward group's, or the one a backward node differentiates.
const td::Node* forward_node_of(const DebugStop& stop) {
    const td::Node* node = stop.node.get();
    if (node && node->phase == td::PHASE_BACKWARD && stop.kind == STOP_NODE) return td::tape_find(node->group);
    return node;
}

// A DAP source for a chunk's file: its absolute path when it is a file; else its name alone.
json source_of(const std::string& file) {
    std::string name = file;
    if (!name.empty() && (name[0] == '@' || name[0] == '=')) name = name.substr(1);
    std::error_code error;
    if (!name.empty() && std::filesystem::is_regular_file(name, error)) {
        std::string path = std::filesystem::absolute(name, error).lexically_normal().string();
        return json{{"name", std::filesystem::path(path).filename().string()}, {"path", path}};
    }
    return json{{"name", name.empty() ? "?" : name}, {"presentationHint", "deemphasize"}};
}

}  // namespace

// ============================================================================================
// [SECTION] the stop

bool DapSession::read_stop_line(std::string& line) {
    at_stop_ = true;
    debugger_set_post_mortem_on_error(false);   // an error in what the client evaluates opens no post-mortem
    line.clear();
    const DebugStop* stop = debugger_stop();
    if (!abandon_ && stop && (resumed_ || stop->serial != shown_serial_ || stop->rewound_to != shown_rewound_)) announce_stop();
    resumed_ = false;
    while (line.empty()) {
        if (abandon_) {   // terminate, disconnect, or the input ended: answer what waits, then abandon
            std::deque<json> waiting;
            {
                std::lock_guard<std::mutex> lock(queue_mutex_);
                waiting.swap(queue_);
            }
            for (const json& request : waiting) handle(request);
            line = ":abort";
            break;
        }
        json request;
        if (!next_request(request)) {
            abandon_ = true;
            continue;
        }
        handle(request);
        stop = debugger_stop();
        if (!resume_line_.empty()) {
            line.swap(resume_line_);
            resumed_ = true;
        } else if (stop && (stop->serial != shown_serial_ || stop->rewound_to != shown_rewound_)) {
            announce_stop();   // the view moved (stepBack, :back in the console)
        }
    }
    variables_.clear(L_);   // references end when the program moves on
    debugger_set_post_mortem_on_error(break_on_error_);
    at_stop_ = false;
    return true;
}

std::string DapSession::stop_reason(const DebugStop& stop) const {
    if (stop.rewound_to) return "step";
    if (stop.kind == STOP_POST_MORTEM || exception_of_break_.count(stop.breakpoint)) return "exception";
    if (entry_pending_) return "entry";
    if (stop.breakpoint) {   // the client's (an "== N" one is gone: it stopped once), else one set in the console
        auto has = [&](const std::vector<int>& ids) { return std::find(ids.begin(), ids.end(), stop.breakpoint) != ids.end(); };
        if (has(function_breaks_)) return "function breakpoint";
        for (const auto& file : line_breaks_)
            if (has(file.second)) return "breakpoint";
        for (const Breakpoint& bp : debugger_breakpoints())
            if (bp.id == stop.breakpoint) return bp.target == TARGET_LINE && bp.phases == BREAK_LINE ? "breakpoint" : "function breakpoint";
        return "breakpoint";   // a `once` breakpoint, deleted when it stopped
    }
    if (stop.reason == "Ctrl-C" || stop.reason == "pause") return "pause";
    return "step";
}

namespace {

// The stop in one line, in the script's names: "backward: grad of att (softmax)".
std::string stop_description(const DebugStop& stop) {
    if (stop.rewound_to) {
        const td::HistoryEvent* e = td::history_event(stop.rewound_to);
        if (!e) return "rewound";
        const td::Node* n = td::tape_find(e->node_id);
        std::string what = n ? node_text(n) : "#" + std::to_string(e->node_id) + " " + e->op;
        return "rewound " + std::to_string(stop.live_event - stop.rewound_to) + " back: " +
               (e->group ? "backward: grad of " : "forward: ") + what;
    }
    const td::Node* node = stop.node.get();
    switch (stop.kind) {
        case STOP_POST_MORTEM: return "error: " + first_line(stop.error);
        case STOP_LINE: {
            if (stop.frame < 0) return "line";
            const DebugFrame& f = stop.frames[stop.frame];
            return "line " + std::filesystem::path(f.short_src).filename().string() + ":" + std::to_string(f.line);
        }
        case STOP_GROUP: return "backward: grad of " + node_text(node);
        case STOP_NODE:
            if (node->phase == td::PHASE_FORWARD) return "forward: " + node_text(node);
            if (const td::Node* forward = forward_node_of(stop)) return "backward: " + node_text(node) + " in grad of " + node_text(forward);
            return "backward: " + node_text(node);
    }
    return "";
}

}  // namespace

void DapSession::announce_stop() {
    const DebugStop* stop = debugger_stop();
    variables_.clear(L_);
    std::string banner = debugger_banner();   // names the tensors by the script's variables, too
    std::string description = stop_description(*stop);
    auto exception = exception_of_break_.find(stop->breakpoint);
    if (!stop->rewound_to && exception != exception_of_break_.end())
        description = std::string(exception->second == "nan_forward" ? "NaN/Inf in forward: " : "NaN/Inf in backward: ") +
                      description.substr(description.find(": ") + 2) + (stop->why.empty() ? "" : ": " + stop->why);
    json body = {{"reason", stop_reason(*stop)}, {"description", description}, {"threadId", 1},
                 {"allThreadsStopped", true}, {"text", banner}};
    if (stop->breakpoint && !stop->rewound_to) body["hitBreakpointIds"] = json::array({stop->breakpoint});
    {
        std::lock_guard<std::mutex> lock(capture_mutex_);
        flush_output();   // the banner the stop printed comes before the event
    }
    entry_pending_ = false;
    shown_serial_ = stop->serial;
    shown_rewound_ = stop->rewound_to;
    event("stopped", body);
}

// ============================================================================================
// [SECTION] frames

void DapSession::on_stack_trace(const json& request) {
    const DebugStop& stop = *debugger_stop();
    json frames = json::array();
    const td::HistoryEvent* rewound = stop.rewound_to ? td::history_event(stop.rewound_to) : nullptr;
    const td::Node* forward = rewound ? td::tape_find(rewound->node_id) : forward_node_of(stop);
    if (forward && (rewound || (stop.kind != STOP_LINE && stop.kind != STOP_POST_MORTEM))) {   // the op, at its forward line
        bool backward = rewound ? rewound->group : stop.phase == td::PHASE_BACKWARD;
        td::SourceLoc where = rewound ? rewound->where : forward->where;
        json frame = {{"id", OP_FRAME_ID}, {"name", (backward ? "grad of " : "") + node_text(forward)},
                      {"line", where.line}, {"column", 1}};
        if (where.file >= 0) frame["source"] = source_of(td::source_file_name(where.file));
        frames.push_back(frame);
    }
    for (size_t i = 0; i < stop.frames.size(); ++i) {
        const DebugFrame& f = stop.frames[i];
        if (f.what == "C") continue;
        std::string name = !f.name.empty() ? f.name : f.what == "main" ? "main chunk" : "function at line " + std::to_string(f.line_defined);
        json frame = {{"id", static_cast<int>(i) + 2}, {"name", name}, {"line", f.line}, {"column", 1},
                      {"source", source_of(f.source)}};
        if (f.source.compare(0, strlen(TAPEDECK_LIBRARY_CHUNK), TAPEDECK_LIBRARY_CHUNK) == 0) frame["presentationHint"] = "subtle";
        frames.push_back(frame);
    }
    json arguments = request.value("arguments", json::object());
    size_t first = arguments.value("startFrame", 0), levels = arguments.value("levels", 0);
    json shown = json::array();
    for (size_t i = first; i < frames.size() && (levels == 0 || i < first + levels); ++i) shown.push_back(frames[i]);
    respond(request, {{"stackFrames", shown}, {"totalFrames", frames.size()}});
}

void DapSession::on_scopes(const json& request) {
    const DebugStop& stop = *debugger_stop();
    int id = request.at("arguments").at("frameId").get<int>();
    bool has_stop = stop.rewound_to || stop.kind == STOP_NODE || stop.kind == STOP_GROUP;
    int frame = id == OP_FRAME_ID ? stop.frame : id - 2;
    if (frame >= static_cast<int>(stop.frames.size()) || (id != OP_FRAME_ID && frame < 0)) return fail(request, "no frame " + std::to_string(id));
    auto scope = [&](const char* name, DapScope kind, const char* hint) {
        json s = {{"name", name}, {"variablesReference", variables_.add_scope(kind, frame)}, {"expensive", false}};
        if (hint) s["presentationHint"] = hint;
        return s;
    };
    json scopes = json::array();
    if (has_stop && id == OP_FRAME_ID) scopes.push_back(scope("Stop", DAP_STOP, nullptr));
    if (frame >= 0) {
        scopes.push_back(scope("Locals", DAP_LOCALS, "locals"));
        scopes.push_back(scope("Upvalues", DAP_UPVALUES, nullptr));
    }
    if (has_stop && id != OP_FRAME_ID) scopes.push_back(scope("Stop", DAP_STOP, nullptr));
    scopes.push_back(scope("Globals", DAP_GLOBALS, nullptr));
    respond(request, {{"scopes", scopes}});
}

void DapSession::on_variables(const json& request) {
    json out;
    std::string error;
    if (!variables_.children(L_, request.at("arguments").at("variablesReference").get<int>(), out, error)) return fail(request, error);
    respond(request, {{"variables", out}});
}

void DapSession::on_set_variable(const json& request) {
    const json& arguments = request.at("arguments");
    json out;
    std::string error;
    if (!variables_.set(L_, arguments.at("variablesReference").get<int>(), arguments.at("name").get<std::string>(),
                        arguments.at("value").get<std::string>(), out, error))
        return fail(request, error);
    respond(request, {{"value", out["value"]}, {"type", out["type"]}, {"variablesReference", out["variablesReference"]}});
}

void DapSession::on_exception_info(const json& request) {
    const DebugStop& stop = *debugger_stop();
    auto exception = exception_of_break_.find(stop.breakpoint);
    if (stop.kind == STOP_POST_MORTEM)
        return respond(request, {{"exceptionId", "error"}, {"description", first_line(stop.error)}, {"breakMode", "always"},
                                 {"details", {{"message", stop.error}}}});
    if (exception == exception_of_break_.end()) return fail(request, "this stop is no exception (a breakpoint or a step)");
    respond(request, {{"exceptionId", exception->second}, {"description", stop.why}, {"breakMode", "always"},
                      {"details", {{"message", stop.why}, {"typeName", stop_description(stop)}}}});
}

// ============================================================================================
// [SECTION] evaluate

std::string DapSession::run_command_captured(const std::string& line) {
    std::lock_guard<std::mutex> lock(capture_mutex_);
    flush_output();   // what was printed before is no part of the command's answer
    if (!command_run(L_, line[0] == ':' ? line.substr(1) : line)) abandon_ = true;   // :quit
    std::string out, err;
    output_.drain(out, err);
    return out + err;
}

namespace {

// The ':' commands that resume the program: from the debug console they end the stop as the
// stepping requests do.
bool is_resume_command(const std::string& line) {
    std::string word = line.substr(0, line.find(' '));
    for (const char* c : {"step", "s", "stepi", "si", "next", "n", "finish", "fin", "continue", "c", "until", "unt", "abort", "quit", "q"})
        if (word == c) return true;
    return false;
}

}  // namespace

void DapSession::on_evaluate(const json& request) {
    const json& arguments = request.at("arguments");
    std::string expression = arguments.at("expression").get<std::string>();
    std::string context = arguments.value("context", "repl");
    int frame_id = arguments.value("frameId", 0);
    if (at_stop_ && frame_id >= 2 && !dap_select_frame(frame_id - 2)) return fail(request, "no Lua frame " + std::to_string(frame_id));
    if (context == "repl" && !expression.empty() && expression[0] == ':') {
        std::string line = expression.substr(1);
        if (at_stop_ && is_resume_command(line)) return resume_with(request, ":" + line, {{"result", ""}, {"variablesReference", 0}});
        std::string text = run_command_captured(line);
        return respond(request, {{"result", text}, {"variablesReference", 0}});
    }
    int base = lua_gettop(L_);
    int status = repl_load(L_, "return " + expression, "=evaluate");
    if (status != LUA_OK && context == "repl") {   // a statement: x = 1
        lua_settop(L_, base);
        status = repl_load(L_, expression, "=evaluate");
    }
    if (status == LUA_OK) status = repl_docall(L_, 0, LUA_MULTRET);
    {
        std::lock_guard<std::mutex> lock(capture_mutex_);
        flush_output();   // what it printed comes before its value
    }
    if (status != LUA_OK) {
        std::string message = repl_error_text(L_, -1);
        lua_settop(L_, base);
        return fail(request, context == "repl" ? message : first_line(message));
    }
    std::string result;
    int reference = 0;
    for (int i = base + 1; i <= lua_gettop(L_); ++i) {
        std::string text = context == "repl" ? repl_value_text(L_, i) : repl_nested_value_text(L_, i);
        result += (i > base + 1 ? "\t" : "") + text;
        if (i == base + 1 && lua_gettop(L_) == base + 1) reference = variables_.variable(L_, "", i)["variablesReference"];
    }
    lua_settop(L_, base);
    respond(request, {{"result", result}, {"variablesReference", reference}});
}

// The debug console's completions: the terminal's Tab words (the stop's locals and names, globals,
// fields, methods, ':' commands at the start).
void DapSession::on_completions(const json& request) {
    const json& arguments = request.at("arguments");
    std::string text = arguments.at("text").get<std::string>();
    size_t column = std::min(text.size(), static_cast<size_t>(std::max(1, arguments.at("column").get<int>()) - 1));
    size_t start = column;
    while (start > 0) {
        char c = text[start - 1];
        if (!(isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == ':')) break;
        --start;
    }
    int frame_id = arguments.value("frameId", 0);
    if (at_stop_ && frame_id >= 2) dap_select_frame(frame_id - 2);
    bool line_start = text.find_first_not_of(" \t") >= start;
    json targets = json::array();
    for (const std::string& word : repl_completions(L_, text.substr(start, column - start), line_start))
        targets.push_back({{"label", word}, {"start", static_cast<int>(start)}, {"length", static_cast<int>(column - start)}});
    respond(request, {{"targets", targets}});
}

// ============================================================================================
// [SECTION] stepping

void DapSession::resume_with(const json& request, const std::string& command, json body) {
    respond(request, std::move(body));
    resume_line_ = command;
}

namespace {

bool can_step(const DebugStop& stop, std::string& why) {
    if (stop.kind != STOP_POST_MORTEM) return true;
    why = "a post-mortem stop cannot step: the program has failed (continue ends it)";
    return false;
}

}  // namespace

void DapSession::on_continue(const json& request) {
    resume_with(request, ":continue", {{"allThreadsContinued", true}});
}

// Move the rewound view (stepBack, reverseContinue, a step while rewound): the response, then a
// stopped event at the event shown; an error response with the debugger's reason when it cannot.
void DapSession::move_view(const json& request, const std::string& command) {
    uint64_t before = debugger_stop()->rewound_to;
    std::string text = run_command_captured(command);
    if (debugger_stop()->rewound_to == before) return fail(request, text.empty() ? "the view did not move" : first_line(text));
    respond(request);
    announce_stop();
}

// next and stepIn: `at_line` at a line stop, `at_op` at an op or backward stop; while rewound the
// view moves on instead (to the live stop at most).
void DapSession::step_forward(const json& request, const char* at_line, const char* at_op) {
    const DebugStop& stop = *debugger_stop();
    std::string why;
    if (stop.rewound_to) return move_view(request, ":forward step");
    if (!can_step(stop, why)) return fail(request, why);
    resume_with(request, stop.kind == STOP_LINE ? at_line : at_op);
}

void DapSession::on_next(const json& request) { step_forward(request, ":next", ":step"); }

void DapSession::on_step_in(const json& request) { step_forward(request, ":step", ":stepi"); }

void DapSession::on_step_out(const json& request) {
    std::string why;
    if (!can_step(*debugger_stop(), why)) return fail(request, why);
    resume_with(request, ":finish");
}

void DapSession::on_step_back(const json& request) { move_view(request, ":back step"); }

void DapSession::on_reverse_continue(const json& request) {
    const DebugStop& stop = *debugger_stop();
    uint64_t from = stop.rewound_to ? stop.rewound_to : stop.live_event;
    uint64_t oldest = td::history_oldest_serial();
    if (oldest == 0 || from <= oldest) return fail(request, oldest == 0 ? "the rewind history holds nothing (:history says why)" : "at the oldest event the history holds");
    move_view(request, ":back " + std::to_string(from - oldest));
}
