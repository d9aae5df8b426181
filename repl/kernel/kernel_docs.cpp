// kernel_docs.cpp: a function's docs line from docs/lua_api.md (kernel_docs.h).
#include "kernel_docs.h"

#include <cctype>
#include <sstream>
#include <vector>

#include "lua_api_md.h"   // generated from docs/lua_api.md: lua_api_md[]
#include "ops.h"

namespace {

// The backticked spans of `text`.
std::vector<std::string> code_spans(const std::string& text) {
    std::vector<std::string> spans;
    for (size_t at = text.find('`'); at != std::string::npos;) {
        size_t end = text.find('`', at + 1);
        if (end == std::string::npos) break;
        spans.push_back(text.substr(at + 1, end - at - 1));
        at = text.find('`', end + 1);
    }
    return spans;
}

// Whether a code span names `name`: "torch.randn(d1, ...)", "x:sum(dim)", "nn.Linear(in, out)",
// "mm(b)", or a word of a list of names ("exp log sqrt").
bool span_names(const std::string& span, const std::string& name) {
    std::istringstream words(span);
    for (std::string w; words >> w;) {
        size_t end = w.find_first_of("([{,");
        std::string head = w.substr(0, end);
        size_t sep = head.find_last_of(".:");
        std::string last = sep == std::string::npos ? head : head.substr(sep + 1);
        if (last == name) return true;
        if (end != std::string::npos) break;   // after a call's "(": its arguments, not names
    }
    return false;
}

// The first table row of the docs whose first cell names `name`, as "signature — what it does".
std::string table_row_for(const std::string& name) {
    std::istringstream docs(lua_api_md);
    for (std::string line; std::getline(docs, line);) {
        if (line.rfind("| `", 0) != 0) continue;
        size_t cell_end = line.find(" | ", 2);
        if (cell_end == std::string::npos) continue;
        std::string first = line.substr(2, cell_end - 2);
        for (const std::string& span : code_spans(first)) {
            if (!span_names(span, name)) continue;
            std::string rest = line.substr(cell_end + 3);
            if (rest.size() >= 2 && rest.compare(rest.size() - 2, 2, " |") == 0) rest.resize(rest.size() - 2);
            return first + "\n    " + rest;
        }
    }
    return "";
}

// The op's line of math from ops.def ("y = tanh x"), when `name` is an op.
std::string op_math(const std::string& name) {
    for (int i = 0; i < td::OP_COUNT; ++i)
        if (name == td::op_table[i].name) return td::op_table[i].math ? td::op_table[i].math : "";
    return "";
}

}  // namespace

std::string kernel_docs_for(lua_State*, const std::string& word) {
    size_t sep = word.find_last_of(".:");
    std::string name = sep == std::string::npos ? word : word.substr(sep + 1);
    if (name.empty()) return "";
    std::string row = table_row_for(name);
    std::string math = op_math(name);
    if (row.empty() && math.empty()) return "";
    std::string text = word + "\n";
    if (!row.empty()) text += row + "\n";
    if (!math.empty()) text += "op " + name + ": " + math + "\n";
    return text;
}
