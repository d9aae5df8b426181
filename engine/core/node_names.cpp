// node_names.cpp: the names the user's script gave nodes, and expressions for the others.
#include "node_names.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <unordered_map>

#include "ops.h"
#include "source_cache.h"

namespace td {

namespace {

struct BoundName {
    std::string name;
    NameRank rank = NAME_FIELD;
};

// Names by (node id, output). Only named nodes have entries; node_destroy drops them.
std::unordered_map<int64_t, BoundName>& names() {
    static auto* table = new std::unordered_map<int64_t, BoundName>;   // immortal, as the engine's other tables
    return *table;
}

int64_t name_key(int64_t id, int output) { return id * MAX_OUTPUTS + output; }

size_t path_parts(const std::string& name) { return std::count(name.begin(), name.end(), '.'); }

// A name of the same rank does not replace the one a node has: the first variable a tensor was
// seen in (the walks look at the outermost frames first) is the one that made it. Except among
// module paths: the longer path goes through the module holding the other ("model.h.1.mlp.weight"
// beats "module.weight", which a callback of model:apply() saw while the model was being built).
bool better(NameRank rank, const std::string& name, const BoundName& old) {
    if (rank != old.rank) return rank < old.rank;
    return rank == NAME_MODULE_PATH && path_parts(name) > path_parts(old.name);
}

// Expressions longer than this are not worth reading in a banner: the node is shown by its id.
constexpr size_t LABEL_MAX = 32;

std::string scalar_text(double x) {
    char buf[32];
    snprintf(buf, sizeof buf, "%g", x);
    return buf;
}

const char* infix_symbol(OpId op) {
    switch (op) {
    case OP_add: case OP_add_scalar: return " + ";
    case OP_sub: return " - ";
    case OP_mul: case OP_mul_scalar: return " * ";
    case OP_div: case OP_div_scalar: return " / ";
    case OP_mm: case OP_bmm: return " @ ";
    default: return nullptr;
    }
}

// An input as an operand: its name, or "#id" when it has none (expressions nest one level only).
std::string operand(const Edge& e) {
    Node* producer = e.node() ? e.node() : tape_find(e.id);
    std::string name = producer ? node_bound_name(producer, e.output) : "";
    return name.empty() ? "#" + std::to_string(e.id) : name;
}

bool all_inputs_named(const Node* node) {
    for (const Edge& e : node->inputs)
        if (operand(e)[0] == '#') return false;
    return node->inputs.size() > 0;
}

// "h2h + i2h", "x * 0.5", "tanh(x)", "W_hᵀ": the node's op over its inputs' names.
std::string expression(const Node* node) {
    const auto& in = node->inputs;
    const char* symbol = infix_symbol(node->op);
    bool scalar_op = node->op == OP_add_scalar || node->op == OP_mul_scalar || node->op == OP_div_scalar;
    if (symbol && scalar_op && in.size() == 1) return operand(in[0]) + symbol + scalar_text(node->attrs().scalar);
    if (symbol && in.size() == 2) return operand(in[0]) + symbol + operand(in[1]);
    if (node->op == OP_rsub_scalar && in.size() == 1) return scalar_text(node->attrs().scalar) + " - " + operand(in[0]);
    if (node->op == OP_neg && in.size() == 1) return "-" + operand(in[0]);
    if (node->op == OP_transpose && in.size() == 1 && in[0].value().shape.ndim == 2) return operand(in[0]) + "ᵀ";
    std::string s = std::string(node->name()) + "(";
    for (int i = 0; i < in.size(); ++i) s += (i ? ", " : "") + operand(in[i]);
    return s + ")";
}

// The variable a source line assigns to: "next_h" for "next_h = (h2h + i2h):tanh()", "h" for
// "local h = ...", "cache.h" for "cache.h = ..."; "" for anything else (a multiple assignment,
// a comparison, several statements, `self.x = ...`, a line that is not an assignment).
std::string assigned_variable(std::string text) {
    if (text.compare(0, 6, "local ") == 0) text = text.substr(6);
    size_t end = 0;
    auto is_start = [](char c) { return isalpha(static_cast<unsigned char>(c)) || c == '_'; };
    auto is_part = [](char c) { return isalnum(static_cast<unsigned char>(c)) || c == '_'; };
    while (end < text.size() && is_start(text[end])) {   // name(.name)*
        while (end < text.size() && is_part(text[end])) ++end;
        if (end + 1 < text.size() && text[end] == '.' && is_start(text[end + 1])) ++end;
        else break;
    }
    std::string name = text.substr(0, end);
    size_t eq = text.find_first_not_of(' ', end);
    bool assigns = !name.empty() && eq != std::string::npos && text[eq] == '=' && text.compare(eq, 2, "==") != 0;
    if (!assigns || text.find(';') != std::string::npos || name == "self" || name.compare(0, 5, "self.") == 0) return "";
    return name;
}

bool same_line(const Node* a, const Node* b) { return a->where.file == b->where.file && a->where.line == b->where.line; }

// The forward node recorded at the top level (not inside a custom function) after n; nullptr when none yet.
Node* next_top_level(Node* n) {
    for (n = n->tape_next; n; n = n->tape_next)
        if (n->phase == PHASE_FORWARD && n->group == 0) return n;
    return nullptr;
}

}  // namespace

void node_names_from_assignments(size_t newest) {
    static int64_t settled = 0;   // nodes up to this id were looked at, and their runs had ended
    static int64_t newest_seen = 0;   // the newest id at the last call
    Node* n = tape_last();
    if (!n) return;
    // A run ends only when a later top-level forward node comes: with none among the nodes recorded
    // since the last call (a backward pass of 700,000 nodes after the last forward op), nothing
    // can change, and the walk back to `settled` below would cross all of them at every call.
    bool new_forward = false;
    size_t looked = 0;
    for (Node* m = n; m && m->id > newest_seen && !new_forward && looked < newest; m = m->tape_prev, ++looked)
        new_forward = m->phase == PHASE_FORWARD && m->group == 0;
    newest_seen = n->id;
    if (!new_forward) return;
    for (size_t walked = 1; n->tape_prev && n->tape_prev->id > settled && walked < newest; ++walked) n = n->tape_prev;
    for (; n; n = n->tape_next) {
        if (n->phase != PHASE_FORWARD || n->group != 0 || n->where.file < 0) continue;
        Node* next = next_top_level(n);
        if (!next) break;   // n's run may go on
        settled = n->id;
        if (same_line(n, next) || n->has_name) continue;
        std::string name = assigned_variable(source_line_text(source_file_name(n->where.file), n->where.line));
        if (!name.empty()) node_name_offer(n, 0, name, NAME_VARIABLE);
    }
}

void node_name_offer(Node* node, int output, const std::string& name, NameRank rank) {
    if (!node || name.empty() || output < 0 || output >= MAX_OUTPUTS) return;
    auto found = names().find(name_key(node->id, output));
    if (found == names().end()) {
        names()[name_key(node->id, output)] = BoundName{name, rank};
        node->has_name = true;
    } else if (better(rank, name, found->second)) {
        found->second = BoundName{name, rank};
    }
}

std::string node_bound_name(const Node* node, int output) {
    if (!node || !node->has_name) return "";
    auto found = names().find(name_key(node->id, output));
    return found == names().end() ? "" : found->second.name;
}

std::string node_label(const Node* node, int output) {
    std::string name = node_bound_name(node, output);
    if (!name.empty()) return name;
    std::string id = "#" + std::to_string(node->id);
    if (node->phase != PHASE_FORWARD || node->outputs.size() != 1 || !all_inputs_named(node)) return id;
    std::string text = expression(node);
    return text.size() <= LABEL_MAX ? text : id;
}

void node_names_drop(Node* node) {
    for (int i = 0; i < MAX_OUTPUTS; ++i) names().erase(name_key(node->id, i));
    node->has_name = false;
}

}  // namespace td
