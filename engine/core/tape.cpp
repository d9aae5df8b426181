// tape.cpp: recording (op_call), running (exec_node, the one hook), the tape list, node lifetime.
//
// [SECTION] engine state   grad mode, phase/group of the current recording, observers, interrupt, locator
// [SECTION] source files   interned file names for node locations
// [SECTION] tape           the intrusive list of live nodes; node destruction
// [SECTION] op_call        dtype conversion, shape rule, node, outputs, exec
// [SECTION] exec_node      observers + kernel
// [SECTION] describe       one-line node descriptions
#include "tape.h"

#include "block_slabs.h"
#include "device.h"
#include "backend.h"
#include "function.h"
#include "node_names.h"

#include <algorithm>
#include <csignal>
#include <new>
#include <random>
#include <unordered_map>


namespace td {

// ============================================================================================
// [SECTION] engine state

namespace {

struct Observer {
    int handle;
    NodeObserver fn;
    void* user;
    uint8_t events;     // hook_bit()s it asked for
    uint8_t receives;   // those it gets now (an OBSERVER_FOLLOWS one: its node events only while watched)
    ObserverRole role;
    ObserverOrder order;
};

struct EngineState {
    int64_t next_id = 1;
    Node* tape_head = nullptr;
    Node* tape_tail = nullptr;
    int64_t tape_count = 0;
    uint64_t tape_version = 0;
    bool grad_enabled = true;
    std::vector<Observer> observers;   // OBSERVER_FIRST ones first, each kind in the order they subscribed
    uint8_t events_wanted = 0;   // the union of what the observers receive: what exec_node checks
    uint8_t events_watched = 0;  // the node events OBSERVER_LOOKS observers want
    int next_observer_handle = 1;
    Storage* storage_to_write = nullptr;   // at HOOK_BEFORE_WRITE
    bool keep_backward_graph = true;    // engine_keep_backward_graph (the program turns it off for scripts)
    SourceLocator locator = nullptr;
    void* locator_user = nullptr;
    std::mt19937_64 rng{5489u};
    std::vector<Node*> dying;   // nodes whose last reference went away, destroyed iteratively
    bool destroying = false;
    size_t node_bytes_made = 0;   // engine_bytes_allocated_total's share of nodes (SpareBlocks)
    size_t node_bytes_live = 0;   // engine_bytes_live's
    RecordingContext recording;   // engine_recording
};

// Immortal, as every engine singleton: never destroyed, so a node that dies during static
// destruction (see SpareBlocks) still finds the tape and the work list. Made on first use: the
// rewind history subscribes from its static initializer (history.cpp), which may run before this
// file's; engine_observe reaches the state through engine_state(), the rest through g.
EngineState& engine_state() {
    static EngineState* state = new EngineState;
    return *state;
}
EngineState& g = engine_state();

}  // namespace

RecordingContext& engine_recording() { return g.recording; }

bool grad_enabled() { return g.grad_enabled; }
void set_grad_enabled(bool enabled) { g.grad_enabled = enabled; }

// What each observer receives, and their union. An OBSERVER_FOLLOWS observer (the rewind history)
// receives its node events only while an OBSERVER_LOOKS one wants a node event.
static void update_events_wanted() {
    EngineState& state = engine_state();
    state.events_watched = 0;
    for (const Observer& o : state.observers)
        if (o.role == OBSERVER_LOOKS) state.events_watched |= o.events & HOOK_NODE_EVENTS;
    state.events_wanted = 0;
    for (Observer& o : state.observers) {
        bool follows_unwatched = o.role == OBSERVER_FOLLOWS && state.events_watched == 0;
        o.receives = follows_unwatched ? static_cast<uint8_t>(o.events & ~HOOK_NODE_EVENTS) : o.events;
        state.events_wanted |= o.receives;
    }
}

int engine_observe(NodeObserver observer, void* user, uint8_t events, ObserverRole role, ObserverOrder order) {
    EngineState& state = engine_state();
    int handle = state.next_observer_handle++;
    auto at = state.observers.end();
    if (order == OBSERVER_FIRST)   // after the OBSERVER_FIRST ones already there
        at = std::find_if(state.observers.begin(), state.observers.end(),
                          [](const Observer& o) { return o.order != OBSERVER_FIRST; });
    state.observers.insert(at, {handle, observer, user, events, events, role, order});
    update_events_wanted();
    return handle;
}

void engine_observe_events(int handle, uint8_t events) {
    for (Observer& o : g.observers)
        if (o.handle == handle) o.events = events;
    update_events_wanted();
}

void engine_unobserve(int handle) {
    for (size_t i = 0; i < g.observers.size(); ++i) {
        if (g.observers[i].handle == handle) {
            g.observers.erase(g.observers.begin() + static_cast<long>(i));
            break;
        }
    }
    update_events_wanted();
}

// An attached observer that wants no event (an idle debugger) does not count: plans keep their
// fast loop until a breakpoint (or a Ctrl-C request) needs the hook.
bool engine_wants_before_write() { return (g.events_wanted & hook_bit(HOOK_BEFORE_WRITE)) != 0; }
bool engine_observed() { return (g.events_wanted & HOOK_NODE_EVENTS) != 0 || engine_interrupt_pending(); }
bool engine_values_watched() { return g.events_watched != 0 || engine_interrupt_pending(); }
bool engine_steps_watched() { return g.keep_backward_graph || engine_values_watched(); }

void engine_keep_backward_graph(bool keep) { g.keep_backward_graph = keep; }
bool engine_keeps_backward_graph_setting() { return g.keep_backward_graph; }
// A pass with create_graph runs with autograd on: its nodes are a graph of their own.
bool engine_backward_graph_kept() { return g.keep_backward_graph || engine_values_watched() || g.grad_enabled; }

volatile sig_atomic_t g_interrupt_requested = 0;

void engine_interrupt_request() { g_interrupt_requested = 1; }
void engine_interrupt_clear() { g_interrupt_requested = 0; }

void engine_set_locator(SourceLocator locator, void* user) {
    g.locator = locator;
    g.locator_user = user;
}

void engine_manual_seed(uint64_t seed) { g.rng.seed(seed); }
uint64_t engine_random_u64() { return g.rng(); }

// ============================================================================================
// [SECTION] source files

namespace {
struct SourceFiles {
    std::vector<std::string> names;
    std::unordered_map<std::string, int> ids;
};
SourceFiles& source_files() {
    static SourceFiles* files = new SourceFiles;   // immortal: node descriptions may outlive main
    return *files;
}
}  // namespace

int source_file_intern(const char* name) {
    SourceFiles& f = source_files();
    auto it = f.ids.find(name);
    if (it != f.ids.end()) return it->second;
    int id = static_cast<int>(f.names.size());
    f.names.push_back(name);
    f.ids.emplace(name, id);
    return id;
}

const char* source_file_name(int file) {
    SourceFiles& f = source_files();
    if (file < 0 || file >= static_cast<int>(f.names.size())) return "?";
    return f.names[file].c_str();
}

// ============================================================================================
// [SECTION] scopes

namespace {
struct Scopes {
    struct Scope {
        int parent;
        std::string name;
    };
    std::vector<Scope> list{{0, ""}};                 // scope 0: the top level
    std::unordered_map<std::string, int> ids;         // "parent/name" -> scope
    int current = 0;
};
Scopes& scopes() {
    static Scopes* s = new Scopes;   // immortal, as source_files()
    return *s;
}
}  // namespace

int scope_enter(const char* name) {
    Scopes& s = scopes();
    std::string key = std::to_string(s.current) + "/" + name;
    auto it = s.ids.find(key);
    int scope = it != s.ids.end() ? it->second : static_cast<int>(s.list.size());
    if (it == s.ids.end()) {
        s.list.push_back({s.current, name});
        s.ids.emplace(key, scope);
    }
    s.current = scope;
    return scope;
}

void scope_leave(int scope) {
    Scopes& s = scopes();
    if (scope > 0 && scope < static_cast<int>(s.list.size())) s.current = s.list[scope].parent;
}

int scope_current() { return scopes().current; }

int scope_parent(int scope) {
    Scopes& s = scopes();
    return scope > 0 && scope < static_cast<int>(s.list.size()) ? s.list[scope].parent : 0;
}

std::string scope_name(int scope) {
    Scopes& s = scopes();
    return scope > 0 && scope < static_cast<int>(s.list.size()) ? s.list[scope].name : std::string();
}

std::string scope_path(int scope) {
    Scopes& s = scopes();
    std::string path;
    for (int at = scope; at > 0 && at < static_cast<int>(s.list.size()); at = s.list[at].parent)
        path = path.empty() ? s.list[at].name : s.list[at].name + "/" + path;
    return path;
}

std::string source_loc_str(SourceLoc loc) {
    if (loc.file < 0) return "?";
    return std::string(source_file_name(loc.file)) + ":" + std::to_string(loc.line);
}

// ============================================================================================
// [SECTION] tape

static void tape_append(Node* node) {
    node->tape_prev = g.tape_tail;
    node->tape_next = nullptr;
    if (g.tape_tail) g.tape_tail->tape_next = node;
    else g.tape_head = node;
    g.tape_tail = node;
    ++g.tape_count;
    ++g.tape_version;
}

static void tape_unlink(Node* node) {
    if (node->tape_prev) node->tape_prev->tape_next = node->tape_next;
    else if (g.tape_head == node) g.tape_head = node->tape_next;
    else return;   // never appended
    if (node->tape_next) node->tape_next->tape_prev = node->tape_prev;
    else g.tape_tail = node->tape_prev;
    --g.tape_count;
    ++g.tape_version;
}

namespace {
constexpr size_t MAX_SPARE_BLOCKS = 1 << 18;   // per kind: ~90 MB of spare nodes at most (the storage pool keeps 256 MB)

// Memory blocks of one size, kept for reuse (BlockSlabs: laid out in the order they are taken):
// nodes come and go by the thousand per training step, and with them a node's own attributes
// (Node::set_attrs: a loop's narrow or transpose makes one per step) and edges' own values
// (Edge::set_value: a backward pass's nodes hold no node of their inputs). What is taken counts as
// node bytes for Lua's collector (engine_bytes_*). Instances are immortal (made on first use, never
// destroyed): a node can die during static destruction too (exit() called from inside a library,
// a static that holds a tensor), and a destroyed allocator would then be written after its
// destructor ran. node_release_spares() gives the wholly free slabs back.
class SpareBlocks {
public:
    explicit SpareBlocks(size_t block_bytes)
        : bytes_(block_bytes), budget_{MAX_SPARE_BLOCKS * block_bytes / BLOCK_SLAB_BYTES}, slabs_(block_bytes, budget_) {}
    void* take() {
        g.node_bytes_made += bytes_;
        g.node_bytes_live += bytes_;
        return slabs_.take();
    }
    void give(void* block) {
        g.node_bytes_live -= bytes_;
        slabs_.give(block);
    }
    void release() { slabs_.release_spares(); }

private:
    size_t bytes_;
    SlabBudget budget_;
    BlockSlabs slabs_;
};

SpareBlocks& node_blocks() {
    static SpareBlocks* blocks = new SpareBlocks(sizeof(Node));
    return *blocks;
}
SpareBlocks& attrs_blocks() {
    static SpareBlocks* blocks = new SpareBlocks(sizeof(SharedOpAttrs));
    return *blocks;
}
SpareBlocks& value_blocks() {
    static SpareBlocks* blocks = new SpareBlocks(sizeof(Value));
    return *blocks;
}
}  // namespace

void node_release_spares() {
    node_blocks().release();
    attrs_blocks().release();
    value_blocks().release();
}

void engine_release_spares() {
    node_release_spares();
    storage_release_cached();
    strides_release_spares();
}

size_t engine_bytes_allocated_total() { return storage_bytes_allocated_total() + g.node_bytes_made; }
size_t engine_bytes_live() { return storage_bytes_live() + g.node_bytes_live; }

void* Node::operator new(size_t) { return node_blocks().take(); }   // Node is final: always sizeof(Node)

void Node::operator delete(void* p) { node_blocks().give(p); }

namespace {
// The attributes block made last for each op, kept (one reference) so that the next node of that
// op with equal attributes shares it: a loop's t() or transpose(2, 3) then costs one block, always
// in cache, instead of one per node. A narrow whose start moves each step gets a block each step.
SharedOpAttrs*& last_attrs_block(OpId op) {
    static std::vector<SharedOpAttrs*>& blocks = *new std::vector<SharedOpAttrs*>(OP_COUNT, nullptr);   // immortal
    return blocks[op];
}

SharedOpAttrs* attrs_block_new(const OpAttrs& attrs) { return new (attrs_blocks().take()) SharedOpAttrs{attrs, 1}; }

void attrs_block_release(SharedOpAttrs* block) {
    if (--block->refcount > 0) return;
    block->~SharedOpAttrs();
    attrs_blocks().give(block);
}
}  // namespace

void Node::set_attrs(const OpAttrs& attrs) {
    forget_own_attrs();
    bool defaults = &attrs == &op_attrs_default() ||
                    (attrs.init_values == nullptr && attrs_equal(attrs, op_attrs_default()));
    if (defaults) return;
    if (attrs.init_values) {   // `tensor`'s values, read during its call: a block of its own
        own_attrs = attrs_block_new(attrs);
        return;
    }
    SharedOpAttrs*& last = last_attrs_block(op);
    if (!last || !attrs_equal(last->attrs, attrs)) {
        if (last) attrs_block_release(last);
        last = attrs_block_new(attrs);
    }
    ++last->refcount;
    own_attrs = last;
}

void Node::forget_init_values() {
    if (own_attrs && own_attrs->attrs.init_values) own_attrs->attrs.init_values = nullptr;
}

void Node::forget_own_attrs() {
    if (!own_attrs) return;
    attrs_block_release(own_attrs);
    own_attrs = nullptr;
}

Node::~Node() { forget_own_attrs(); }

// ---------------------------------------------------------------------------------------------
// Edges: an own copy of the value only where the producing node is not held (see Edge).

Edge::Edge(Edge&& other) noexcept
    : id(other.id), output(other.output), version(other.version), node_(std::move(other.node_)),
      own_value(other.own_value) {
    other.own_value = nullptr;
}

Edge& Edge::operator=(Edge&& other) noexcept {
    if (this == &other) return *this;
    drop_own_value();
    id = other.id;
    output = other.output;
    version = other.version;
    node_ = std::move(other.node_);
    own_value = other.own_value;
    other.own_value = nullptr;
    return *this;
}

void Edge::set_node(const Ref<Node>& producer, int output_index) {
    drop_own_value();
    node_ = producer;
    output = output_index;
}

void Edge::set_value(const Value& value) {
    node_ = Ref<Node>();
    if (own_value) *own_value = value;
    else own_value = new (value_blocks().take()) Value(value);
}

void Edge::release_node() {
    if (!node_) return;
    Ref<Node> producer = std::move(node_);   // held until the copy is made
    set_value(producer->outputs[output].value);
}

void Edge::free_own_storage() {
    if (own_value) own_value->storage = Ref<Storage>();
}

void Edge::drop_own_value() {
    if (!own_value) return;
    own_value->~Value();
    value_blocks().give(own_value);
    own_value = nullptr;
}

namespace {
const NodeGroupRecords& no_group_records() {
    static const NodeGroupRecords* none = new NodeGroupRecords;   // immortal
    return *none;
}
}  // namespace

const std::vector<Ref<Node>>& Node::backward_nodes() const {
    return (group_records ? *group_records : no_group_records()).backward_nodes;
}
const std::vector<Ref<Node>>& Node::inner_nodes() const {
    return (group_records ? *group_records : no_group_records()).inner_nodes;
}
const std::shared_ptr<CustomFunction>& Node::custom() const {
    return (group_records ? *group_records : no_group_records()).custom;
}
NodeGroupRecords& Node::group_records_made() {
    if (!group_records) group_records.reset(new NodeGroupRecords);
    return *group_records;
}

// Destroying a node drops its references, which can free a long chain of nodes. Do it with a
// work list, not recursion, so a 100,000-step graph does not overflow the stack.
constexpr int DESTROY_AHEAD = 8;   // nodes (Node::prefetch_below)

void node_destroy(Node* node) {
    node->prefetch();   // a long graph's nodes die cold: their lines at once, not as ~Node reaches them
    g.dying.push_back(node);
    if (g.destroying) return;
    g.destroying = true;
    for (size_t destroyed = 0; !g.dying.empty(); ++destroyed) {
        Node* n = g.dying.back();
        g.dying.pop_back();
        // A long chain of deaths is a graph dying from its last node down, node by node: ask for
        // the nodes below ahead (a short one, a pass's temporaries, is in cache).
        if (destroyed >= DESTROY_AHEAD) n->prefetch_below(DESTROY_AHEAD);
        tape_unlink(n);
        if (n->has_grad_hooks) grad_hooks_drop(n);
        if (n->has_arrived_gradients) arrived_gradients_drop(n);
        if (n->has_name) node_names_drop(n);
        delete n;
    }
    g.destroying = false;
}

Node* tape_first() { return g.tape_head; }
Node* tape_last() { return g.tape_tail; }
int64_t tape_live_count() { return g.tape_count; }
uint64_t tape_version() { return g.tape_version; }

void node_set_requires_grad(Node* node, int output, bool flag) {
    Output& out = node->outputs[output];
    if (out.requires_grad == flag) return;
    out.requires_grad = flag;
    ++g.tape_version;   // a record of the node (the viewer's) is out of date now
}
int64_t tape_next_id() { return g.next_id; }

Node* tape_find(int64_t id) {
    // The nodes a running backward pass visits are found by binary search: stops in a backward
    // pass ask for them at every group (walking the tape there made a pass with stops O(n^2)).
    if (Node* visited = backward_pass_find(id)) return visited;
    for (Node* n = g.tape_tail; n; n = n->tape_prev) {
        if (n->id == id) return n;
        if (n->id < id) break;
    }
    return nullptr;
}

// ============================================================================================
// [SECTION] op_call

// The dtype the inputs promote to (promote_dtypes, ops.h: as PyTorch, a 0-d tensor does not widen
// tensors with dims of its category).
static DType promoted_dtype(const Tensor* const* inputs, int n_inputs) {
    std::vector<const Value*> values(n_inputs);
    for (int j = 0; j < n_inputs; ++j) values[j] = &inputs[j]->value();
    return promote_dtypes(values.data(), n_inputs);
}

// The dtype input i must have for this op (see OPF_PROMOTE, OPF_FLOAT_ONLY): `promoted` for ops
// that promote, in place the destination's, int64 made float32 for float-only ops.
static DType required_dtype(const OpInfo& info, const Tensor* const* inputs, int i, DType promoted) {
    DType d = inputs[i]->dtype();
    if (info.flags & OPF_PROMOTE) d = promoted;
    else if ((info.flags & OPF_INPLACE) && i == 1) d = inputs[0]->dtype();
    if ((info.flags & OPF_FLOAT_ONLY) && d == DTYPE_I64) d = DTYPE_F32;
    return d;
}

static void fail_inplace_on_leaf(const OpInfo& info, const Tensor& leaf, bool through_view) {
    const char* advice = "change it in place only inside torch.no_grad (as an optimizer step does)";
    long long id = static_cast<long long>(leaf.id());
    // assign_ is how a write through a view reaches the base (x[i] = v, x[i]:fill_(0)): the Lua
    // binding's guard names what the user wrote, so the message does not name the internal op.
    std::string who = info.flags & OPF_INTERNAL ? "" : std::string(info.name) + ": ";
    if (through_view || (info.flags & OPF_INTERNAL))
        engine_fail("%sthe tensor written is a view of tensor #%lld, which is a leaf that requires grad; %s",
                    who.c_str(), id, advice);
    engine_fail("%s: tensor #%lld is a leaf that requires grad; %s", info.name, id, advice);
}

// The tensor whose storage `x` shares: walks back through recorded views (reshape, transpose, ...)
// to the tensor they were taken from. Only tracked views hold their input, which is the case that
// matters: an in-place change through a view of a leaf that requires grad changes that leaf.
static Tensor view_base(const Tensor& x) {
    Tensor base = x;
    while ((base.node->info().flags & OPF_VIEW) && base.node->tracks_grad && base.node->inputs[0].node())
        base = Tensor(base.node->inputs[0].node(), base.node->inputs[0].output);
    return base;
}

// An in-place write into `x`: refused where PyTorch refuses it, or where the gradient would be
// wrong. Two elements of x at one place (an expand); a leaf that requires grad, or a view of one;
// with autograd on, a view of another tensor: the write changes that tensor too, and only the
// Lua API knows which handle stands for it (x[i] = v and in-place ops on views go through
// ops::assign_ there, which records the write on the base).
static void check_inplace_target(const OpInfo& info, const Tensor& x, bool track) {
    if (value_overlaps_itself(x.value()))
        engine_fail("%s: tensor #%lld has shape %s but repeats elements (a view made by expand); writing into it in "
                    "place would write one element several times (clone() it first)",
                    info.name, static_cast<long long>(x.id()), x.shape().str().c_str());
    if (!track) return;
    Tensor base = view_base(x);
    if (base.node->is_leaf() && base.requires_grad()) fail_inplace_on_leaf(info, base, !base.same_as(x));
    if (!base.same_as(x))
        engine_fail("%s: tensor #%lld is a view (%s) of tensor #%lld, and autograd records this write; writing "
                    "through a view needs the base's handle: assign through indexing (base[i] = v) from Lua, "
                    "or clone() the view first",
                    info.name, static_cast<long long>(x.id()), x.node->name(), static_cast<long long>(base.id()));
}

// A tensor whose storage was written since it was made, by a write autograd recorded on another
// handle (a view taken before `x[i] = v`, then used): its recorded history no longer says how its
// values came about. PyTorch would recompute that history; this refuses, naming the fix.
static void check_history_current(const OpInfo& info, const Tensor* const* inputs, int n_inputs) {
    for (int i = 0; i < n_inputs; ++i) {
        const Tensor& x = *inputs[i];
        const Output& out = x.node->outputs[x.output];
        const Storage* storage = out.value.storage.get();
        if (storage->history_version <= out.version) continue;
        // Only a handle whose values depend on how they were made: a view (not detach, which is
        // cut from the graph on purpose) or a tensor with a recorded history.
        bool view = (x.node->info().flags & OPF_VIEW) && x.node->op != OP_detach;
        if (!view && !(x.node->tracks_grad && out.requires_grad)) continue;
        // No op name in front: the Lua guard names the function the user called (this op may be a
        // step inside it, as the comparison masked_fill makes).
        engine_fail("tensor #%lld (%s, input %d of %s) shares its storage with a tensor that was changed in place "
                    "since, with autograd recording the change on that other tensor: its own history is out of "
                    "date. Take the view again after the write (or clone() before it)",
                    static_cast<long long>(x.id()), x.node->name(), i + 1, info.name);
    }
}

// A new output value; when the memory limit refuses it, the error names the op and the shape.
static void allocate_output(const OpInfo& info, const Shape& shape, DType dtype, Device device, Value* out) {
    try {
        *out = value_new(shape, dtype, device);
    } catch (const EngineError& e) {
        engine_fail("%s: a result of shape %s (%s%s%s): %s", info.name, shape.str().c_str(), dtype_name(dtype),
                    device == DEVICE_CPU ? "" : ", on ", device == DEVICE_CPU ? "" : device_name(device), e.what());
    }
}

// The device an op's outputs are made on: a creation op's and to_device's from their attributes;
// else the inputs', which must all be on one device (as PyTorch: the error names both). A 0-d
// tensor on the CPU goes with any device, as PyTorch's CPU scalars do (op_call moves it: the
// numbers the bindings and backward rules wrap as 0-d tensors, x * 2, need no device of their own),
// except as the tensor an in-place op writes: that one says where the op runs.
static bool is_cpu_scalar(const Tensor& t) { return t.value().device() == DEVICE_CPU && t.shape().ndim == 0; }

static Device op_device(OpId op, const Tensor* const* inputs, int n_inputs, const OpAttrs& attrs) {
    const OpInfo& info = op_table[op];
    if ((info.flags & OPF_CREATE) || op == OP_to_device) return attrs.device;
    if (info.flags & OPF_CUSTOM) return DEVICE_CPU;   // a custom function's own ops say
    bool all_on_cpu = true;   // the usual case, per op of every loop: nothing more to look at
    for (int i = 0; i < n_inputs && all_on_cpu; ++i) all_on_cpu = inputs[i]->value().device() == DEVICE_CPU;
    if (all_on_cpu) return DEVICE_CPU;
    int first = (info.flags & OPF_INPLACE) && n_inputs > 0 ? 0 : -1;   // in place: where the written tensor is
    for (int i = 0; i < n_inputs && first < 0; ++i)
        if (!is_cpu_scalar(*inputs[i])) first = i;
    if (first < 0) return DEVICE_CPU;
    Device device = inputs[first]->value().device();
    for (int i = first + 1; i < n_inputs; ++i) {
        Device other = inputs[i]->value().device();
        if (other != device && !is_cpu_scalar(*inputs[i]))
            engine_fail("%s: input %d is on %s but input %d is on %s: all inputs must be on one device "
                        "(move one with :to(\"%s\"), :cuda() or :cpu())",
                        info.name, first + 1, device_name(device), i + 1, device_name(other), device_name(device));
    }
    return device;
}

// An op on another device than the CPU: the 0-d CPU inputs moved there (each move a recorded
// to_device node); `inputs` itself when there are none. `moved` and `pointers` hold what the
// result points to.
static const Tensor* const* inputs_moved_to(OpId op, Device device, const Tensor* const* inputs, int n_inputs,
                                            std::vector<Tensor>& moved, std::vector<const Tensor*>& pointers) {
    const OpInfo& info = op_table[op];
    cuda_require(info.name);
    bool any_scalar = false;
    for (int i = 0; i < n_inputs && !(info.flags & OPF_CREATE) && op != OP_to_device; ++i)
        any_scalar = any_scalar || inputs[i]->value().device() != device;
    if (!any_scalar) return inputs;
    for (int i = 0; i < n_inputs; ++i)
        moved.push_back(inputs[i]->value().device() == device ? *inputs[i] : ops::to_device(*inputs[i], device));
    for (const Tensor& t : moved) pointers.push_back(&t);
    return pointers.data();
}

// The inputs converted to the dtypes the op takes (each conversion a recorded `to` node: see
// OPF_PROMOTE, OPF_FLOAT_ONLY, OPF_INPLACE); `inputs` itself when none needs it. `converted` and
// `pointers` hold what the result points to.
static const Tensor* const* inputs_converted(const OpInfo& info, const Tensor* const* inputs, int n_inputs,
                                             std::vector<Tensor>& converted, std::vector<const Tensor*>& pointers) {
    bool same_dtypes = true;   // the usual case: nothing to convert unless a float-only op meets int64
    for (int i = 1; i < n_inputs && same_dtypes; ++i) same_dtypes = inputs[i]->dtype() == inputs[0]->dtype();
    bool convert = !same_dtypes || ((info.flags & OPF_FLOAT_ONLY) && n_inputs > 0 && inputs[0]->dtype() == DTYPE_I64);
    if (!convert || !(info.flags & (OPF_PROMOTE | OPF_FLOAT_ONLY | OPF_INPLACE))) return inputs;
    DType promoted = (info.flags & OPF_PROMOTE) ? promoted_dtype(inputs, n_inputs) : DTYPE_F32;   // once, not per input
    for (int i = 0; i < n_inputs; ++i) {
        DType want = required_dtype(info, inputs, i, promoted);
        if (want == inputs[i]->dtype()) continue;
        if (converted.empty()) {
            converted.reserve(n_inputs);
            for (int j = 0; j < n_inputs; ++j) converted.push_back(*inputs[j]);
        }
        converted[i] = ops::to(*inputs[i], want);
    }
    if (converted.empty()) return inputs;
    for (const Tensor& t : converted) pointers.push_back(&t);
    return pointers.data();
}

// A new node's place in the recording: its id, op and attributes, its phase, scope and group, and
// its source line (the locator's; in a backward pass its forward node's, which keeps it when the
// backward graph is kept; inside a custom function the function node keeps it).
static void node_place(Node* node, OpId op, const OpAttrs& attrs, bool track,
                       const std::shared_ptr<CustomFunction>* custom) {
    node->id = g.next_id++;
    node->op = op;
    node->phase = g.recording.phase;
    node->tracks_grad = track;
    node->set_attrs(attrs);
    node->scope = scopes().current;
    node->history_start = g.recording.phase == PHASE_FORWARD && !g.recording.inner_call &&
                          (!g.grad_enabled || op == OP_detach);
    if (custom) node->group_records_made().custom = *custom;
    if (g.recording.group_node && g.recording.inner_call) {
        node->group = g.recording.group_node->id;
        if (g.locator) node->where = g.locator(g.locator_user);
        g.recording.group_node->group_records_made().inner_nodes.push_back(Ref<Node>(node));
        node->held_by_record = true;
    } else if (g.recording.group_node) {
        node->group = g.recording.group_node->id;
        node->where = g.recording.group_node->where;
        if (engine_backward_graph_kept()) {
            g.recording.group_node->group_records_made().backward_nodes.push_back(Ref<Node>(node));
            node->held_by_record = true;
        }
    } else if (g.locator) {
        node->where = g.locator(g.locator_user);
    }
}

// A new node's input edges (holding the producing nodes when autograd tracks it or a custom
// function reads its inputs as tensors, else only their values) and its outputs: a view's and an
// in-place op's output 0 shares input 0's layout, the others are allocated on `device`.
static void node_connect(Node* node, const Tensor* const* inputs, int n_inputs, const ShapeCall& shape_call,
                         Device device, bool hold_inputs) {
    const OpInfo& info = node->info();
    node->inputs.resize(n_inputs);
    for (int i = 0; i < n_inputs; ++i) {
        Edge& e = node->inputs[i];
        e.id = inputs[i]->node->id;
        e.output = inputs[i]->output;
        if (hold_inputs) e.set_node(inputs[i]->node, inputs[i]->output);
        else e.set_value(inputs[i]->value());
        e.version = e.value().storage->version;
    }
    node->outputs.resize(shape_call.n_outputs);
    for (int i = 0; i < shape_call.n_outputs; ++i) {
        Output& out = node->outputs[i];
        if (i == 0 && (info.flags & (OPF_VIEW | OPF_INPLACE))) {
            value_share_layout(out.value, inputs[0]->value());   // a view's kernel then sets its own
            out.value.shape = shape_call.shapes[0];
            out.value.dtype = shape_call.dtypes[0];
        } else {
            allocate_output(info, shape_call.shapes[i], shape_call.dtypes[i], device, &out.value);
        }
        out.requires_grad = node->tracks_grad && dtype_is_float(shape_call.dtypes[i]);
    }
}

Tensor op_call(OpId op, const Tensor* const* inputs, int n_inputs, const OpAttrs& attrs,
               const std::shared_ptr<CustomFunction>* custom) {
    const OpInfo& info = op_table[op];
    if (info.n_inputs >= 0 ? n_inputs != info.n_inputs : n_inputs < 1)
        engine_fail("%s: expects %d tensor input%s, got %d", info.name, info.n_inputs < 0 ? 1 : info.n_inputs,
                    info.n_inputs == 1 ? "" : "s", n_inputs);
    for (int i = 0; i < n_inputs; ++i)
        if (!inputs[i] || !inputs[i]->defined()) engine_fail("%s: input %d is not a tensor", info.name, i + 1);

    Device device = op_device(op, inputs, n_inputs, attrs);
    std::vector<Tensor> moved;   // 0-d CPU inputs of an op on another device, moved there (recorded)
    std::vector<const Tensor*> moved_ptrs;
    if (device != DEVICE_CPU) inputs = inputs_moved_to(op, device, inputs, n_inputs, moved, moved_ptrs);

    // In place, a float value cannot go into an int64 tensor (PyTorch refuses too: no silent truncation).
    if ((info.flags & OPF_INPLACE) && n_inputs > 1 && inputs[0]->dtype() == DTYPE_I64 &&
        dtype_is_float(inputs[1]->dtype()))
        engine_fail("%s: the tensor changed in place is int64 but the value is %s; an int64 tensor holds whole "
                    "numbers only (use the op out of place, or a float tensor)",
                    info.name, dtype_name(inputs[1]->dtype()));

    std::vector<Tensor> converted;
    std::vector<const Tensor*> converted_ptrs;
    inputs = inputs_converted(info, inputs, n_inputs, converted, converted_ptrs);

    // Shape rule: output shapes and dtypes, or an error.
    const Value* input_values_local[4];
    std::vector<const Value*> input_values_heap;
    const Value** input_values = input_values_local;
    if (n_inputs > 4) {
        input_values_heap.resize(n_inputs);
        input_values = input_values_heap.data();
    }
    for (int i = 0; i < n_inputs; ++i) input_values[i] = &inputs[i]->value();
    ShapeCall shape_call(info.name, input_values, n_inputs, attrs);
    info.shape_rule(shape_call);

    bool track = false;
    if (g.grad_enabled && info.backward_rule)
        for (int i = 0; i < n_inputs && !track; ++i) track = inputs[i]->requires_grad();
    if (info.flags & OPF_INPLACE) check_inplace_target(info, *inputs[0], track);
    if (g.grad_enabled) check_history_current(info, inputs, n_inputs);

    // Record the node, and run it.
    Node* node = new Node();
    Tensor result(node, 0);   // owns the node from here on, so an error below frees it
    node_place(node, op, attrs, track, custom);
    node_connect(node, inputs, n_inputs, shape_call, device, track || custom);
    tape_append(node);

    exec_node(node);
    node->forget_init_values();   // only valid during the call
    return result;
}

Tensor tape_record_prepared(OpId op, const OpAttrs& attrs, const Value* inputs, const int64_t* input_ids,
                            int n_inputs, const Value* outputs, int n_outputs, Phase phase, SourceLoc where) {
    Node* node = new Node();
    Tensor result(node, 0);
    node->id = g.next_id++;
    node->op = op;
    node->phase = phase;
    node->set_attrs(attrs);
    node->forget_init_values();
    node->where = where;
    node->inputs.resize(n_inputs);
    for (int i = 0; i < n_inputs; ++i) {
        Edge& e = node->inputs[i];
        e.id = input_ids ? input_ids[i] : 0;
        e.set_value(inputs[i]);
        e.version = inputs[i].storage ? inputs[i].storage->version : 0;
    }
    node->outputs.resize(n_outputs);
    for (int i = 0; i < n_outputs; ++i) {
        node->outputs[i].value = outputs[i];
        node->outputs[i].version = outputs[i].storage ? outputs[i].storage->version : 0;
    }
    tape_append(node);
    return result;
}

// ============================================================================================
// [SECTION] exec_node

// Call the observers that receive `event` (for HOOK_AFTER while an interrupt is pending, every one
// but an OBSERVER_FOLLOWS, so that one can take it), in their order (OBSERVER_FIRST first).
static void notify_observers(Node* node, HookEvent event) {
    // An observer may unsubscribe (or subscribe) while being called: iterate over a copy. A few
    // observers are copied onto the stack: this runs twice per node, so no allocation.
    constexpr size_t INLINE_OBSERVERS = 8;
    uint8_t bit = hook_bit(event);
    bool interrupt = event == HOOK_AFTER && engine_interrupt_pending();
    auto receives = [bit, interrupt](const Observer& o) {
        return (o.receives & bit) || (interrupt && o.role != OBSERVER_FOLLOWS);
    };
    size_t n = g.observers.size();
    if (n == 1) {   // the usual case (the debugger): a copy of the one entry is enough
        Observer o = g.observers[0];
        if (receives(o)) o.fn(node, event, o.user);
        return;
    }
    if (n > INLINE_OBSERVERS) {
        std::vector<Observer> current = g.observers;
        for (const Observer& o : current)
            if (receives(o)) o.fn(node, event, o.user);
        return;
    }
    Observer current[INLINE_OBSERVERS];
    std::copy(g.observers.begin(), g.observers.end(), current);
    for (size_t i = 0; i < n; ++i)
        if (receives(current[i])) current[i].fn(node, event, current[i].user);
}

void engine_notify(Node* node, HookEvent event) {
    if ((g.events_wanted & hook_bit(event)) || (event == HOOK_AFTER && engine_interrupt_pending()))
        notify_observers(node, event);
}

void engine_notify_before_write(Node* node, Storage* storage) {
    if (!(g.events_wanted & hook_bit(HOOK_BEFORE_WRITE)) || !storage) return;
    Storage* outer = g.storage_to_write;   // an observer's own writes may notify again
    g.storage_to_write = storage;
    try {
        notify_observers(node, HOOK_BEFORE_WRITE);
    } catch (...) {
        g.storage_to_write = outer;
        throw;
    }
    g.storage_to_write = outer;
}

Storage* engine_storage_to_write() { return g.storage_to_write; }

void exec_node(Node* node) {
    if (g.events_wanted & hook_bit(HOOK_BEFORE)) notify_observers(node, HOOK_BEFORE);

    const Value* inputs_local[4];
    std::vector<const Value*> inputs_heap;
    const Value** inputs = inputs_local;
    int n_inputs = node->inputs.size();
    if (n_inputs > 4) {
        inputs_heap.resize(n_inputs);
        inputs = inputs_heap.data();
    }
    for (int i = 0; i < n_inputs; ++i) inputs[i] = &node->inputs[i].value();
    Value* outputs[MAX_OUTPUTS];
    int n_outputs = node->outputs.size();
    for (int i = 0; i < n_outputs; ++i) outputs[i] = &node->outputs[i].value;

    // Observers hear of each storage before it is written (the rewind history keeps the bytes of
    // one it holds as they were): an in-place op's input, or a buffer a frozen call's replay reuses.
    // A view writes nothing.
    if ((g.events_wanted & hook_bit(HOOK_BEFORE_WRITE)) && !(node->info().flags & OPF_VIEW))
        for (Output& out : node->outputs) engine_notify_before_write(node, out.value.storage.get());
    if (node->info().flags & OPF_CUSTOM) {
        function_run(node);
    } else {
        KernelCall call{inputs, n_inputs, outputs, n_outputs, node->attrs()};
        kernel_run(node->op, call);
    }

    if (node->info().flags & OPF_INPLACE) {
        Storage* written = node->outputs[0].value.storage.get();
        ++written->version;
        if (node->tracks_grad) written->history_version = written->version;
    }
    for (Output& out : node->outputs) out.version = out.value.storage->version;

    if ((g.events_wanted & hook_bit(HOOK_AFTER)) || engine_interrupt_pending()) notify_observers(node, HOOK_AFTER);
}

// ============================================================================================
// [SECTION] describe

const char* Node::name() const {
    if (!custom()) return op_info(op).name;
    return op == OP_function_backward ? custom()->backward_name.c_str() : custom()->name.c_str();
}

bool node_has_no_history(const Node* n) {
    return n->phase == PHASE_FORWARD && ((n->info().flags & OPF_CREATE) || n->history_start);
}

bool node_is_parameter(const Node* n) {
    return node_has_no_history(n) && !n->tracks_grad && !(n->info().flags & OPF_INPLACE) && n->outputs.size() > 0 &&
           n->outputs[0].requires_grad;
}

const char* Node::shown_op() const {
    return node_is_parameter(this) && !(info().flags & OPF_CREATE) ? "parameter" : name();
}

std::string node_describe(const Node* node) {
    std::string s = "#";
    s += std::to_string(node->id);
    s += ' ';
    s += node->name();
    std::string attrs = op_describe_attrs(node->op, node->attrs());
    if (!attrs.empty()) {
        s += '(';
        s += attrs;
        s += ')';
    }
    for (const Output& out : node->outputs) {
        s += ' ';
        s += out.value.shape.str();
        if (out.value.storage && out.value.device() != DEVICE_CPU) {   // :graph marks what runs on the GPU
            s += '@';
            s += device_name(out.value.device());
        }
    }
    if (node->inputs.size() > 0) {
        s += " <-";
        for (const Edge& e : node->inputs) {
            s += " #";
            s += std::to_string(e.id);
        }
    }
    if (node->phase == PHASE_BACKWARD) {
        s += "  (backward of #";
        s += std::to_string(node->group);
        s += ')';
    }
    s += "  ";
    s += source_loc_str(node->where);
    return s;
}

}  // namespace td
