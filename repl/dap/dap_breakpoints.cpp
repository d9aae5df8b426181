// dap_breakpoints.cpp: setBreakpoints, setFunctionBreakpoints and setExceptionBreakpoints as the
// debugger's own breakpoints (the same as :break makes), replaced whole at each request as DAP says.
#include <lua.hpp>

#include "dap_session.h"
#include "debugger.h"

namespace {

// DAP's hitCondition as the debugger's counts: "N" and ">= N" stop at the Nth hit and after
// (the first N - 1 hits ignored), "== N" at the Nth only. False, with `error` set, for another form.
bool parse_hit_condition(const std::string& text, int* ignore, bool* once, std::string& error) {
    std::string s = text;
    s.erase(0, s.find_first_not_of(' '));
    *once = s.compare(0, 2, "==") == 0;
    if (*once || s.compare(0, 2, ">=") == 0) s.erase(0, 2);
    char* end = nullptr;
    long n = strtol(s.c_str(), &end, 10);
    while (end && *end == ' ') ++end;
    if (s.empty() || !end || *end != '\0' || n < 1 || n > 1000000000) {
        error = "hit condition '" + text + "' is not one tapedeck counts: give N or >= N (stop at the Nth hit and after) or == N (the Nth only)";
        return false;
    }
    *ignore = static_cast<int>(n - 1);
    return true;
}

json unverified(const std::string& message) { return json{{"verified", false}, {"message", message}}; }

}  // namespace

json DapSession::add_breakpoint(const std::string& spec, const json& wanted, std::vector<int>& ids) {
    Breakpoint bp;
    std::string error;
    int line = wanted.value("line", 0);
    if (line > 0) {   // a line of a file: made here, as a path may hold spaces the :break grammar splits at
        bp.target = TARGET_LINE;
        bp.phases = BREAK_LINE;
        bp.file = spec;
        bp.line = line;
        bp.condition_text = wanted.value("condition", "");
        bp.condition = bp.condition_text.empty() ? CONDITION_NONE : CONDITION_LUA;
    } else if (!debugger_parse_break(L_, spec, bp, error)) {
        return unverified(error);
    }
    if (wanted.contains("logMessage"))   // a logpoint would stop instead of logging: refused, not made a breakpoint
        return unverified("logpoints are not supported (tapedeck stops at a breakpoint; print from the debug console)");
    int ignore = 0;
    bool once = false;
    std::string hits = wanted.value("hitCondition", "");
    if (!hits.empty() && !parse_hit_condition(hits, &ignore, &once, error)) return unverified(error);
    bp.once = once;
    int id = debugger_break_add(L_, bp, error);
    if (!id) return unverified(error);
    if (ignore) debugger_break_ignore(id, ignore);
    ids.push_back(id);
    return json{{"id", id}, {"verified", true}};
}

void DapSession::delete_breakpoints(std::vector<int>& ids) {
    for (int id : ids) debugger_break_delete(L_, id);   // one that `once` deleted already is no matter
    ids.clear();
}

void DapSession::on_set_breakpoints(const json& request) {
    json arguments = request.value("arguments", json::object());
    json source = arguments.value("source", json::object());
    std::string path = source.value("path", "");
    if (path.empty()) return fail(request, "give source.path: tapedeck sets breakpoints in files");
    std::vector<int>& ids = line_breaks_[path];
    delete_breakpoints(ids);
    json results = json::array();
    for (const json& wanted : arguments.value("breakpoints", json::array())) {
        json result = add_breakpoint(path, wanted, ids);
        result["line"] = wanted.value("line", 0);
        result["source"] = source;
        results.push_back(result);
    }
    respond(request, {{"breakpoints", results}});
}

void DapSession::on_set_function_breakpoints(const json& request) {
    json arguments = request.value("arguments", json::object());
    delete_breakpoints(function_breaks_);
    json results = json::array();
    for (const json& wanted : arguments.value("breakpoints", json::array())) {
        std::string spec = wanted.value("name", "");
        std::string condition = wanted.value("condition", "");
        if (!condition.empty()) spec += " if " + condition;
        json line_free = wanted;
        line_free.erase("line");
        results.push_back(spec.empty() ? unverified("give an op, as :break takes it: softmax, bwd softmax, fwd tanh, fn MyFunction")
                                       : add_breakpoint(spec, line_free, function_breaks_));
    }
    respond(request, {{"breakpoints", results}});
}

void DapSession::on_set_exception_breakpoints(const json& request) {
    json arguments = request.value("arguments", json::object());
    delete_breakpoints(exception_breaks_);
    exception_of_break_.clear();
    break_on_error_ = false;
    json results = json::array();
    for (const json& filter : arguments.value("filters", json::array())) {
        std::string name = filter.is_string() ? filter.get<std::string>() : "";
        if (name == "error") {
            break_on_error_ = true;
            results.push_back(json{{"verified", true}});
        } else if (name == "nan_forward" || name == "nan_backward") {
            json result = add_breakpoint(name == "nan_forward" ? "fwd if nan" : "bwd if nan", json::object(), exception_breaks_);
            if (result.value("verified", false)) exception_of_break_[result["id"].get<int>()] = name;
            results.push_back(result);
        } else {
            results.push_back(unverified("no exception filter '" + name + "' (error, nan_forward, nan_backward)"));
        }
    }
    if (phase_ == PHASE_RUNNING && !at_stop_) debugger_set_post_mortem_on_error(break_on_error_);
    respond(request, {{"breakpoints", results}});
}
