// lua_syntax_hints.cpp: the line a Lua syntax error gets when the code is a Python habit
// (tapedeck_lua.h: tapedeck_syntax_hint): keyword arguments, w -= 0.1, x[3:5], import torch, **, @,
// !=. The REPL and the script loader add it below Lua's own message.
//
//   torch.zeros(2, 3, dtype=torch.float64)   ')' expected near '='
//     -> hint: Lua has no keyword arguments: options go in a table, torch.zeros(2, 3, {dtype = torch.float64})
#include <cctype>
#include <cstdlib>
#include <regex>
#include <string>
#include <vector>

#include "tapedeck_lua.h"

namespace {

std::string trim(const std::string& s) {
    size_t first = s.find_first_not_of(" \t\r"), last = s.find_last_not_of(" \t\r");
    return first == std::string::npos ? "" : s.substr(first, last - first + 1);
}

// The line of `chunk` that Lua's message ("name:12: ...") points at; the whole chunk without one.
std::string error_line(const std::string& chunk, const std::string& message) {
    std::smatch m;
    if (!std::regex_search(message, m, std::regex(":(\\d+): "))) return chunk;
    long wanted = std::strtol(m[1].str().c_str(), nullptr, 10);
    size_t start = 0;
    for (long line = 1; line < wanted; ++line) {
        start = chunk.find('\n', start);
        if (start == std::string::npos) return "";
        ++start;
    }
    size_t end = chunk.find('\n', start);
    return chunk.substr(start, end == std::string::npos ? std::string::npos : end - start);
}

// f(a, name=value, ...) -> f(a, {name = value, ...}): the first `name=` inside parentheses (not in
// a table constructor) to the parenthesis that closes its call; "" when the line has none.
std::string keyword_arguments_rewritten(const std::string& line) {
    std::vector<char> open;   // the brackets open at each position
    for (size_t i = 0; i < line.size(); ++i) {
        char c = line[i];
        if (c == '"' || c == '\'') {   // skip a string
            size_t close = line.find(c, i + 1);
            if (close == std::string::npos) return "";
            i = close;
        } else if (c == '(' || c == '{' || c == '[') {
            open.push_back(c);
        } else if (c == ')' || c == '}' || c == ']') {
            if (!open.empty()) open.pop_back();
        } else if (!open.empty() && open.back() == '(' && (std::isalpha(static_cast<unsigned char>(c)) || c == '_') &&
                   (i == 0 || !(std::isalnum(static_cast<unsigned char>(line[i - 1])) || line[i - 1] == '_' || line[i - 1] == '.'))) {
            size_t name_end = i;
            while (name_end < line.size() && (std::isalnum(static_cast<unsigned char>(line[name_end])) || line[name_end] == '_')) ++name_end;
            size_t eq = line.find_first_not_of(" \t", name_end);
            if (eq == std::string::npos || line[eq] != '=' || (eq + 1 < line.size() && line[eq + 1] == '=')) {
                i = name_end - 1;
                continue;
            }
            size_t depth = open.size(), close = i;   // the ')' of this call
            for (size_t level = depth; close < line.size(); ++close) {
                char d = line[close];
                if (d == '(' || d == '{' || d == '[') ++level;
                if (d == ')' || d == '}' || d == ']') {
                    if (level == depth && d == ')') break;
                    --level;
                }
            }
            if (close >= line.size()) return "";
            std::string options = std::regex_replace(trim(line.substr(i, close - i)), std::regex("([A-Za-z_]\\w*)\\s*=\\s*(?!=)"), "$1 = ");
            for (const auto& [python, lua] : {std::pair<const char*, const char*>{"\\bTrue\\b", "true"}, {"\\bFalse\\b", "false"}, {"\\bNone\\b", "nil"}})
                options = std::regex_replace(options, std::regex(python), lua);
            return line.substr(0, i) + "{" + options + "}" + line.substr(close);
        }
    }
    return "";
}

// A Python index or slice bound as Lua's 1-based, inclusive one: a start or an index counts from
// 1 (a literal n >= 0 is n + 1, a negative one stays), an end is inclusive (a negative n is n - 1).
std::string lua_bound(const std::string& text, bool is_end) {
    std::string t = trim(text);
    char* rest = nullptr;
    long n = std::strtol(t.c_str(), &rest, 10);
    bool literal = !t.empty() && *rest == '\0';
    if (!literal) return is_end ? t : t + " + 1";
    if (is_end) return std::to_string(n < 0 ? n - 1 : n);
    return std::to_string(n < 0 ? n : n + 1);
}

// x[a:b, i] -> x[{{a + 1, b}, i + 1}] (and x:narrow for one slice of literals); "" when the line
// holds no Python slice.
std::string slice_hint(const std::string& line) {
    std::smatch m;
    if (!std::regex_search(line, m, std::regex("([A-Za-z_][\\w.]*)\\[([^\\[\\]]*:[^\\[\\]]*)\\]"))) return "";
    std::string object = m[1].str(), inside = m[2].str(), lua;
    std::vector<std::string> parts;
    size_t start = 0;
    for (size_t comma; (comma = inside.find(',', start)) != std::string::npos; start = comma + 1) parts.push_back(inside.substr(start, comma - start));
    parts.push_back(inside.substr(start));
    std::string narrow;
    for (size_t i = 0; i < parts.size(); ++i) {
        std::string part = trim(parts[i]), piece;
        size_t colon = part.find(':');
        if (colon == std::string::npos) {
            piece = lua_bound(part, false);
        } else {
            std::string a = trim(part.substr(0, colon)), rest = part.substr(colon + 1), b = rest, step;
            size_t second = rest.find(':');
            if (second != std::string::npos) b = rest.substr(0, second), step = trim(rest.substr(second + 1));
            b = trim(b);
            if (a.empty() && b.empty() && step.empty()) piece = "{}";
            else piece = "{" + (a.empty() ? "1" : lua_bound(a, false)) + ", " + (b.empty() ? "-1" : lua_bound(b, true)) +
                         (step.empty() ? "" : ", " + step) + "}";
            char* end_a = nullptr;
            char* end_b = nullptr;
            long va = std::strtol(a.c_str(), &end_a, 10), vb = std::strtol(b.c_str(), &end_b, 10);
            if (parts.size() == 1 && step.empty() && !a.empty() && !b.empty() && *end_a == '\0' && *end_b == '\0' && va >= 0 && vb > va)
                narrow = ", or " + object + ":narrow(1, " + std::to_string(va + 1) + ", " + std::to_string(vb - va) + ")";
        }
        lua += (i ? ", " : "") + piece;
    }
    return "Lua has no a:b slices: " + object + "[{" + lua + "}] is Python's " + object + "[" + trim(inside) +
           "] (1-based, both ends included)" + narrow;
}

// w -= v (also +=, *=, /=): the Lua spellings, a new value or the tensor changed in place.
std::string augmented_assignment_hint(const std::string& line) {
    std::smatch m;
    if (!std::regex_match(line, m, std::regex("\\s*([A-Za-z_][\\w.\\[\\]]*)\\s*([-+*/])=\\s*(.*?)\\s*;?\\s*"))) return "";
    std::string target = m[1].str(), op = m[2].str(), value = m[3].str();
    const char* method = op == "+" ? "add_" : op == "-" ? "sub_" : "mul_";
    bool number = std::regex_match(value, std::regex("[0-9.eE+-]+"));
    std::string in_place = target + ":" + method + "(" + (op == "/" ? (number ? "1 / " + value : "1 / (" + value + ")") : value) + ")";
    return "Lua has no " + op + "=: " + target + " = " + target + " " + op + " " + value + " makes a new value; " + in_place +
           " changes a tensor in place (under torch.no_grad for a parameter)";
}

}  // namespace

std::string tapedeck_syntax_hint(const std::string& chunk, const std::string& message) {
    std::string line = error_line(chunk, message);
    std::smatch m;
    if (std::regex_search(line, m, std::regex("^\\s*(import|from)\\s+([A-Za-z_][\\w.]*)"))) {
        std::string module = m[2].str();
        if (module == "torch" || module.rfind("torch.", 0) == 0)
            return "hint: torch (and torch.nn as nn, torch.nn.functional as F, torch.optim as optim) is loaded already: "
                   "no import is needed";
        return "hint: Lua has no import: require \"" + module + "\" loads a Lua module";
    }
    if (message.find("near '='") != std::string::npos) {
        std::string rewritten = keyword_arguments_rewritten(line);
        if (!rewritten.empty()) return "hint: Lua has no keyword arguments; options go in a table: " + trim(rewritten);
    }
    if (message.find("near ':") != std::string::npos) {   // ':' and '::' (x[::2])
        std::string hint = slice_hint(line);
        if (!hint.empty()) return "hint: " + hint;
    }
    std::string augmented = augmented_assignment_hint(line);
    if (!augmented.empty()) return "hint: " + augmented;
    if (line.find("**") != std::string::npos && message.find("near '*'") != std::string::npos)
        return "hint: Lua's power is ^: x ^ 2 (or x:pow(2))";
    if (message.find("near '@'") != std::string::npos)
        return "hint: Lua has no @: a:matmul(b), or torch.mm(a, b) for matrices";
    if (line.find("!=") != std::string::npos && message.find("near '!'") != std::string::npos)
        return "hint: Lua's not-equal is ~=: a ~= b";
    return "";
}
