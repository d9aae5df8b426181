// debugger_breaks.cpp: breakpoints — parsing, checking when added, matching events, listing.
//
// [SECTION] names        op and torch.Function names, suggestions by edit distance
// [SECTION] files        which script a "file.lua:LINE" names, and whether that line has code
// [SECTION] parse        ":break [once] [fwd|bwd] [op] NAME | node N | FILE:LINE [if CONDITION]"
// [SECTION] add          validation, descriptions, delete/enable, the :breaks table
// [SECTION] match        node events and line events against the breakpoints; conditions
#include <lua.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <set>

#include "chunk_lines.h"
#include "debugger_internal.h"
#include "plan.h"
#include "tensor_stats.h"
#include "tapedeck_lua.h"
#include "value_text.h"
#include "text_util.h"
#include "format.h"

using namespace td;

namespace dbg {

namespace {

// ============================================================================================
// [SECTION] names

// Names of the torch.Functions defined so far (lua_function.cpp keeps them in the registry)
// and of those on the tape.
std::set<std::string> function_names(lua_State* L) {
    std::set<std::string> names;
    if (lua_getfield(L, LUA_REGISTRYINDEX, TAPEDECK_FUNCTION_NAMES) == LUA_TTABLE) {
        lua_pushnil(L);
        while (lua_next(L, -2)) {
            if (lua_type(L, -2) == LUA_TSTRING) names.insert(lua_tostring(L, -2));
            lua_pop(L, 1);
        }
    }
    lua_pop(L, 1);
    for (Node* n = tape_first(); n; n = n->tape_next)
        if (n->custom() && n->op == OP_function) names.insert(n->name());
    return names;
}

}  // namespace

// Optimal string alignment distance: insertions, deletions, substitutions and swaps of two
// neighbours ("tahn" is one away from "tanh").
int edit_distance(const std::string& a, const std::string& b) {
    size_t n = a.size(), m = b.size();
    std::vector<std::vector<int>> d(n + 1, std::vector<int>(m + 1));
    for (size_t i = 0; i <= n; ++i) d[i][0] = static_cast<int>(i);
    for (size_t j = 0; j <= m; ++j) d[0][j] = static_cast<int>(j);
    for (size_t i = 1; i <= n; ++i) {
        for (size_t j = 1; j <= m; ++j) {
            int cost = a[i - 1] == b[j - 1] ? 0 : 1;
            d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
                d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
        }
    }
    return d[n][m];
}

}  // namespace dbg

using namespace dbg;

std::vector<std::string> debugger_suggest_ops(lua_State* L, const std::string& name) {
    std::vector<std::string> candidates;
    for (int i = 0; i < OP_COUNT; ++i) candidates.push_back(op_table[i].name);
    for (const std::string& f : function_names(L)) candidates.push_back(f);
    std::vector<std::pair<int, std::string>> scored;
    int limit = std::max(1, std::min(3, static_cast<int>(name.size()) / 3 + 1));
    for (const std::string& c : candidates) {
        int d = edit_distance(name, c);
        bool prefix = name.size() >= 3 && c.compare(0, name.size(), name) == 0;
        if (d <= limit || prefix) scored.emplace_back(prefix ? std::min(d, limit) : d, c);
    }
    std::sort(scored.begin(), scored.end());
    std::vector<std::string> best;
    for (size_t i = 0; i < scored.size() && i < 4; ++i) best.push_back(scored[i].second);
    return best;
}

namespace dbg {

// ============================================================================================
// [SECTION] files

bool source_matches(const std::string& source, const std::string& path) {
    std::string a = source.empty() || (source[0] != '@' && source[0] != '=') ? source : source.substr(1);
    std::string b = path;
    for (std::string* s : {&a, &b}) {
        if (s->compare(0, 2, "./") == 0) s->erase(0, 2);
        if (s->compare(0, 3, "...") == 0) s->erase(0, 3);   // a short_src cut at the front
    }
    if (a.empty() || b.empty()) return false;
    if (a == b) return true;
    const std::string& longer = a.size() > b.size() ? a : b;
    const std::string& shorter = a.size() > b.size() ? b : a;
    if (longer.compare(longer.size() - shorter.size(), shorter.size(), shorter) != 0) return false;
    return shorter[0] == '/' || longer[longer.size() - shorter.size() - 1] == '/';
}

namespace {

bool file_exists(const std::string& path) { return std::ifstream(path).good(); }

// The scripts the session knows: those ops were recorded from, and those on the Lua stack.
std::set<std::string> known_scripts(lua_State* L) {
    std::set<std::string> scripts;
    for (int i = 0;; ++i) {
        const char* name = source_file_name(i);
        if (strcmp(name, "?") == 0) break;
        scripts.insert(name);
    }
    lua_Debug ar;
    for (int level = 0; lua_getstack(L, level, &ar); ++level) {
        lua_getinfo(L, "S", &ar);
        if (ar.source[0] == '@') scripts.insert(ar.source + 1);
    }
    std::set<std::string> files;
    for (const std::string& s : scripts)
        if (s != "stdin" && s.compare(0, 3, "...") != 0 && s.compare(0, 1, "[") != 0) files.insert(s);
    return files;
}

// The path of the script "file" names: a known script it is the end of, or an existing file.
bool resolve_script(lua_State* L, const std::string& file, std::string& path, std::string& error) {
    std::vector<std::string> matches;
    for (const std::string& s : known_scripts(L))
        if (source_matches(s, file)) matches.push_back(s);
    if (matches.size() == 1) {
        path = matches[0];
        return true;
    }
    if (matches.size() > 1) {
        error = "'" + file + "' could be any of";
        for (const std::string& m : matches) error += " " + m;
        error += "; give more of the path";
        return false;
    }
    if (file_exists(file)) {
        path = file;
        return true;
    }
    error = "no script '" + file + "' has run and there is no such file (give its path, as in :break scripts/" +
            file + ":12)";
    return false;
}

// The line must hold code (a line hook can only stop at those).
bool check_code_line(lua_State* L, const std::string& path, int line, std::string& error) {
    std::vector<int> lines;
    if (!chunk_code_lines(L, path, lines, error)) return false;
    if (std::binary_search(lines.begin(), lines.end(), line)) return true;
    error = "no code on line " + std::to_string(line) + " of " + path;
    auto after = std::lower_bound(lines.begin(), lines.end(), line);
    std::string nearest;
    if (after != lines.begin()) nearest = std::to_string(*(after - 1));
    if (after != lines.end()) nearest += (nearest.empty() ? "" : " or ") + std::to_string(*after);
    if (!nearest.empty()) error += " (try " + nearest + ")";
    return false;
}

}  // namespace

// ============================================================================================
// [SECTION] parse

bool parse_condition(const std::string& text, Breakpoint& bp) {
    bp.condition_text = text;
    if (text == "nan" || text == "inf" || text == "nan or inf" || text == "inf or nan") {
        bp.condition = CONDITION_NAN;
        return true;
    }
    static const char* const STATS[] = {"min", "max", "mean", "std", "sum", "absmax", "norm", nullptr};
    static const char* const COMPARES[] = {">=", "<=", "==", "~=", "!=", ">", "<", nullptr};
    for (const char* const* stat = STATS; *stat; ++stat) {
        size_t len = strlen(*stat);
        if (text.compare(0, len, *stat) != 0) continue;
        std::string rest = text_trim(text.substr(len));
        for (const char* const* cmp = COMPARES; *cmp; ++cmp) {
            size_t cmp_len = strlen(*cmp);
            if (rest.compare(0, cmp_len, *cmp) != 0) continue;
            std::string number = text_trim(rest.substr(cmp_len));
            char* end = nullptr;
            double v = strtod(number.c_str(), &end);
            if (number.empty() || *end != '\0') return false;
            bp.condition = CONDITION_STAT;
            bp.stat = *stat;
            bp.compare = strcmp(*cmp, "!=") == 0 ? "~=" : *cmp;
            bp.value = v;
            return true;
        }
    }
    bp.condition = CONDITION_LUA;   // compiled when added
    return true;
}

namespace {

// "file.lua:12" -> file, line. False when the text does not end in ":<digits>".
bool split_file_line(const std::string& text, std::string& file, int& line) {
    size_t colon = text.rfind(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == text.size()) return false;
    for (size_t i = colon + 1; i < text.size(); ++i)
        if (!isdigit(static_cast<unsigned char>(text[i]))) return false;
    file = text.substr(0, colon);
    line = atoi(text.c_str() + colon + 1);
    return true;
}

bool is_number(const std::string& s) {
    return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return isdigit(static_cast<unsigned char>(c)); });
}

}  // namespace

}  // namespace dbg

bool debugger_parse_break(lua_State*, const std::string& text, Breakpoint& bp, std::string& error) {
    std::string rest = text_trim(text);
    std::string condition;
    size_t if_at = rest == "if" || rest.compare(0, 3, "if ") == 0 ? 0 : rest.find(" if ");
    if (if_at != std::string::npos) {
        condition = text_trim(rest.substr(if_at + (if_at == 0 ? 2 : 4)));
        rest = text_trim(rest.substr(0, if_at));
        if (condition.empty()) {
            error = "'if' needs a condition, as in :break if nan, :break if max > 1e3, :break if t:sum():item() < 0";
            return false;
        }
    }
    std::vector<std::string> words = text_split_words(rest);
    size_t w = 0;
    bool phase_given = false;
    if (w < words.size() && words[w] == "once") {
        bp.once = true;
        ++w;
    }
    if (w < words.size()) {
        const std::string& p = words[w];
        phase_given = true;
        if (p == "fwd" || p == "forward") bp.phases = BREAK_FORWARD;
        else if (p == "bwd" || p == "backward") bp.phases = BREAK_BACKWARD;
        else if (p == "both") bp.phases = BREAK_BOTH;
        else phase_given = false;
        if (phase_given) ++w;
    }
    std::vector<std::string> target(words.begin() + static_cast<long>(w), words.end());
    const char* usage = "usage: :break [once] [fwd|bwd] [op] NAME | * | fn NAME | node N | FILE:LINE [if CONDITION]";
    if (target.empty()) {
        if (condition.empty()) {
            error = usage;
            return false;
        }
        bp.target = TARGET_ANY;
    } else if (target[0] == "node") {
        if (target.size() != 2 || !is_number(target[1]) || atoll(target[1].c_str()) <= 0) {
            error = "node needs a node id, as in :break node 5";
            return false;
        }
        bp.target = TARGET_NODE;
        bp.node_id = atoll(target[1].c_str());
    } else if (target[0] == "op" && target.size() == 2) {
        bp.target = TARGET_OP;
        bp.function_name = target[1];   // resolved when added
    } else if (target[0] == "fn" && target.size() == 2) {
        bp.target = TARGET_OP;          // a torch.Function, maybe not defined yet
        bp.op = OP_function;
        bp.function_name = target[1];
    } else if (target.size() == 1 && split_file_line(target[0], bp.file, bp.line)) {
        bp.target = TARGET_LINE;
        if (!phase_given) bp.phases = BREAK_LINE;
    } else if (target.size() == 1 && is_number(target[0])) {
        bp.target = TARGET_LINE;   // a line of the stopped script
        bp.line = atoi(target[0].c_str());
        if (!phase_given) bp.phases = BREAK_LINE;
    } else if (target.size() == 1) {
        bp.target = TARGET_OP;
        bp.function_name = target[0];
    } else {
        error = usage;
        return false;
    }
    if (!condition.empty() && bp.target == TARGET_LINE && bp.phases == BREAK_LINE) {   // Lua of the frame's variables
        bp.condition = CONDITION_LUA;
        bp.condition_text = condition;
    } else if (!condition.empty() && !dbg::parse_condition(condition, bp)) {
        error = "bad condition '" + condition + "' (use nan, STAT OP NUMBER with STAT one of min max mean std sum "
                "absmax norm, or a Lua expression of t)";
        return false;
    }
    return true;
}

namespace dbg {

// ============================================================================================
// [SECTION] add

namespace {

std::string describe(const Breakpoint& bp) {
    std::string what;
    std::string phase = bp.phases == BREAK_FORWARD ? "forward of " : bp.phases == BREAK_BACKWARD ? "backward of " : "";
    switch (bp.target) {
        case TARGET_OP:
            what = phase + (bp.op == OP_COUNT ? "every op" : (bp.op == OP_function ? "function " : "op ") + bp.function_name);
            if (bp.phases == BREAK_BOTH) what += " (forward and backward)";
            break;
        case TARGET_NODE:
            what = phase + "node #" + std::to_string(bp.node_id);
            break;
        case TARGET_LINE:
            what = bp.phases == BREAK_LINE ? "line " : bp.phases == BREAK_FORWARD ? "ops of line "
                   : bp.phases == BREAK_BACKWARD                    ? "backward of line "
                                                                    : "ops and backward of line ";
            what += bp.file + ":" + std::to_string(bp.line);
            break;
        case TARGET_ANY:
            what = bp.phases == BREAK_FORWARD ? "any forward node" : bp.phases == BREAK_BACKWARD ? "any backward node" : "any node";
            break;
    }
    if (bp.condition == CONDITION_NAN) what += " where a NaN or Inf first appears";
    else if (bp.condition != CONDITION_NONE) what += " if " + bp.condition_text;
    if (bp.once) what += ", once";
    return what;
}

// The op (or torch.Function) a name means; false with suggestions in `error`.
bool resolve_op(lua_State* L, Breakpoint& bp, std::string& error) {
    const std::string& name = bp.function_name;
    if (bp.op == OP_function) return true;   // "fn NAME": a torch.Function by name, defined or not
    if (name == "*") {   // every op: after each forward op, at each backward group
        bp.op = OP_COUNT;
        return true;
    }
    OpId op;
    if (op_find(name.c_str(), &op)) {
        bp.op = op;
        bp.function_name = op_table[op].name;
        if (op != OP_function) return true;
        bp.function_name = "function";   // every torch.Function
        return true;
    }
    if (function_names(L).count(name)) {
        bp.op = OP_function;
        return true;
    }
    error = "unknown op '" + name + "'";
    std::vector<std::string> near = debugger_suggest_ops(L, name);
    if (!near.empty()) {
        error += " (did you mean";
        for (size_t i = 0; i < near.size(); ++i) error += std::string(i ? "," : "") + " " + near[i];
        error += "?)";
    } else {
        error += " (the ops are the rows of engine/core/ops.def; a torch.Function not defined yet: fn " + name + ")";
    }
    return false;
}

// Compile a Lua condition into a function of (t, node); its ref in bp.function_ref.
bool compile_condition(lua_State* L, Breakpoint& bp, std::string& error) {
    const std::string& text = bp.condition_text;
    bool is_function = text.compare(0, 8, "function") == 0;
    std::string code = is_function ? "return " + text : "return function(t, node) return " + text + " end";
    if (luaL_loadbuffer(L, code.data(), code.size(), "=condition") != LUA_OK || lua_pcall(L, 0, 1, 0) != LUA_OK) {
        error = "bad condition: " + repl_error_text(L, -1);
        lua_pop(L, 1);
        return false;
    }
    if (!lua_isfunction(L, -1)) {
        error = "the condition must be a function of the tensor, got a " + std::string(luaL_typename(L, -1));
        lua_pop(L, 1);
        return false;
    }
    bp.function_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    return true;
}

// A line breakpoint's condition is Lua over the frame's variables ("i == 3", "loss:item() > 2"),
// never the tensor grammar: a chunk "return (CONDITION)" whose _ENV is set at each test
// (line_condition_holds).
bool compile_line_condition(lua_State* L, Breakpoint& bp, std::string& error) {
    const std::string& text = bp.condition_text;
    if (bp.function_ref != LUA_NOREF || bp.condition == CONDITION_NAN || text == "nan" || text == "inf") {
        error = "a line breakpoint's condition is Lua text over the frame's variables (if i == 3); a line has no "
                "tensor to test: for one, use fwd or bwd (:break fwd FILE:LINE if nan)";
        return false;
    }
    std::string code = "return (" + bp.condition_text + ")";
    if (luaL_loadbuffer(L, code.data(), code.size(), "=condition") != LUA_OK) {
        error = "bad condition: " + repl_error_text(L, -1);
        lua_pop(L, 1);
        return false;
    }
    bp.condition = CONDITION_LUA;
    bp.function_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    return true;
}

void release_refs(lua_State* L, Breakpoint& bp) {
    if (!L) return;
    luaL_unref(L, LUA_REGISTRYINDEX, bp.function_ref);
    luaL_unref(L, LUA_REGISTRYINDEX, bp.action_ref);
    bp.function_ref = bp.action_ref = LUA_NOREF;
}

}  // namespace

}  // namespace dbg

int debugger_break_add(lua_State* L, Breakpoint bp, std::string& error) {
    bool ok = true;
    if (bp.target == TARGET_OP) {
        ok = resolve_op(L, bp, error);
    } else if (bp.target == TARGET_LINE) {
        if (bp.file.empty()) {
            const DebugStop* stop = debugger_stop();
            if (!stop || stop->frame < 0 || stop->frames[stop->frame].source[0] != '@') {
                error = "which file? give FILE:LINE, as in :break scripts/rnn_cell.lua:17";
                return 0;
            }
            bp.file = stop->frames[stop->frame].source.substr(1);
        } else {
            std::string path;
            ok = resolve_script(L, bp.file, path, error);
            bp.file = path;
        }
        ok = ok && check_code_line(L, bp.file, bp.line, error);
        if (ok && bp.phases == BREAK_LINE && bp.condition != CONDITION_NONE) ok = compile_line_condition(L, bp, error);
    }
    if (ok && bp.condition == CONDITION_LUA && bp.function_ref == LUA_NOREF && bp.phases != BREAK_LINE)
        ok = compile_condition(L, bp, error);
    if (!ok) {
        release_refs(L, bp);
        return 0;
    }
    bp.id = g.next_break_id++;
    bp.description = describe(bp);
    g.breaks.push_back(bp);
    refresh();
    return bp.id;
}

bool debugger_break_delete(lua_State* L, int id) {
    for (size_t i = 0; i < g.breaks.size(); ++i) {
        if (g.breaks[i].id != id) continue;
        release_refs(L, g.breaks[i]);
        g.breaks.erase(g.breaks.begin() + static_cast<long>(i));
        refresh();
        return true;
    }
    return false;
}

bool debugger_break_enable(int id, bool enabled) {
    for (Breakpoint& bp : g.breaks) {
        if (bp.id != id) continue;
        bp.enabled = enabled;
        refresh();
        return true;
    }
    return false;
}

bool debugger_break_ignore(int id, int count) {
    for (Breakpoint& bp : g.breaks) {
        if (bp.id != id) continue;
        bp.ignore = count;
        return true;
    }
    return false;
}

const std::vector<Breakpoint>& debugger_breakpoints() { return g.breaks; }

std::string debugger_breaks_format() {
    if (g.breaks.empty()) return "no breakpoints (set one with :break)\n";
    std::string s = "  id  on   hits  where\n";
    for (const Breakpoint& bp : g.breaks) {
        char line[64];
        snprintf(line, sizeof line, "%4d  %-3s %5d  ", bp.id, bp.enabled ? "yes" : "no", bp.hits);
        s += line + bp.description;
        if (bp.ignore > 0) s += "  (ignoring the next " + std::to_string(bp.ignore) + " hit" + (bp.ignore == 1 ? ")" : "s)");
        s += "\n";
    }
    return s;
}

namespace dbg {

int breaks_record_hit(lua_State* L, int id) {
    for (size_t i = 0; i < g.breaks.size(); ++i) {
        Breakpoint& bp = g.breaks[i];
        if (bp.id != id) continue;
        ++bp.hits;
        int action = LUA_NOREF;
        if (bp.action_ref != LUA_NOREF) {   // a copy of the ref that outlives a `once` breakpoint
            lua_rawgeti(L, LUA_REGISTRYINDEX, bp.action_ref);
            action = luaL_ref(L, LUA_REGISTRYINDEX);
        }
        if (bp.once) debugger_break_delete(L, id);
        return action;
    }
    return LUA_NOREF;
}

// ============================================================================================
// [SECTION] match

namespace {

// A breakpoint matched: when it still has hits to ignore (:ignore), count this one and use up one
// of them, and return true (it does not stop).
bool ignore_hit(int id) {
    for (Breakpoint& bp : g.breaks) {
        if (bp.id != id || bp.ignore <= 0) continue;
        ++bp.hits;
        --bp.ignore;
        return true;
    }
    return false;
}

}  // namespace

namespace {

// Does bp want this node event (before looking at its condition)?
bool wants_node(const Breakpoint& bp, Node* node, HookEvent event) {
    bool group = event == HOOK_GROUP_DONE;
    bool forward_node = node->phase == PHASE_FORWARD;
    switch (bp.target) {
        case TARGET_OP:
            if (bp.op != OP_COUNT && node->op != bp.op) return false;   // OP_COUNT: `*`, every op
            if (bp.op == OP_function && bp.function_name != "function" && bp.function_name != node->name()) return false;
            return group ? (bp.phases & BREAK_BACKWARD) != 0 : forward_node && (bp.phases & BREAK_FORWARD);
        case TARGET_NODE:   // in a frozen call, the node's recorded id names it too
            if (node->id != bp.node_id && plan_replay_recorded_id(node) != bp.node_id) return false;
            return group ? (bp.phases & BREAK_BACKWARD) != 0 : (bp.phases & BREAK_FORWARD) != 0;
        case TARGET_LINE:
            if (bp.phases == BREAK_LINE || node->where.line != bp.line) return false;
            if (!source_matches(source_file_name(node->where.file), bp.file)) return false;
            return group ? (bp.phases & BREAK_BACKWARD) != 0 : forward_node && (bp.phases & BREAK_FORWARD);
        case TARGET_ANY:
            if (group) return false;
            return (bp.phases & (forward_node ? BREAK_FORWARD : BREAK_BACKWARD)) != 0;
    }
    return false;
}

bool compare(double x, const std::string& op, double v) {
    if (op == ">") return x > v;
    if (op == ">=") return x >= v;
    if (op == "<") return x < v;
    if (op == "<=") return x <= v;
    if (op == "==") return x == v;
    return x != v;
}

double stat_of(const TensorStats& s, const std::string& stat) {
    if (stat == "min") return s.min;
    if (stat == "max") return s.max;
    if (stat == "mean") return s.mean;
    if (stat == "std") return s.std;
    if (stat == "sum") return s.sum;
    if (stat == "absmax") return s.absmax;
    return s.norm;
}

// While a condition runs: no stops, no graph, and its ops are not part of a backward group.
struct ConditionScope {
    RecordingContext saved_recording = engine_recording();
    bool saved_busy = g.busy;
    NoGradGuard no_grad;
    ConditionScope() {
        g.busy = true;
        engine_recording() = RecordingContext();
    }
    ~ConditionScope() {
        engine_recording() = saved_recording;
        g.busy = saved_busy;
    }
};

// Test bp's condition on one tensor; `label` names it in the explanation ("output", "gradient
// for input 2 (#3)"). True when it holds or fails (an error stops too, with its message).
bool condition_holds(lua_State* L, const Breakpoint& bp, Node* node, const Tensor& t, const std::string& label,
                     std::string& why) {
    if (bp.condition == CONDITION_NAN || bp.condition == CONDITION_STAT) {
        TensorStats s = tensor_stats(t.value());
        if (bp.condition == CONDITION_NAN) {
            if (s.nan + s.inf() == 0) return false;
            why = "the " + label + " has " + std::to_string(s.nan) + " NaN and " + std::to_string(s.inf()) +
                  " Inf; what it was computed from has none (:why explains it)";
            return true;
        }
        double x = stat_of(s, bp.stat);
        if (!compare(x, bp.compare, bp.value)) return false;
        why = bp.stat + " of the " + label + " = " + number_text(x, 6) + " " + bp.compare + " " + number_text(bp.value, 6);
        return true;
    }
    ConditionScope scope;
    lua_rawgeti(L, LUA_REGISTRYINDEX, bp.function_ref);
    tapedeck_push_tensor(L, t);
    tapedeck_push_node_record(L, node);
    if (lua_pcall(L, 2, 1, 0) != LUA_OK) {
        why = "error in the condition of breakpoint " + std::to_string(bp.id) + ": " +
              (lua_tostring(L, -1) ? lua_tostring(L, -1) : "(no message)") + " (:delete " + std::to_string(bp.id) +
              " or :disable " + std::to_string(bp.id) + " to stop here no more)";
        lua_pop(L, 1);
        return true;
    }
    bool holds = lua_toboolean(L, -1);
    lua_pop(L, 1);
    if (holds) why = "if " + bp.condition_text + " (on the " + label + ")";
    return holds;
}

bool all_finite(const Value& value) {
    if (!dtype_is_float(value.dtype) || value_freed(value)) return true;
    Value v = value_to_host(value);
    for (int64_t i = 0; i < v.numel(); ++i)
        if (!std::isfinite(value_get(v, i))) return false;
    return true;
}

// For `nan`: what the event starts from (a node's inputs, the gradients arriving at a group) is
// all finite, so a NaN or Inf in its result appears here first rather than flowing through.
bool sources_finite(Node* node, HookEvent event) {
    if (event == HOOK_GROUP_DONE) {
        const BackwardPass* pass = engine_backward_pass();
        for (int i = 0; i < node->outputs.size(); ++i)
            if (pass->group.grad_outputs[i].defined() && !all_finite(pass->group.grad_outputs[i].value())) return false;
        return true;
    }
    for (const Edge& e : node->inputs)
        if (!all_finite(e.value())) return false;
    return true;
}

// Test bp's condition on the tensors of the event: the outputs of a node that ran, the
// gradients a backward group produced.
bool event_condition_holds(lua_State* L, const Breakpoint& bp, Node* node, HookEvent event, std::string& why) {
    if (bp.condition == CONDITION_NONE) return true;
    if (bp.condition == CONDITION_NAN && !sources_finite(node, event)) return false;
    if (event == HOOK_GROUP_DONE) {
        const BackwardPass* pass = engine_backward_pass();
        for (int i = 0; i < node->inputs.size(); ++i) {
            const Tensor& grad = pass->group.grad_inputs[i];
            if (!grad.defined()) continue;
            std::string label = "gradient for input " + std::to_string(i + 1) + " (#" + std::to_string(node->inputs[i].id) + ")";
            if (condition_holds(L, bp, node, grad, label, why)) return true;
        }
        return false;
    }
    for (int i = 0; i < node->outputs.size(); ++i) {
        std::string label = node->outputs.size() == 1 ? "output" : "output " + std::to_string(i + 1);
        if (condition_holds(L, bp, node, Tensor(node, i), label, why)) return true;
    }
    return false;
}

}  // namespace

Hit breaks_match_node(lua_State* L, Node* node, HookEvent event) {
    Hit hit;
    for (size_t i = 0; i < g.breaks.size(); ++i) {
        if (!g.breaks[i].enabled || !wants_node(g.breaks[i], node, event)) continue;
        Breakpoint bp = g.breaks[i];   // a copy: a condition runs Lua, which may change the list
        std::string why;
        if (!event_condition_holds(L, bp, node, event, why)) continue;
        if (ignore_hit(bp.id)) continue;
        hit.id = bp.id;
        hit.why = why;
        return hit;
    }
    return hit;
}

namespace {

// Push a table of the variables of the running function `ar` of T (upvalues, then locals: the
// innermost of a name wins), whose other names read the globals.
void push_frame_env(lua_State* T, lua_Debug* ar) {
    lua_newtable(T);
    int env = lua_gettop(T);
    push_live_frame_variables(T, T, ar);
    copy_frame_variables_into(T, env);
    lua_createtable(T, 0, 1);
    lua_pushglobaltable(T);
    lua_setfield(T, -2, "__index");
    lua_setmetatable(T, env);
}

// A line breakpoint's condition at a line event: true when it holds, or fails (`why` then says so:
// the stop shows the error).
bool line_condition_holds(lua_State* T, lua_Debug* ar, const Breakpoint& bp, std::string& why) {
    if (bp.condition == CONDITION_NONE) return true;
    ConditionScope scope;
    lua_rawgeti(T, LUA_REGISTRYINDEX, bp.function_ref);
    push_frame_env(T, ar);
    lua_setupvalue(T, -2, 1);   // the chunk's _ENV
    if (lua_pcall(T, 0, 1, 0) != LUA_OK) {
        why = "error in the condition of breakpoint " + std::to_string(bp.id) + ": " + repl_error_text(T, -1) +
              " (:delete " + std::to_string(bp.id) + " or :disable " + std::to_string(bp.id) + " to stop here no more)";
        lua_pop(T, 1);
        return true;
    }
    bool holds = lua_toboolean(T, -1);
    lua_pop(T, 1);
    if (holds) why = "if " + bp.condition_text;
    return holds;
}

}  // namespace

Hit breaks_match_line(lua_State* L, lua_Debug* ar) {
    Hit hit;
    bool line_wanted = false;
    for (const Breakpoint& bp : g.breaks)
        line_wanted = line_wanted || (bp.enabled && bp.target == TARGET_LINE && bp.phases == BREAK_LINE && bp.line == ar->currentline);
    if (!line_wanted) return hit;
    lua_getinfo(L, "S", ar);
    for (size_t i = 0; i < g.breaks.size(); ++i) {
        const Breakpoint& at = g.breaks[i];
        if (!at.enabled || at.target != TARGET_LINE || at.phases != BREAK_LINE || at.line != ar->currentline ||
            !source_matches(ar->source, at.file))
            continue;
        Breakpoint bp = at;   // a copy: a condition runs Lua, which may change the list
        std::string why;
        if (!line_condition_holds(L, ar, bp, why) || ignore_hit(bp.id)) continue;
        hit.id = bp.id;
        hit.why = why;
        return hit;
    }
    return hit;
}

}  // namespace dbg
