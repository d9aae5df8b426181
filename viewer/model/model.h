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
#include <cstddef>
#include <functional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "dot_export.h"
#include "tape.h"

namespace td {

// ---------------------------------------------------------------------------------------------
// Records

struct NodeRecord {
    int64_t id = 0;
    std::string op;             // "mm", "transpose(0,1)", "MyReLU"
    std::string shape;          // output shapes, "[20,1]" (several separated by spaces)
    std::string dtype;          // of output 0
    std::string device;   // "cuda" for a node whose output is on the GPU; empty on the cpu
    Phase phase = PHASE_FORWARD;
    int64_t group = 0;          // backward: the forward node it differentiates (engine's group)
    int64_t inner_of = 0;       // the custom-function node that ran this node inside it; 0: none
    bool is_leaf = false;       // no autograd history (inputs, parameters, data)
    bool requires_grad = false;
    bool is_function = false;   // a custom function (has inner nodes to expand)
    bool history_start = false; // made under no_grad or by detach(): its inputs are another history
    bool is_inplace = false;    // writes its input's storage (an optimizer's p:add_ under no_grad)
    int scope = 0;              // the engine's scope (nn.Module call) it was recorded in; 0: none
    bool executed = true;       // false while it waits to run (stopped before it)
    SourceLoc where;
    std::vector<int64_t> inputs;   // producer ids, one per input
    std::string name;           // a Lua global naming its tensor ("W_h"), when one does
};

// The part of the tape the viewer copies and draws: at most `size` live nodes in id order, the
// newest ones (follow), or those from `anchor` on (a node the caller keeps alive, so that finding
// the window's start costs nothing on a tape of a million nodes). Graphviz cannot lay out a
// 50,000-step graph, and a model of every node would cost O(tape) per change: the window keeps
// both O(size).
struct TapeWindow {
    size_t size = SIZE_MAX;       // SIZE_MAX: the whole tape
    const Node* anchor = nullptr; // null: the newest `size` nodes
};
// What the window covered at the last records_update: ids first..last, of `live` nodes on the tape.
struct TapeWindowSpan {
    int64_t first = 0, last = 0;  // ids of the window's oldest and newest node (0: none)
    int64_t nodes = 0;            // records copied (the window's nodes and the leaves they read)
    int64_t live = 0;             // live nodes on the tape
    int64_t newest = 0;           // id of the newest live node
    int64_t oldest = 0;           // id of the oldest live node
    bool following = true;        // the window ends at the newest node
    bool changed = false;         // records came, went, or changed (a name, requires_grad, finished)
    bool covers(int64_t id) const { return id >= first && (following || id <= last); }
};
// The live nodes `window` covers, oldest first, after the leaves older than it that its nodes
// read (parameters, input data: drawn as boxes, not as stubs). O(window.size).
std::vector<const Node*> tape_window_nodes(const TapeWindow& window);

// Bring `records` (sorted by id) up to date with the nodes of `window`: records of nodes that died
// or left the window go, new nodes get one, records of live nodes are kept, with what can change
// after recording (a leaf's requires_grad, the name the script gives it) refreshed. `running`
// holds the nodes that started but did not finish. O(window.size), whatever the tape's length.
TapeWindowSpan records_update(std::vector<NodeRecord>& records, const std::unordered_set<int64_t>& running,
                              const TapeWindow& window = TapeWindow());
// Records of these nodes (ascending ids: a graph_collect list), names included, whatever else is
// on the tape: :animate's picture of one loss. O(nodes).
std::vector<NodeRecord> records_of_nodes(const std::vector<const Node*>& nodes);
// The record with this id, or nullptr (binary search).
const NodeRecord* record_find(const std::vector<NodeRecord>& records, int64_t id);
// A parameter made under no_grad (nn.Parameter: a clone of detached values) is one box titled
// "parameter", whatever op copied its values.
bool record_is_parameter(const NodeRecord& r);

// ---------------------------------------------------------------------------------------------
// What is drawn: the loss's picture, history starts

// The newest backward pass among the records (a run of backward records with no forward record
// between them) and the forward node it started from.
struct LossPass {
    int64_t root = 0;               // the loss: backward() was called on it; 0 when there is no pass
    int64_t first = 0, last = 0;    // the pass's records have ids in [first, last]
    int64_t update_last = 0;        // the update after it (record_in_update) ends here (= last: none)
};
// Whether a forward record can be part of the update that follows a backward pass (the optimizer's
// step, zero_grad): a no_grad op or a new tensor, outside any module call (a no_grad forward of
// the model afterwards, such as sampling from it, is not part of it).
bool record_in_update(const NodeRecord& r);
LossPass loss_pass_find(const std::vector<NodeRecord>& records);

// Which records the view draws (1 per record, by index).
//   With a pass (loss_graph on): the loss's graph (the forward records reached from the root
//   along inputs), the pass's backward records, the update right after it (the optimizer's
//   step, which view_build folds into one box), and what was computed later with autograd on
//   (ops typed at the prompt, the next step's forward as it grows); later no_grad ops (sampling
//   from the model) are not drawn.
//   Without: every record but those whose only uses are history starts (a parameter's
//   initialisation chain: rand -> mul_scalar -> add_scalar -> detach, before the clone).
//   Either way a walk stops at a history start: the node is drawn, what made it is not.
std::vector<char> records_shown(const std::vector<NodeRecord>& records, const LossPass& pass);

// ---------------------------------------------------------------------------------------------
// Groups that collapse into one box

enum ClusterKind : uint8_t {
    CLUSTER_FUNCTION,   // a torch.Function call and the ops it ran (engine: inner_nodes)
    CLUSTER_LOOP,       // one iteration of a Lua loop (found from source lines going back)
    CLUSTER_LINE,       // consecutive ops of one source line (an nn.Module call, a long expression)
    CLUSTER_BACKWARD,   // the backward nodes of one forward box (engine: group), or of a
                        // forward group (its mirror: "bwd:c:" + the forward group's key)
    CLUSTER_MODULE,     // one nn.Module call (engine: scopes), nested as the modules are
    CLUSTER_UPDATE,     // the forward records after the loss's backward pass (the optimizer step)
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
    std::string title;           // "loop lines 16-19 #7", "MyReLU #12", "grad of tanh #10", "fc1 (Linear)"
    std::string name;            // a module call: its path, "model/fc1:Linear" (:view expand fc1 finds it)
    int parent = -1;             // the group it is drawn inside (index into the same list), or -1
    std::vector<int64_t> members;   // node ids, ascending (a nested group's are its parent's too)
};

// Module calls, loop iterations and same-line runs among the top-level forward records (not inner
// nodes), nested: each one lies inside its parent (Cluster::parent). A module call is a run of
// records whose scopes (Node::scope) descend from the module's scope; loop iterations need at
// least two runs of source lines that restart at the same line. Groups that would straddle
// another's border are dropped (a loop over blocks stays inside the model's box, or goes), and a
// group with the same nodes as an outer one too (modules win over loops, loops over lines).
// `after` > 0: the run of records right after that id that are record_in_update forms one
// CLUSTER_UPDATE, the outermost group.
std::vector<Cluster> clusters_detect(const std::vector<NodeRecord>& records, bool loops, bool lines,
                                     int64_t after = 0);
// The module call that owns each parameter (record_is_parameter) made outside any module call
// (a loop that built the model may group it, as a plain group): the
// innermost module call (index into clusters) that holds every forward use of it but the
// optimizer's step's (`group_of`: a record's innermost group). A parameter used by two module
// calls (a tied embedding, an RNN cell called at every step) belongs to the call around both, or
// to none. O(records x depth of nesting).
std::unordered_map<int64_t, int> parameters_owned(const std::vector<NodeRecord>& records, const std::vector<Cluster>& clusters,
                                                  const std::unordered_map<int64_t, int>& group_of);

// The groups `name` names (indices): a group's key ("loop:12", "update"), a module call's path
// ("Sequential/0:Linear"), its last part ("0:Linear"), field ("0", "fc1"), class ("Linear") or
// title ("fc1 (Linear)"). Backward mirrors are not named: they follow their forward group.
std::vector<int> clusters_named(const std::vector<Cluster>& clusters, const std::string& name);
// The key the user's open/closed choice is kept under: a module call's is its module path
// ("mod:Sequential/0:Linear"), so that opening fc1 keeps it open in the next step's graph too.
std::string cluster_state_key(const Cluster& c);

// The module calls among `records` (records_of_nodes) as DOT clusters (dot_export.h), nested:
// each call's forward records and the parameters it owns (parameters_owned), and, in a backward
// box of its own, the backward records of its forward records. For graph_to_dot (`:dot`, the
// exported page). O(records x depth of nesting).
std::vector<DotCluster> dot_module_clusters(const std::vector<NodeRecord>& records);

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
    bool loss_graph = true;          // after a backward pass: the loss's graph, not the whole tape
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
    int64_t window_first = 0;   // records are a window of a longer tape from this id on (TapeWindow;
                                // 0: the whole tape): an input older is "before the window", not "freed"
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
    int64_t loss_node = 0;           // the loss's picture is drawn: its root (the camera starts there)
    int hidden_records = 0;          // records left out (other histories, earlier steps)
    std::vector<char> in_scope;      // per box: in the model's scope (view_mark_scope), which the
                                     // first picture after a training step fits
    int box_of(int64_t node_id) const;   // -1 when not shown
};

// The view of the records (records_shown: the loss's picture, or the tape without other
// histories). Past twice the node cap and past 8,000 records, the records nearest the focus are
// picked first (records_near), so that a huge tape costs what the cap costs; inputs left out are drawn
// as stubs ("not shown").
GraphView view_build(const ViewInput& input);

// The model's scope of the loss's picture (`pass`): GraphView::in_scope marks the boxes of the
// forward records a gradient flows through on the way to the loss (records that require one,
// reached from the root along inputs, parameters included: the model's module calls, the loss)
// and of the pass's backward records, with the copies of shared parameters beside such uses. Not
// data preparation (records that need no gradient), not the optimizer's step. None without a
// pass. O(records).
void view_mark_scope(GraphView& view, const std::vector<NodeRecord>& records, const LossPass& pass);

// At most `limit` records nearest `focus` (breadth first along inputs, uses, and from a backward
// node to the forward node it differentiates, never from a node to its uses when it has more than
// three: a parameter read at every step would make every step a neighbour), in id order.
// Only records with shown[i] (when given) are picked, and links through others are not followed.
std::vector<NodeRecord> records_near(const std::vector<NodeRecord>& records, int64_t focus, size_t limit,
                                     const std::vector<char>* shown = nullptr);

}  // namespace td
