// tape.h: nodes, the tape, the one place nodes run, and autograd.
//
// Every op call records a Node: an integer id (from 1, never reused), the op, its input edges,
// attributes, outputs, phase (forward/backward), group, and the Lua file:line that made it. The
// tape is the live nodes in record order (an intrusive list); it does not keep them alive.
// A node lives while something reaches it: a Tensor handle, a node that holds it as an input
// (only nodes in an autograd graph hold their inputs), or the forward node whose backward pass it
// belongs to. Every node runs through exec_node(), which calls the observers before and after.
#pragma once

#include <csignal>
#include <functional>
#include <memory>
#include <vector>

#include "ops.h"

namespace td {

struct Node;
struct CustomFunction;
void node_destroy(Node* node);
// Frees the spare node memory kept for reuse (the next node is allocated afresh).
void node_release_spares();
// Orderly shutdown, after the last tensor is gone (lua_close, the end of a test run): frees the
// spare nodes and the storage pool's cached blocks. The engine's singletons are immortal (never
// destroyed at exit), so this is the one place their spare memory goes back; calling it earlier
// is harmless, it only costs the reuse.
void engine_release_spares();
// Bytes the engine has made so far, a running total: tensor storage and node records. Lua's
// collector sees only the small userdata that hold them, and is told of these (tell_collector):
// a loop of views makes nodes and no storage, and must be collected as promptly as one of copies.
size_t engine_bytes_allocated_total();
// Bytes the engine holds right now: live tensor storage and live node records (not the spares).
size_t engine_bytes_live();
inline void ref_retain(Node* n);
inline void ref_release(Node* n);

enum Phase : uint8_t { PHASE_FORWARD, PHASE_BACKWARD };

struct SourceLoc {
    int file = -1;   // index into the interned file names; -1 when unknown
    int line = 0;
};
int source_file_intern(const char* name);

// Scopes: the nn.Module calls (or any named region) a node was recorded in, nested. A scope is an
// interned (parent, name) pair, so calling the same module 10,000 times makes one scope, not
// 10,000. Scope 0 is the top level.
int scope_enter(const char* name);   // makes the scope current (a child of the current one); returns it
void scope_leave(int scope);         // back to its parent
int scope_current();
int scope_parent(int scope);          // the scope it was entered in; 0 for the top level (and for 0)
std::string scope_name(int scope);    // its own name, "linear1:Linear"; "" for the top level
std::string scope_path(int scope);   // "TwoLayerNet/linear1:Linear"; "" for the top level
const char* source_file_name(int file);   // "?" when unknown
std::string source_loc_str(SourceLoc loc);   // "rnn_cell.lua:12"

// A tensor as C++ code and Lua hold it: one output of one node. Empty when `node` is null.
struct Tensor {
    Ref<Node> node;
    int output = 0;

    Tensor() = default;
    Tensor(Node* n, int out) : node(n), output(out) {}
    bool defined() const { return static_cast<bool>(node); }
    const Value& value() const;
    const Shape& shape() const { return value().shape; }
    DType dtype() const { return value().dtype; }
    int64_t numel() const { return value().numel(); }
    bool requires_grad() const;
    int64_t id() const;
    bool same_as(const Tensor& o) const { return node.get() == o.node.get() && output == o.output; }
};

// One input of a node. The value is always there (kernels and backward read it); the producing
// node is held only when this node is part of an autograd graph, so graphs that need no gradient
// never chain nodes together (a no-grad loop of 10,000 steps keeps one step alive, not all).
// Where the node is held, the value is its output's (a node's output value never changes once
// the node has run), so the edge holds no copy: an edge is 32 bytes, not 112. Otherwise it holds
// its own copy, from a free list (own_value).
class Edge {
public:
    int64_t id = 0;          // producing node's id (kept after that node dies)
    int output = 0;          // which of its outputs
    uint32_t version = 0;    // storage version when recorded (checked for saved inputs)

    Edge() = default;
    Edge(Edge&& other) noexcept;
    Edge& operator=(Edge&& other) noexcept;
    Edge(const Edge&) = delete;
    Edge& operator=(const Edge&) = delete;
    ~Edge() { drop_own_value(); }

    const Value& value() const;              // the input's value (op_call and tape_record_prepared set one)
    Node* node() const { return node_.get(); }   // the producing node, when held
    // Reads `producer`'s output `output` through the node, holding it.
    void set_node(const Ref<Node>& producer, int output_index);
    // Holds a copy of `value` and no node.
    void set_value(const Value& value);
    // Lets go of the node (keeping a copy of the value): the edge no longer chains the graph.
    void release_node();
    // Drops the bytes of an own copy (a backward pass freeing what it has used, value_freed()).
    void free_own_storage();

private:
    Ref<Node> node_;         // only when the consuming node tracks gradients (or runs a custom function)
    Value* own_value = nullptr;   // the copy when node_ is not held
    void drop_own_value();
};

struct Output {
    Value value;
    bool requires_grad = false;
    uint32_t version = 0;    // storage version right after the node ran (checked when saved)
    Tensor grad;             // .grad of a leaf, or of a non-leaf that called retain_grad()
    Tensor pending;          // scratch during backward: the gradient summed so far
};

// A fixed number of items inline, the rest in a vector: nodes have few inputs and outputs.
template <class T, int N>
class SmallList {
public:
    int size() const { return count_; }
    T* data() { return count_ <= N ? local_ : spill_.data(); }
    const T* data() const { return count_ <= N ? local_ : spill_.data(); }
    T& operator[](int i) { return data()[i]; }
    const T& operator[](int i) const { return data()[i]; }
    T* begin() { return data(); }
    T* end() { return data() + count_; }
    const T* begin() const { return data(); }
    const T* end() const { return data() + count_; }
    void resize(int n) {   // only grows from empty
        if (n > N) spill_.resize(n);
        count_ = n;
    }
    void push_back(T item) {
        if (count_ < N) {
            local_[count_++] = std::move(item);
            return;
        }
        if (count_ == N)
            for (int i = 0; i < N; ++i) spill_.push_back(std::move(local_[i]));
        spill_.push_back(std::move(item));
        ++count_;
    }
    void clear() {
        for (int i = 0; i < count_ && i < N; ++i) local_[i] = T();
        spill_.clear();
        count_ = 0;
    }

private:
    int count_ = 0;
    T local_[N];
    std::vector<T> spill_;   // holds every item once count_ > N
};

// What few nodes have: the nodes of their group, and a custom function. Kept apart from Node so
// that the many nodes without them (most of a long loop's) do not pay for them.
struct NodeGroupRecords {
    std::vector<Ref<Node>> backward_nodes;   // this node's group in the latest backward pass, where it
                                             // keeps them (engine_backward_graph_kept; their values are
                                             // freed once used, see backward)
    std::shared_ptr<CustomFunction> custom;  // ops `function` and `function_backward`: what runs
    std::vector<Ref<Node>> inner_nodes;      // ... and the ops it ran, with their own source lines
    std::vector<int> gradient_inputs;        // function_backward: the forward input (0-based) each
                                             // output is the gradient of (nil gradients make none)
};

// A block of op attributes that nodes share (Node::attrs), counted.
struct SharedOpAttrs {
    OpAttrs attrs;
    int refcount = 0;
};

struct Node final {
    // The first cache line holds what graph walks and destruction read (with the input edges, in
    // the second): a walk of a long unroll's cold nodes then reads one or two lines of each.
    int refcount = 0;
    uint32_t walk_mark = 0;      // scratch for graph walks
    int64_t id = 0;
    Node* tape_prev = nullptr;   // the tape: live nodes in id order
    Node* tape_next = nullptr;
    OpId op = OP_tensor;
    Phase phase = PHASE_FORWARD;
    bool tracks_grad = false;    // recorded with autograd on: holds its inputs, has a backward
    bool retains_grad = false;
    uint8_t edited = 0;          // EDITED_* bits: a debugger replaced what this node computed
    bool has_grad_hooks = false; // grad_hook_add was called on one of its outputs (autograd.cpp)
    bool has_arrived_gradients = false;   // a backward pass noted what arrived at it (arrived_gradients.cpp)
    int64_t group = 0;           // backward: the forward node it differentiates; inside a custom
                                 // function: that function's node; else 0
    int scope = 0;               // the module call (scope_enter) it was recorded in; 0: none
    bool history_start = false;  // a new history starts here: recorded in the forward pass with
                                 // autograd off (torch.no_grad: a parameter's initialisation, an
                                 // optimizer step) or made by detach(). Graph walks (graph_collect,
                                 // the viewer, DOT) do not follow its inputs. An op on tensors that
                                 // merely need no gradient, with autograd on, is no history start.
    bool has_name = false;       // the script's name for it is kept in node_names.cpp
    bool held_by_record = false; // its group's node holds it: in backward_nodes (see
                                 // engine_backward_graph_kept) or in inner_nodes
    bool pass_made_sum = false;  // a backward pass made it to hold a gradient being summed: until
                                 // that gradient's target is visited, only the pass reaches it
    bool saved_released = false; // a backward pass without retain_graph ran its rule, which reads
                                 // saved values: a later pass through it fails (PyTorch's "backward
                                 // through the graph a second time")
    SourceLoc where;
    SmallList<Edge, 2> inputs;
    SmallList<Output, 1> outputs;
    std::unique_ptr<NodeGroupRecords> group_records;   // null on most nodes: see NodeGroupRecords
    SharedOpAttrs* own_attrs = nullptr;   // null: the defaults (attrs())

    // Asks the CPU for all of the node's cache lines at once (a long graph's nodes are cold when
    // backward visits them or they die). Never faults; costs little when they are in cache.
    void prefetch() const { prefetch_lines(reinterpret_cast<uintptr_t>(this), sizeof(Node)); }
    // Nodes are taken from slabs in record order (BlockSlabs, tape.cpp): the node recorded k nodes
    // before this one most often lies k blocks below it. Walks down a long graph follow pointers
    // from node to node (backward's sweep of the tape, a graph's destruction), and each step waits
    // on cold memory; they ask for the first `bytes` of the block k below, ahead. A hint only:
    // where the layout differs (another slab, a block reused out of order) it fetches a useless
    // line, and a prefetch never faults.
    void prefetch_below(int k, size_t bytes = sizeof(Node)) const {
        prefetch_lines(reinterpret_cast<uintptr_t>(this) - static_cast<uintptr_t>(k) * sizeof(Node), bytes);
    }
    static void prefetch_lines(uintptr_t at, size_t bytes) {
        for (size_t line = 0; line < bytes; line += 64) __builtin_prefetch(reinterpret_cast<const void*>(at + line), 1, 3);
    }

    // Nodes come and go by the thousand per training step: from slabs in record order (BlockSlabs
    // in tape.cpp), not malloc.
    static void* operator new(size_t size);
    static void operator delete(void* p);

    Node() = default;
    Node(const Node&) = delete;
    Node& operator=(const Node&) = delete;
    ~Node();

    // The op's attributes. Most nodes have the defaults (mm, add, tanh), which they share: a node
    // holds a block of its own only when they differ, so the defaults cost a node 8 bytes, not 224.
    // Nodes of one op with equal attributes in a row (a loop's t() or transpose(2, 3)) share one.
    const OpAttrs& attrs() const { return own_attrs ? own_attrs->attrs : op_attrs_default(); }
    void set_attrs(const OpAttrs& attrs);   // once, when recorded (after `op` is set)
    void forget_init_values();   // OpAttrs::init_values is valid only during the op's call
    void forget_own_attrs();     // back to the defaults; the block goes back when no node shares it

    // NodeGroupRecords' fields; empty when the node has none.
    const std::vector<Ref<Node>>& backward_nodes() const;
    const std::vector<Ref<Node>>& inner_nodes() const;
    const std::shared_ptr<CustomFunction>& custom() const;
    NodeGroupRecords& group_records_made();   // made when it is not there yet

    const OpInfo& info() const { return op_info(op); }
    const char* name() const;   // the op's name; a custom function's own name
    // "parameter" for a parameter whose values an op made (a clone under no_grad: the op says
    // nothing to the user), else name(). What the debugger, DOT and :graph show as its op.
    const char* shown_op() const;
    bool is_leaf() const { return !tracks_grad; }
};

// Node::edited: set by whoever overwrote a node's results (the debugger's edit-and-continue), so
// the tape shows that the rest of the pass did not use what the kernel or the rule computed.
enum NodeEdit : uint8_t {
    EDITED_OUTPUT = 1 << 0,   // an output's values were overwritten after the node ran
    EDITED_GRAD = 1 << 1,     // a gradient the node's backward group produced was replaced
};

// A forward node with no autograd history of its own: made from nothing (OPF_CREATE), or where a
// new history starts (Node::history_start: made under no_grad, detach()'s output).
bool node_has_no_history(const Node* n);
// A parameter: such a node that requires grad (not an optimizer's in-place write into one).
bool node_is_parameter(const Node* n);

inline void ref_retain(Node* n) { ++n->refcount; }
inline void ref_release(Node* n) {
    if (--n->refcount == 0) node_destroy(n);
}

inline const Value& Tensor::value() const { return node->outputs[output].value; }

inline const Value& Edge::value() const { return node_ ? node_->outputs[output].value : *own_value; }

inline bool Tensor::requires_grad() const { return node->outputs[output].requires_grad; }
inline int64_t Tensor::id() const { return node ? node->id : 0; }

// ---------------------------------------------------------------------------------------------
// Observers: the one hook. Called before and after every node runs, forward and backward, and in
// backward once per group (after a forward node's rule, before its gradients flow on); also before
// a storage is written and when backward stores a gradient. The rewind history (history.h) and
// freeze's recorder are observers like the debugger and the viewer.

enum HookEvent : uint8_t {
    HOOK_BEFORE,       // `node` is about to run: its inputs are ready
    HOOK_AFTER,        // `node` has run: its outputs hold the result (an observer may overwrite them)
    HOOK_GROUP_DONE,   // backward: the rule of forward node `node` has run (its group of backward
                       // nodes); engine_backward_pass()->group holds the gradients arriving at the
                       // node and those leaving it, which an observer may replace before they flow on
    HOOK_PASS_DONE,    // backward: the pass from root `node` has finished (every .grad set); engine_backward_pass()
                       // still describes it. Only to observers that ask for it: not in HOOK_ALL_EVENTS
    HOOK_BEFORE_WRITE, // a storage someone may hold is about to be written: engine_storage_to_write(). `node`
                       // writes it (null from a frozen plan's loop). exec_node says so for every output of
                       // a node that is not a view, a plan's loop for each buffer it writes. Only to
                       // observers that ask for it (the rewind history copies what it holds)
    HOOK_GRAD_STORED,  // backward: output engine_backward_pass()->stored.output of `node` (a leaf, or one
                       // that retains grad) received a gradient in .grad. Only to observers that ask
                       // for it (freeze's recorder turns it into a step of its own)
    HOOK_LOSS,         // backward() was called on root `node`, one element, without a gradient (a loss):
                       // engine_last_loss() holds it; the pass has not run yet. Only to observers that
                       // ask for it (the training log's `loss` series, when no optimizer logs it)
};
typedef void (*NodeObserver)(Node* node, HookEvent event, void* user);
inline uint8_t hook_bit(HookEvent event) { return static_cast<uint8_t>(1u << event); }
constexpr uint8_t HOOK_ALL_EVENTS = (1u << HOOK_BEFORE) | (1u << HOOK_AFTER) | (1u << HOOK_GROUP_DONE);
// The events about nodes running, which a frozen plan's fast loop does not give (engine_observed).
constexpr uint8_t HOOK_NODE_EVENTS = HOOK_ALL_EVENTS | (1u << HOOK_PASS_DONE);
// Subscribe to the events in `events` (hook_bit()s). Returns a handle for unobserve.
// An observer either looks at values (the debugger, the viewer: OBSERVER_LOOKS), or only notes
// which ops ran (freeze's recorder: OBSERVER_RECORDS), or keeps what the lookers could look back
// at (the rewind history: OBSERVER_FOLLOWS): its node events (HOOK_NODE_EVENTS) reach it only
// while an OBSERVER_LOOKS observer wants one, and an interrupt's HOOK_AFTER (below) never does.
// Backward keeps every gradient whole and apart only for one that looks (engine_values_watched);
// for one that records, it may add a slice's gradient in place into its sum, which the recorded
// ops then replay as they ran.
// Observers are called in the order they subscribed, except that OBSERVER_FIRST ones come before
// every other: the rewind history records an event before a debugger's stop at it looks back.
enum ObserverRole : uint8_t { OBSERVER_LOOKS, OBSERVER_RECORDS, OBSERVER_FOLLOWS };
enum ObserverOrder : uint8_t { OBSERVER_IN_TURN, OBSERVER_FIRST };
int engine_observe(NodeObserver observer, void* user, uint8_t events = HOOK_ALL_EVENTS,
                   ObserverRole role = OBSERVER_LOOKS, ObserverOrder order = OBSERVER_IN_TURN);
// Change which events an observer gets. With none it costs nothing: a debugger with no
// breakpoint stays subscribed this way (an interrupt still reaches it, see below).
void engine_observe_events(int handle, uint8_t events);
void engine_unobserve(int handle);
bool engine_observed();   // whether any observer gets a node event (plan_run then goes through exec_node)
bool engine_wants_before_write();   // whether an observer hears of storages about to be written
// Whether someone may look inside a layer's steps: the backward graph is kept (-i, the REPL,
// keep_backward_graph(true)), or an OBSERVER_LOOKS wants events (the viewer, a breakpoint; not
// freeze's recorder). nn.LSTM then records each step as ops; otherwise it runs its fused layer
// (ops.def's lstm).
bool engine_steps_watched();

// Whether a backward pass keeps the nodes it records (each forward node's `backward_nodes`) after
// they have run, so that the graph, DOT and the viewer show the backward pass afterwards. Kept
// while the setting is on (the engine's default; the tapedeck program turns it off for a script
// run without -i; torch.autograd.keep_backward_graph), while an observer looks at values
// (engine_values_watched: a debugger with a breakpoint or stepping, the viewer), and in a pass
// that builds a graph of its gradients (create_graph). Freeze's recorder only notes the ops as
// they run, so a recording keeps no more than the eager run. Otherwise, as in PyTorch, a backward
// node lives only while the pass needs its result: a long loop's backward pass then costs no
// memory after it ends, and less while it runs.
void engine_keep_backward_graph(bool keep);
bool engine_keeps_backward_graph_setting();
bool engine_backward_graph_kept();
bool engine_values_watched();   // whether an OBSERVER_LOOKS wants an event (or an interrupt is pending)
// A storage is about to be written (an op's output; a view writes nothing): observers of
// HOOK_BEFORE_WRITE hear of it first, `node` being the node that writes it (null from a plan's
// loop). Nothing (one bit test) when none listens. engine_storage_to_write() is the storage while
// they are called, null otherwise.
void engine_notify_before_write(Node* node, Storage* storage);
Storage* engine_storage_to_write();
// Call the observers with `event` for `node` (exec_node and backward do; nothing when none).
void engine_notify(Node* node, HookEvent event);

// An asynchronous request to stop, set by a SIGINT handler (async-signal-safe). While it is
// pending every observer gets HOOK_AFTER, whatever events it asked for, so the debugger can stop
// at the next node; the observer that takes it clears it.
void engine_interrupt_request();
void engine_interrupt_clear();
extern volatile sig_atomic_t g_interrupt_requested;
inline bool engine_interrupt_pending() { return g_interrupt_requested != 0; }

// Where the current op call comes from (the Lua bindings install one that reads the Lua stack).
typedef SourceLoc (*SourceLocator)(void* user);
void engine_set_locator(SourceLocator locator, void* user);

// ---------------------------------------------------------------------------------------------
// Recording and running

// Record a node for `op` on `inputs` and run it. Returns output 0 (Tensor(node, i) for others).
// `custom` is set for the custom-function ops only (function.cpp).
Tensor op_call(OpId op, const Tensor* const* inputs, int n_inputs, const OpAttrs& attrs,
               const std::shared_ptr<CustomFunction>* custom = nullptr);
// Run a recorded node: observers before, the kernel, observers after. The only place kernels run.
void exec_node(Node* node);

// Record a node whose input and output values are already there: no dtype conversion, no shape
// rule, no allocation, no autograd, and it is not run (the caller may run it with exec_node).
// plan_run uses it for its steps under an observer and for the tensors a frozen call hands back.
// input_ids[i] is the id of the node that made input i (0: none); input_ids may be null.
Tensor tape_record_prepared(OpId op, const OpAttrs& attrs, const Value* inputs, const int64_t* input_ids,
                            int n_inputs, const Value* outputs, int n_outputs, Phase phase, SourceLoc where);

// What the recording is inside of. The backward pass sets both: its nodes get phase BACKWARD,
// the group and the source line of the forward node they differentiate, and are kept by it.
// Inside a custom function (inner_call), nodes join the function node's group but keep their
// own source lines, and are kept by its `inner_nodes`.
struct RecordingContext {
    Phase phase = PHASE_FORWARD;
    Node* group_node = nullptr;
    bool inner_call = false;
};
RecordingContext& engine_recording();   // the current one (backward, function.cpp and the debugger set it)

bool grad_enabled();
void set_grad_enabled(bool enabled);
struct NoGradGuard {
    bool saved;
    NoGradGuard() : saved(grad_enabled()) { set_grad_enabled(false); }
    ~NoGradGuard() { set_grad_enabled(saved); }
};

// The tape: live nodes in id order.
Node* tape_first();
Node* tape_last();                // the newest live node; nullptr when the tape is empty
Node* tape_find(int64_t id);      // nullptr when that node is gone
int64_t tape_live_count();
uint64_t tape_version();          // bumped whenever a node is recorded or dies, or a leaf's
                                  // requires_grad changes (node_set_requires_grad)
int64_t tape_next_id();

// Make output `output` of a leaf require grad or not (requires_grad_(), the {requires_grad = true}
// option, a loaded input). The caller checks it may (a float leaf). It goes through here and not
// through the field so that tape_version changes: records of the node (the viewer's, taken when it
// was recorded, which is before the option is applied) are refreshed then.
void node_set_requires_grad(Node* node, int output, bool flag);

// Seed the random generator used by rand/randn.
void engine_manual_seed(uint64_t seed);
uint64_t engine_random_u64();

// ---------------------------------------------------------------------------------------------
// Autograd

// Backpropagate from `root`. `grad` may be empty when root has one element. Gradients accumulate
// into .grad of leaves that require grad and of nodes that retain grad. The pass is recorded:
// its nodes have phase BACKWARD and group = the forward node they differentiate. Unless it has
// create_graph or an observer is attached, the pass frees each gradient's bytes once it has used
// it and nothing else can see it (value_freed; the records stay), so memory stays O(graph).
// create_graph: the pass records its ops with autograd on, so the gradients have a graph of their
// own (second derivatives). capture (torch.autograd.grad): the gradient of root with respect to
// each of these tensors is stored in *captured (undefined where none flowed) and no .grad is
// changed.
struct BackwardOptions {
    bool create_graph = false;
    // Keep the graph for another pass. Without it (and without create_graph, which implies it), a
    // pass releases what each node it runs saved for its rule, as PyTorch frees saved tensors: a
    // later pass through such a node is an error (Node::saved_released), not a silent second sum.
    bool retain_graph = false;
    // Non-null: a pass through nodes an earlier pass released runs anyway (tapedeck keeps saved
    // values: the prompt's backward(), a tool re-running a pass) and sets *released_rerun to the id
    // of one such node (0 when none). Null: such a pass is an error.
    int64_t* released_rerun = nullptr;
    const std::vector<Tensor>* capture = nullptr;
    std::vector<Tensor>* captured = nullptr;
};
void backward(const Tensor& root, const Tensor* grad, const BackwardOptions& options = BackwardOptions());

// The backward pass in progress, for observers (HOOK_GROUP_DONE) and viewers (which groups ran).
// Gradients here are named from the node's side: those arriving at its outputs and those its
// rule produced for its inputs: PyTorch's grad_output and grad_input, as the debugger names them.
struct BackwardGroup {
    Node* node = nullptr;                  // the forward node being differentiated; null between groups
    const Tensor* grad_outputs = nullptr;  // per output of node: d(root)/d(output); undefined where none
    Tensor* grad_inputs = nullptr;         // per input of node: d(root)/d(input) from its rule; undefined
                                           // where none. At HOOK_GROUP_DONE an observer may replace one
                                           // (same shape, and only for inputs that need a gradient).
};

// At HOOK_GRAD_STORED: the gradient backward() just put into .grad of output `output` of the node
// (added, or kept as the first one). The nodes with ids in [first_id, end_id) were recorded by
// that storing itself (an add_, or a clone).
struct GradStored {
    int output = 0;
    const Tensor* grad = nullptr;   // what arrived (the pass's sum), not .grad itself
    int64_t first_id = 0, end_id = 0;
};

struct BackwardPass {
    uint64_t serial = 0;                      // passes are numbered 1, 2, ... as they start
    Node* root = nullptr;                     // backward() was called on an output of this node
    const std::vector<Node*>* order = nullptr;   // the nodes the pass visits, in that order (ids decreasing)
    size_t position = 0;                      // index in *order of the node being visited
    BackwardGroup group;                      // set while a node's rule runs and at HOOK_GROUP_DONE
    GradStored stored;                        // set at HOOK_GRAD_STORED
};

// Gradient hooks (PyTorch's Tensor.register_hook): functions of the gradient of one output of a
// node. backward() calls them, in the order they were added, once that gradient is complete (every
// use of the output summed), before it reaches .grad, a capture (autograd.grad) or the node's own
// rule; they run in the node's backward group, so the ops they call are recorded there. A hook
// returns a replacement gradient (same shape and dtype) or an empty Tensor to keep it. Hooks live
// as long as their node, or until removed.
typedef std::function<Tensor(const Tensor& grad)> GradHook;
int64_t grad_hook_add(const Tensor& t, GradHook hook);   // a handle (> 0) for grad_hook_remove
bool grad_hook_remove(int64_t handle);                   // false when removed already or its node is gone
void grad_hooks_drop(Node* node);                        // node_destroy: its hooks go with it

// The latest backward() called without a gradient (a loss: one element), for the training log's
// `loss`: how many such calls were made (0: none yet), and the loss, read at once when it is on the
// CPU (*value; *node_id 0), else the id of its node (read later, while the node lives). Holds no
// engine object (storage and node counts return to their baseline after a step).
struct LastLoss {
    uint64_t count = 0;
    double value = 0;
    int64_t node_id = 0;
    int output = 0;
};
const LastLoss& engine_last_loss();

// The pass backward() is running, or null. One at a time: backward() while one runs is an error.
const BackwardPass* engine_backward_pass();
// A frozen plan's debug replay announces a recorded backward group (freeze/plan_run.cpp): `pass` stands for
// the running pass while its observers see HOOK_GROUP_DONE; null ends it. Not while backward() runs.
void engine_backward_pass_replay(BackwardPass* pass);
// The node with this id among those the running pass visits (O(log n)); null when none is.
Node* backward_pass_find(int64_t id);

// What arrived at a node in the latest backward pass (the viewer's Gradient tab): the gradient of
// the root with respect to one of its outputs (PyTorch's grad_output), every use summed, and the
// gradients that were summed, as their senders. Kept only while an observer that looks at values
// is attached (engine_values_watched) and only while the node lives (arrived_gradients.cpp), so a
// pass without the viewer or a debugger costs nothing more.
struct GradientSender {
    int64_t node_id = 0;       // the node holding the gradient sent: a backward node (#24 expand),
    std::string op;            // or the seed of backward() ("ones"), or a tensor given to backward()
    int output = 0;
    int64_t forward_id = 0;    // the forward node whose backward rule sent it (#11 sum); 0: the seed
    std::string forward_op;
};
struct ArrivedGradient {
    uint64_t pass = 0;         // BackwardPass::serial of the pass it arrived in
    int64_t root_id = 0;       // that pass's root
    bool complete = false;     // the pass has visited the node: `value` is the whole sum. Before
                               // that (a stop earlier in the pass) only the senders so far are known
    Value value;               // the gradient (a view of the backward node's value, no copy)
    std::vector<GradientSender> senders;   // in the order they arrived
};
// Null when nothing was noted for that output, or the node was not reached by a pass watched.
const ArrivedGradient* arrived_gradient(const Node* node, int output);
// backward(): a gradient `grad` was sent to `output` of `target` by the rule of `forward_node`
// (null for the seed), and, at target's visit, the sum that arrived. Both do nothing unless
// engine_values_watched() and a pass runs.
void arrived_gradient_sent(Node* target, int output, const Tensor& grad, const Node* forward_node);
void arrived_gradient_complete(Node* node, int output, const Tensor& grad);
void arrived_gradients_drop(Node* node);   // node_destroy: what arrived at it goes with it
size_t arrived_gradients_kept();           // nodes with a noted gradient (for tests: bounded)

// What a backward rule sees (PyTorch's names: grad_output arrived at the node's outputs, d root /
// d output; grad_input is what the rule computes for its inputs, d root / d input). It sets
// grad_input[i] for inputs where needs_grad(i).
// A gradient that is zero outside one slice of its input: `grad_input[i]` holds the slice's values,
// which go into [start, start + grad_input[i].shape[dim]) along `dim` (narrow's and select's rules).
struct GradSlice {
    bool set = false;
    int dim = 0;
    int64_t start = 0;
};

struct BackwardCall {
    Node* node;
    const Tensor* grad_output;   // per output; empty where no gradient flowed
    Tensor* grad_input;          // per input
    GradSlice* slices = nullptr;   // per input, when the pass takes slices (see grad_input_slice)

    // Input i's gradient is g in a slice of the input and zero elsewhere. Where the pass takes
    // slices, it adds g into that slice of the input's gradient, which a loop over a sequence's
    // steps (x[t]) fills slice by slice in one buffer; else (a graph of the gradient is being
    // made, or an observer may look at grad_input) g is padded with zeros to the input's shape.
    void grad_input_slice(int i, const Tensor& g, int dim, int64_t start);

    bool needs_grad(int i) const {
        const Edge& e = node->inputs[i];
        return e.node() && e.node()->outputs[e.output].requires_grad;
    }
    Tensor input(int i) const { return Tensor(node->inputs[i].node(), node->inputs[i].output); }
    Tensor output(int i) const { return Tensor(node, i); }
    const Shape& input_shape(int i) const { return node->inputs[i].value().shape; }
    const OpAttrs& attrs() const { return node->attrs(); }
};

// A list of nodes that holds them: a caller may run code that frees nodes (Lua's collector
// finalising tensors while the caller builds Lua tables) and still read every node of the list.
typedef std::vector<Ref<Node>> NodeList;

// The nodes that produced t: its autograd ancestry and their recorded backward nodes, by id.
NodeList graph_collect(const Tensor& t);

// Description of a node on one line: "#5 tanh [20,1] <- #4  (rnn_cell.lua:12)".
std::string node_describe(const Node* node);

}  // namespace td
