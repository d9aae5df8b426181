// lua_source_text.cpp: expressions read back from the user's line (lua_source_text.h): the line
// is split into Lua tokens (strings and the comment skipped), and the expression is the tokens
// around the operator or call up to what bounds an expression (a bracket that is not closed, a
// comma, `=`, a keyword).
#include "lua_source_text.h"

#include <cctype>
#include <cstring>
#include <vector>

#include "source_cache.h"

namespace tdlua {

namespace {

struct Token {
    size_t begin = 0, end = 0;
    std::string text;   // punctuation and names; "" for a string or a number
};

bool name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// Skips a string starting at `at` (a quote or a long bracket); returns the position after it.
size_t skip_string(const std::string& s, size_t at) {
    if (s[at] == '[') {
        size_t level = 0, open = at + 1;
        while (open < s.size() && s[open] == '=') ++level, ++open;
        std::string close = "]" + std::string(level, '=') + "]";
        size_t found = s.find(close, open);
        return found == std::string::npos ? s.size() : found + close.size();
    }
    char quote = s[at];
    for (size_t i = at + 1; i < s.size(); ++i) {
        if (s[i] == '\\') ++i;
        else if (s[i] == quote) return i + 1;
    }
    return s.size();
}

bool long_bracket_at(const std::string& s, size_t i) {
    if (s[i] != '[') return false;
    size_t j = i + 1;
    while (j < s.size() && s[j] == '=') ++j;
    return j < s.size() && s[j] == '[';
}

// The line's tokens, up to a comment.
std::vector<Token> tokens_of(const std::string& s) {
    static const char* const pairs[] = {"...", "==", "~=", "<=", ">=", "<<", ">>", "//", "..", "::"};
    std::vector<Token> tokens;
    size_t i = 0;
    while (i < s.size()) {
        char c = s[i];
        Token t;
        t.begin = i;
        if (std::isspace(static_cast<unsigned char>(c))) {
            ++i;
            continue;
        }
        if (c == '-' && i + 1 < s.size() && s[i + 1] == '-') break;
        if (c == '"' || c == '\'' || long_bracket_at(s, i)) {
            i = skip_string(s, i);
        } else if (std::isdigit(static_cast<unsigned char>(c)) || (c == '.' && i + 1 < s.size() && std::isdigit(static_cast<unsigned char>(s[i + 1])))) {
            while (i < s.size() && (name_char(s[i]) || s[i] == '.' ||
                                    ((s[i] == '+' || s[i] == '-') && (s[i - 1] == 'e' || s[i - 1] == 'E'))))
                ++i;
        } else if (name_char(c)) {
            while (i < s.size() && name_char(s[i])) ++i;
            t.text = s.substr(t.begin, i - t.begin);
        } else {
            size_t length = 1;
            for (const char* p : pairs)
                if (s.compare(i, strlen(p), p) == 0) {
                    length = strlen(p);
                    break;
                }
            i += length;
            t.text = s.substr(t.begin, length);
        }
        t.end = i;
        tokens.push_back(t);
    }
    return tokens;
}

bool is_comparison(const Token& t) { return t.text == "<" || t.text == "<=" || t.text == ">" || t.text == ">="; }

// Whether the token ends an expression (at bracket depth 0).
bool bounds_expression(const Token& t) {
    static const char* const words[] = {",", ";", "=", "if", "elseif", "while", "until", "return", "and", "or",
                                        "not", "then", "do", "local", "==", "~=", "<", "<=", ">", ">=", "else", "end"};
    for (const char* w : words)
        if (t.text == w) return true;
    return false;
}

// The index of the first token of the expression that ends at token `last` (walking left).
size_t expression_begin(const std::vector<Token>& tokens, size_t last) {
    int depth = 0;
    size_t first = last + 1;
    for (size_t i = last + 1; i-- > 0;) {
        const std::string& t = tokens[i].text;
        if (t == ")" || t == "]" || t == "}") ++depth;
        else if (t == "(" || t == "[" || t == "{") {
            if (--depth < 0) break;
        } else if (depth == 0 && bounds_expression(tokens[i])) break;
        first = i;
    }
    return first;
}

// The index past the last token of the expression that starts at token `first` (walking right).
size_t expression_end(const std::vector<Token>& tokens, size_t first) {
    int depth = 0;
    size_t end = first;
    for (size_t i = first; i < tokens.size(); ++i) {
        const std::string& t = tokens[i].text;
        if (t == "(" || t == "[" || t == "{") ++depth;
        else if (t == ")" || t == "]" || t == "}") {
            if (--depth < 0) break;
        } else if (depth == 0 && bounds_expression(tokens[i])) break;
        end = i + 1;
    }
    return end;
}

const std::string* line_at(td::SourceLoc where) {
    if (where.file < 0 || where.line <= 0) return nullptr;
    const std::vector<std::string>* lines = td::source_lines(td::source_file_name(where.file));
    if (!lines || where.line > static_cast<int>(lines->size())) return nullptr;
    return &(*lines)[static_cast<size_t>(where.line - 1)];
}

}  // namespace

std::string source_comparison(td::SourceLoc where) {
    const std::string* line = line_at(where);
    if (!line) return "";
    std::vector<Token> tokens = tokens_of(*line);
    size_t op = tokens.size(), count = 0;
    for (size_t i = 0; i < tokens.size(); ++i)
        if (is_comparison(tokens[i])) op = i, ++count;
    if (count != 1 || op == 0 || op + 1 >= tokens.size()) return "";
    size_t first = expression_begin(tokens, op - 1), end = expression_end(tokens, op + 1);
    if (first >= op || end <= op + 1) return "";
    return line->substr(tokens[first].begin, tokens[end - 1].end - tokens[first].begin);
}

std::string source_method_call(td::SourceLoc where, const char* method) {
    const std::string* line = line_at(where);
    if (!line) return "";
    std::vector<Token> tokens = tokens_of(*line);
    size_t colon = tokens.size(), count = 0;
    for (size_t i = 1; i + 2 < tokens.size(); ++i)
        if (tokens[i].text == ":" && tokens[i + 1].text == method && tokens[i + 2].text == "(") colon = i, ++count;
    if (count != 1) return "";
    // The receiver: names, `.` and `:` between them, calls and indexing, walking left.
    size_t first = colon;
    for (size_t i = colon; i-- > 0;) {
        const std::string& t = tokens[i].text;
        if (t == ")" || t == "]") {
            int depth = 0;
            size_t j = i + 1;
            while (j-- > 0) {
                if (tokens[j].text == ")" || tokens[j].text == "]") ++depth;
                else if ((tokens[j].text == "(" || tokens[j].text == "[") && --depth == 0) break;
            }
            if (j == static_cast<size_t>(-1)) return "";
            first = j;
            i = j;
        } else if (t == "." || t == ":" ||
                   (!t.empty() && name_char(t[0]) && !std::isdigit(static_cast<unsigned char>(t[0])) && !bounds_expression(tokens[i]))) {
            first = i;
        } else {
            break;
        }
    }
    if (first == colon) return "";
    size_t close = colon + 3;   // the call's own arguments: up to its closing bracket
    for (int depth = 1; close < tokens.size() && depth > 0; ++close) {
        if (tokens[close].text == "(") ++depth;
        else if (tokens[close].text == ")") --depth;
    }
    return line->substr(tokens[first].begin, tokens[close - 1].end - tokens[first].begin);
}

}  // namespace tdlua
