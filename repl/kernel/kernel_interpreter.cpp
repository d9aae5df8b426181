// kernel_interpreter.cpp: execute, complete, inspect, is_complete and kernel_info for the Jupyter
// kernel (kernel_interpreter.h). A cell runs as the terminal REPL runs lines (repl.h), its output
// caught at the descriptors (output_capture.h) and sent as stream messages.
#include "kernel_interpreter.h"

#include <pthread.h>

#include <chrono>
#include <csignal>
#include <deque>
#include <lua.hpp>
#include <unordered_map>
#include <unordered_set>
#include <xeus/xinput.hpp>

#include "commands.h"
#include "completion.h"
#include "debugger.h"
#include "kernel_display.h"
#include "kernel_docs.h"
#include "format.h"
#include "kernel_rich_commands.h"
#include "repl.h"
#include "repl_state.h"
#include "tapedeck_lua.h"

namespace {

// How many nodes a stop's picture draws at most: those nearest the stopped node, so that a step
// through a real model's backward pass shows a readable neighbourhood, not a page-long graph.
constexpr size_t STOP_PICTURE_MOST_NODES = 60;

std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

// The word before the cursor that completion and inspection look at: "torch.ma", "x:su", ":gr".
size_t word_start(const std::string& code, size_t cursor) {
    size_t start = cursor;
    while (start > 0) {
        char c = code[start - 1];
        if (!(isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == ':')) break;
        --start;
    }
    return start;
}

// Byte offset of the cursor: Jupyter counts unicode code points.
size_t cursor_byte(const std::string& code, int cursor_pos) {
    size_t at = 0;
    for (int points = 0; at < code.size() && points < cursor_pos; ++points) {
        ++at;
        while (at < code.size() && (static_cast<unsigned char>(code[at]) & 0xC0) == 0x80) ++at;
    }
    return at;
}

int code_points(const std::string& text, size_t end) {
    int points = 0;
    for (size_t i = 0; i < end && i < text.size(); ++i) points += (static_cast<unsigned char>(text[i]) & 0xC0) != 0x80;
    return points;
}

// The nodes of `graph` nearest the `marked` ones (breadth first over inputs and consumers, the
// marked ones first), at most `most`, in id order; without a marked node in it, the newest `most`.
// O(graph).
td::NodeList nodes_around(const td::NodeList& graph, const std::vector<int64_t>& marked, size_t most) {
    if (graph.size() <= most) return graph;
    std::unordered_map<int64_t, const td::Node*> by_id;
    std::unordered_map<int64_t, std::vector<int64_t>> consumers;
    for (const td::Ref<td::Node>& n : graph) {
        by_id[n->id] = n.get();
        for (const td::Edge& e : n->inputs) consumers[e.id].push_back(n->id);
    }
    std::unordered_set<int64_t> kept;
    std::deque<int64_t> queue;
    for (int64_t id : marked)
        if (by_id.count(id) && kept.insert(id).second) queue.push_back(id);
    if (kept.empty()) return td::NodeList(graph.end() - static_cast<std::ptrdiff_t>(most), graph.end());
    while (!queue.empty() && kept.size() < most) {
        int64_t id = queue.front();
        queue.pop_front();
        std::vector<int64_t> next = consumers[id];
        for (const td::Edge& e : by_id[id]->inputs) next.push_back(e.id);
        for (int64_t n : next)
            if (kept.size() < most && by_id.count(n) && kept.insert(n).second) queue.push_back(n);
    }
    td::NodeList around;
    for (const td::Ref<td::Node>& n : graph)
        if (kept.count(n->id)) around.push_back(n);
    return around;
}

nl::json error_reply(const std::string& ename, const std::string& evalue, const std::vector<std::string>& trace) {
    nl::json reply;
    reply["status"] = "error";
    reply["ename"] = ename;
    reply["evalue"] = evalue;
    reply["traceback"] = trace;
    return reply;
}

}  // namespace

KernelInterpreter::KernelInterpreter(lua_State* L, OutputCapture& output) : L_(L), output_(output) {}

namespace {

// Lua's print, io.write and a file's :write on io.stdout or io.stderr, followed by the kernel's
// flush (the upvalue): a training loop's lines reach the notebook as they are printed.
const char* const LIVE_OUTPUT_LUA = R"lua(
local flush = ...
local print_then = print
print = function(...) print_then(...); flush() end
local io_write_then = io.write
io.write = function(...)
  local results = table.pack(io_write_then(...))
  flush()
  return table.unpack(results, 1, results.n)
end
local methods = getmetatable(io.stdout).__index
local file_write_then = methods.write
methods.write = function(file, ...)
  local results = table.pack(file_write_then(file, ...))
  if file == io.stdout or file == io.stderr then flush() end
  return table.unpack(results, 1, results.n)
end
)lua";

int lua_flush_output(lua_State* L) {
    static_cast<KernelInterpreter*>(lua_touserdata(L, lua_upvalueindex(1)))->flush_output_soon();
    return 0;
}

}  // namespace

void KernelInterpreter::install_live_output() {
    if (luaL_loadstring(L_, LIVE_OUTPUT_LUA) != LUA_OK) lua_error(L_);
    lua_pushlightuserdata(L_, this);
    lua_pushcclosure(L_, lua_flush_output, 1);
    lua_call(L_, 1, 0);
}

void KernelInterpreter::flush_output_soon() {
    auto now = std::chrono::steady_clock::now();
    if (now - last_flush_ >= std::chrono::milliseconds(50)) lines_in_burst_ = 0;
    if (++lines_in_burst_ > 20) return;   // more than 20 within 50 ms of each other: sent together, later
    flush_output();
}

void KernelInterpreter::flush_output() {
    last_flush_ = std::chrono::steady_clock::now();
    std::string out, err;
    output_.drain(out, err);
    if (silent_) return;
    if (!out.empty()) publish_stream("stdout", out);
    if (!err.empty()) publish_stream("stderr", err);
}

void KernelInterpreter::show(const nl::json& data) {
    flush_output();
    if (!silent_) display_data(data, nl::json::object(), nl::json::object());
}

bool KernelInterpreter::run_lua(const CellPart& part, int cell, nl::json* result, std::string* error) {
    int base = lua_gettop(L_);
    bool returns = false;
    std::string chunk_name = "=cell " + std::to_string(cell);
    int status = cell_load(L_, part, chunk_name, &returns);
    if (status == LUA_OK) status = repl_docall(L_, 0, LUA_MULTRET);
    if (status != LUA_OK) {
        const char* message = lua_tostring(L_, -1);
        *error = message ? message : "(error object is not a string)";
        lua_settop(L_, base);
        return false;
    }
    if (returns && lua_gettop(L_) > base) *result = kernel_display_values(L_, base + 1);
    lua_settop(L_, base);
    return true;
}

void KernelInterpreter::run_command(const std::string& line) {
    flush_output();
    RichCommandResult rich = kernel_rich_command(L_, line);
    if (!rich.hidden.empty()) {   // the command's own lines about a temporary file go
        std::string out, err, kept;
        output_.drain(out, err);
        for (size_t at = 0; at < out.size();) {
            size_t end = std::min(out.find('\n', at), out.size() - 1) + 1;
            if (out.substr(at, end - at).find(rich.hidden) == std::string::npos)
                kept += out.substr(at, end - at);
            at = end;
        }
        if (!silent_ && !kept.empty()) publish_stream("stdout", kept);
        if (!silent_ && !err.empty()) publish_stream("stderr", err);
    }
    flush_output();
    for (const nl::json& data : rich.displays) show(data);
    if (!rich.keep_going) printf("(:quit does not end a notebook's kernel: use the notebook's Kernel menu)\n");
}

nl::json KernelInterpreter::execute_request_impl(int execution_counter, const std::string& code, bool silent, bool,
                                                 nl::json, bool allow_stdin) {
    silent_ = silent;
    allow_stdin_ = allow_stdin;
    said_no_stdin_ = false;
    cell_ = execution_counter;
    stop_display_id_.clear();
    stop_shown_.clear();
    tapedeck_set_current_state(L_);
    nl::json result;
    std::string error;
    for (const CellPart& part : cell_split(code)) {
        result = nullptr;
        if (part.is_command) run_command(part.text);
        else if (!run_lua(part, execution_counter, &result, &error)) break;
        if (repl_quit_requested()) break;   // :abort or :quit at a stop: the rest of the cell is dropped
    }
    repl_state.quit_requested = false;
    flush_output();
    if (!error.empty()) {
        std::string text = cell_error_text(error);
        bool interrupted = text.find("interrupted!") != std::string::npos;
        std::string ename = interrupted ? "Interrupted" : "LuaError";
        std::string evalue = interrupted ? "interrupted (the kernel keeps its state: globals, tensors, breakpoints)" : first_line(text);
        std::vector<std::string> trace;
        for (size_t at = 0; at <= text.size();) {
            size_t end = text.find('\n', at);
            trace.push_back(text.substr(at, end == std::string::npos ? std::string::npos : end - at));
            if (end == std::string::npos) break;
            at = end + 1;
        }
        if (!silent) publish_execution_error(ename, evalue, trace);
        return error_reply(ename, evalue, trace);
    }
    if (!silent && result.is_object()) publish_execution_result(execution_counter, result, nl::json::object());
    nl::json reply;
    reply["status"] = "ok";
    reply["payload"] = nl::json::array();
    reply["user_expressions"] = nl::json::object();
    return reply;
}

nl::json KernelInterpreter::complete_request_impl(const std::string& code, int cursor_pos) {
    size_t cursor = cursor_byte(code, cursor_pos);
    size_t start = word_start(code, cursor);
    size_t line_begin = code.rfind('\n', start == 0 ? 0 : start - 1);
    line_begin = line_begin == std::string::npos || start == 0 ? 0 : line_begin + 1;
    bool line_start = code.find_first_not_of(" \t", line_begin) >= start;
    std::string word = code.substr(start, cursor - start);
    nl::json reply;
    reply["matches"] = repl_completions(L_, word, line_start);
    reply["cursor_start"] = code_points(code, start);
    reply["cursor_end"] = code_points(code, cursor);
    reply["metadata"] = nl::json::object();
    reply["status"] = "ok";
    return reply;
}

nl::json KernelInterpreter::inspect_request_impl(const std::string& code, int cursor_pos, int) {
    size_t cursor = cursor_byte(code, cursor_pos);
    size_t end = cursor;
    while (end < code.size() && (isalnum(static_cast<unsigned char>(code[end])) || code[end] == '_')) ++end;
    std::string word = code.substr(word_start(code, cursor), end - word_start(code, cursor));
    std::string text = kernel_docs_for(L_, word);
    nl::json reply;
    reply["status"] = "ok";
    reply["found"] = !text.empty();
    reply["data"] = nl::json::object();
    if (!text.empty()) reply["data"]["text/plain"] = text;
    reply["metadata"] = nl::json::object();
    return reply;
}

nl::json KernelInterpreter::is_complete_request_impl(const std::string& code) {
    nl::json reply;
    reply["status"] = cell_completeness(L_, code);
    if (reply["status"] == "incomplete") reply["indent"] = "  ";
    return reply;
}

nl::json KernelInterpreter::kernel_info_request_impl() {
    nl::json info;
    info["implementation"] = "tapedeck";
    info["implementation_version"] = TAPEDECK_VERSION;
    info["protocol_version"] = "5.3";
    info["banner"] = std::string("tapedeck ") + TAPEDECK_VERSION +
                     " (Lua 5.4): autograd you can step through. :help lists the commands.";
    info["language_info"]["name"] = "lua";
    info["language_info"]["version"] = "5.4";
    info["language_info"]["mimetype"] = "text/x-lua";
    info["language_info"]["file_extension"] = ".lua";
    info["language_info"]["codemirror_mode"] = "lua";
    info["language_info"]["pygments_lexer"] = "lua";
    info["help_links"] = nl::json::array();
    info["status"] = "ok";
    return info;
}

// ---------------------------------------------------------------------------------------------
// The stepper inline

void KernelInterpreter::show_stop_picture() {
    const DebugStop* stop = debugger_stop();
    if (!stop || silent_) return;
    // The graph being differentiated (backward), or the one the stopped op belongs to (forward);
    // at a Lua line, the newest nodes of the tape.
    td::NodeList nodes = stop->pass && stop->pass->root ? td::graph_collect(td::Tensor(stop->pass->root, 0))
                         : stop->node                   ? td::graph_collect(td::Tensor(stop->node.get(), 0))
                                                        : td::tape_nodes();
    if (int64_t newest = debugger_rewound_newest_id()) {   // rewound: the graph as it stood then
        td::NodeList then;
        for (const td::Ref<td::Node>& n : nodes) if (n->id <= newest) then.push_back(n);
        nodes.swap(then);
    }
    std::vector<int64_t> marked = debugger_marked_nodes();
    size_t whole = nodes.size();
    nodes = nodes_around(nodes, marked, STOP_PICTURE_MOST_NODES);
    std::string shown = std::to_string(stop->serial) + "/" + std::to_string(stop->rewound_to) + "/" +
                        std::to_string(nodes.size());
    if (shown == stop_shown_) return;   // a command that moved nothing (:p x): the picture stays
    stop_shown_ = shown;
    nl::json data = kernel_display_graph(nodes, marked);
    if (nodes.size() < whole)
        data["text/plain"] = "the " + std::to_string(nodes.size()) + " nodes nearest the stop, of the graph's " +
                             std::to_string(whole) + " (:graph shows them all)";
    nl::json transient;
    bool first = stop_display_id_.empty();
    if (first) stop_display_id_ = "tapedeck-stop-" + std::to_string(cell_) + "-" + std::to_string(stop->serial);
    transient["display_id"] = stop_display_id_;
    flush_output();
    if (first) display_data(data, nl::json::object(), transient);
    else update_display_data(data, nl::json::object(), transient);
}

bool KernelInterpreter::read_stop_line(const char* prompt, std::string& line) {
    show_stop_picture();
    flush_output();
    if (!allow_stdin_) {
        if (!said_no_stdin_) printf("(this notebook's frontend cannot answer the debugger's prompt: continuing)\n");
        said_no_stdin_ = true;
        line = ":continue";
        return true;
    }
    // SIGUSR2 (the interrupt thread's wake-up, kernel_main.cpp) is blocked in this thread but
    // during this wait: so it ends this wait only, never a send or a poll of xeus's. One that came
    // after the wait ended is taken here, unseen.
    sigset_t wake;
    sigemptyset(&wake);
    sigaddset(&wake, SIGUSR2);
    bool interrupted = false;
    waiting_for_input = true;
    pthread_sigmask(SIG_UNBLOCK, &wake, nullptr);
    try {
        line = xeus::blocking_input_request(prompt, false);
    } catch (const std::exception&) {   // interrupted while waiting: the cell is abandoned
        interrupted = true;
    }
    pthread_sigmask(SIG_BLOCK, &wake, nullptr);
    waiting_for_input = false;
    struct timespec now = {0, 0};
    while (sigtimedwait(&wake, nullptr, &now) > 0) {}
    if (interrupted) {
        printf("interrupted at the debugger's prompt: the cell is abandoned\n");
        line = ":abort";
    }
    return true;
}
