// node_names.h: the user's names for nodes — the variable, table field or module path a node's
// output was bound to in the script ("next_h", "model.fc1.weight") — and, for a node nobody
// named, a short expression of its inputs' names ("h2h + i2h").
//
// The engine does not see Lua variables: the Lua side offers names (lua_bindings/lua_names.cpp
// walks globals, the running frames' locals and modules when the debugger stops, the viewer
// redraws, or a graph is printed or exported), and everyone who shows a node — the debugger's
// banners, :graph, DOT, the viewer — reads them here. A name stays with its node until the node
// dies, so a loop's `h` keeps naming the iteration it was seen in after the variable moved on.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>

#include "tape.h"

namespace td {

// How good a name is. A node keeps the best rank offered; among names of one rank, the first
// offered (lua_names.cpp offers the globals, then the locals of the outermost frame first, so a
// tensor is named where it was made rather than by a helper function's parameter). Of two module
// paths, the longer wins: it names the parameter through the module that holds the other's.
enum NameRank : uint8_t {
    NAME_MODULE_PATH = 0,   // a parameter or buffer by its module path: "model.0.weight"
    NAME_VARIABLE = 1,      // a Lua global or local holding the tensor: "loss"
    NAME_FIELD = 2,         // a field of a plain table: "cache.h", "hs[3]"
};

// Offer `name` for output `output` of `node`; kept when the node has none, or one of a worse rank.
void node_name_offer(Node* node, int output, const std::string& name, NameRank rank);

// Names from the script's assignments, for nodes no variable holds any more: a node that ends a
// run of nodes recorded at one source line `next_h = (h2h + i2h):tanh()` (or `local h = ...`, or
// `cache.h = ...`) is what the line assigned, and is offered that name as a variable. Looks at the
// nodes recorded since the last call only (a run still growing waits for the next call), and of
// those at most the newest `newest` (the viewer's window of a long tape: a frame drawn while a
// 50,000-step loop runs would otherwise read the source line of every node since the last one).
void node_names_from_assignments(size_t newest = SIZE_MAX);

// The name bound to output `output` of `node`; empty when it has none.
std::string node_bound_name(const Node* node, int output = 0);

// How people read a node's output in a banner or a label: its bound name; else, for a node
// whose inputs are named, a short expression ("h2h + i2h", "tanh(x)", "W_hᵀ"); else "#12".
std::string node_label(const Node* node, int output = 0);

// Called by node_destroy for a node that has a name.
void node_names_drop(Node* node);

}  // namespace td
