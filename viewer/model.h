// model.h: what the Graph window draws, built from the tape, with no GL and no Graphviz in it.
//
// Two steps, both on the Lua thread:
//   records_update()  copies what the viewer shows of each live node into a NodeRecord (no
//                     pointers into the engine: the layout thread and later frames read copies);
//   view_build()      turns the records into boxes and edges: groups collapsed into one box,
//                     shared parameters copied next to each use ("ghosts"), forward<->backward
//                     edges set apart (drawn on top, never given to Graphviz), and at most
//                     `node_cap` boxes around the node of interest.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "tape.h"

namespace td {

// ---------------------------------------------------------------------------------------------
// Records

struct NodeRecord {
    int64_t id = 0;
    std::string op;             // "mm", "transpose(0,1)", "MyReLU"
    std::string shape;          // output shapes, "[20,1]" (several separated by spaces)
    std::string dtype;          // of output 0
    Phase phase = PHASE_FORWARD;
    int64_t group = 0;          // backward: the forward node it differentiates (engine's group)
    int64_t inner_of = 0;       // the custom-function node that ran this node inside it; 0: none
    bool is_leaf = false;       // no autograd history (inputs, parameters, data)
    bool requires_grad = false;
    bool is_function = false;   // a custom function (has inner nodes to expand)
    bool executed = true;       // false while it waits to run (stopped before it)
    SourceLoc where;
    std::vector<int64_t> inputs;   // producer ids, one per input
    std::string name;           // a Lua global naming its tensor ("W_h"), when one does
};

// Bring `records` (sorted by id) up to date with the tape: dead nodes' records go, new nodes get
// one, records of live nodes are kept, with what can change after recording (a leaf's requires_grad)
// refreshed. `running` holds the nodes that started but did not finish.
void records_update(std::vector<NodeRecord>& records, const std::unordered_set<int64_t>& running);
// The record with this id, or nullptr (binary search).
const NodeRecord* record_find(const std::vector<NodeRecord>& records, int64_t id);

// ---------------------------------------------------------------------------------------------
// Groups that collapse into one box

enum ClusterKind : uint8_t {
    CLUSTER_FUNCTION,   // a torch.Function call and the ops it ran (engine: inner_nodes)
    CLUSTER_LOOP,       // one iteration of a Lua loop (found from source lines going back)
    CLUSTER_LINE,       // consecutive ops of one source line (an nn.Module call, a long expression)
    CLUSTER_BACKWARD,   // the backward nodes of one forward box (engine: group)
};

enum ClusterState : uint8_t {
    CLUSTER_PLAIN,       // not grouped: its nodes are drawn as ordinary boxes
    CLUSTER_COLLAPSED,   // one box
    CLUSTER_EXPANDED,    // its nodes, in a frame with a title (Graphviz cluster)
};

struct Cluster {
    std::string key;             // stable across rebuilds: "fn:12", "loop:0:16:7", "line:0:17:9", "bwd:n10"
    ClusterKind kind = CLUSTER_LINE;
    ClusterState state = CLUSTER_PLAIN;
    Phase phase = PHASE_FORWARD;
    std::string title;           // "loop lines 16-19 #7", "MyReLU #12", "grad of tanh #10"
    std::vector<int64_t> members;   // node ids, ascending
};

// Loop iterations and same-line runs among the top-level forward records (not inner nodes).
// Loop iterations need at least two runs of source lines that restart at the same line.
std::vector<Cluster> clusters_detect(const std::vector<NodeRecord>& records, bool loops, bool lines);

// ---------------------------------------------------------------------------------------------
// The view: boxes and edges

enum BoxKind : uint8_t {
    BOX_NODE,      // one node
    BOX_GHOST,     // a copy of a shared node next to one of its uses
    BOX_STUB,      // an input whose node is gone ("#5")
    BOX_CLUSTER,   // a collapsed group
};

struct ViewBox {
    std::string key;         // stable across rebuilds ("n12", "g:n1>n6", "c:loop:0:16:7")
    BoxKind kind = BOX_NODE;
    int64_t node_id = 0;     // the node shown (cluster: its last member, the one whose value leaves it)
    int cluster = -1;        // BOX_CLUSTER: index into GraphView::clusters
    int frame = -1;          // the expanded cluster it is drawn inside (index), or -1
    int ghost_of = -1;       // BOX_GHOST: index of the box it copies
    Phase phase = PHASE_FORWARD;
    bool is_leaf = false, requires_grad = false, executed = true, is_function = false;
    int member_count = 1;    // nodes it stands for
    std::string title, detail, extra;   // label lines (extra may be empty)
    float width = 0, height = 0;        // layout units (= pixels at zoom 1)
};

struct ViewEdge {
    int from = 0, to = 0;    // box indices: producer -> consumer
    bool cross = false;      // joins a forward box and a backward box: not laid out, drawn on top
};

struct ViewOptions {
    bool ghosts = true;              // copy shared leaves next to each use
    int ghost_hub = 4;               // ... and any box used by this many boxes or more
    bool collapse_loops = false;     // one box per loop iteration
    bool collapse_lines = false;     // one box per multi-op source line
    bool collapse_backward = false;  // one box per forward node's backward group
    int node_cap = 1500;             // most boxes shown; past it, the neighbourhood of the focus
    bool operator==(const ViewOptions& o) const;
    bool operator!=(const ViewOptions& o) const { return !(*this == o); }
};

// Width and height of a text in layout units (the window passes ImGui's measure).
typedef std::function<void(const std::string& text, float* width, float* height)> TextMeasure;
void text_measure_estimate(const std::string& text, float* width, float* height);   // 7x13 per char

struct ViewInput {
    const std::vector<NodeRecord>* records = nullptr;
    ViewOptions options;
    std::unordered_map<std::string, bool> user_expanded;   // cluster key -> opened (true) / closed
    int64_t stop_node = 0;      // its groups open while stopped there
    int64_t focus_node = 0;     // centre of the neighbourhood when capped (0: the newest node)
    TextMeasure measure = text_measure_estimate;
};

struct GraphView {
    std::vector<ViewBox> boxes;      // nodes and groups by id (forward, then backward), stubs, ghosts
    std::vector<ViewEdge> edges;
    std::vector<Cluster> clusters;   // every cluster found, with its state
    std::unordered_map<int64_t, int> box_of_node;   // every shown node -> the box that shows it
    std::unordered_map<std::string, int> box_by_key;
    int total_boxes = 0;             // before the cap (of the nodes kept by the first cut, below)
    int total_nodes = 0;             // records given
    int64_t cap_focus = 0;           // node the capped view is centred on; 0 when not capped
    int box_of(int64_t node_id) const;   // -1 when not shown
};

// The view of the records. Past twice the node cap, the records nearest the focus are picked
// first (records_near), so that a huge tape costs what the cap costs; inputs left out are drawn
// as stubs ("not shown").
GraphView view_build(const ViewInput& input);

// At most `limit` records nearest `focus` (breadth first along inputs, uses, and from a backward
// node to the forward node it differentiates, never from a node to its uses when it has more than
// three: a parameter read at every step would make every step a neighbour), in id order.
std::vector<NodeRecord> records_near(const std::vector<NodeRecord>& records, int64_t focus, size_t limit);

}  // namespace td
