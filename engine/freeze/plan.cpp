// plan.cpp: freeze — record a run, compile it into a Plan, replay it (plan.h says the contract).
//
// [SECTION] helpers     keys, roots (value_roots), what a step reads and writes, attribute hashing
// [SECTION] record      the node and gradient observers, plan_record_*
// [SECTION] passes      dead nodes, common subexpressions, constants, fusion, gradients in place,
//                       guard hoisting, liveness-based buffers; plan_compile
// [SECTION] run         the run-time state, guards, fused loops, plan_check_inputs, plan_run
// [SECTION] describe    plan_describe and the names of values and guards
#include "plan.h"
#include "plan_log.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <cmath>
#include <cstring>
#include <deque>
#include <unordered_map>

#include "backend.h"
#include "device.h"
#include "elementwise.h"

namespace td {

// ============================================================================================
// [SECTION] helpers

namespace {

uint64_t value_key(int64_t node_id, int output) { return static_cast<uint64_t>(node_id) * 1024u + static_cast<uint64_t>(output); }

// The root of every value: the value whose bytes it shares, following alias_of to the end of the
// chain. O(values) for all of them: a loop of in-place ops makes a chain as long as the loop, and
// walking it per lookup made freeze quadratic (x:add_(w) 20,000 times took 11 s to compile).
std::vector<int> value_roots(const Plan& plan) {
    std::vector<int> roots(plan.values.size(), -1);
    std::vector<int> path;
    for (size_t v = 0; v < roots.size(); ++v) {
        int w = static_cast<int>(v);
        while (roots[w] < 0 && plan.values[w].alias_of >= 0) {
            path.push_back(w);
            w = plan.values[w].alias_of;
        }
        int root = roots[w] >= 0 ? roots[w] : w;
        roots[w] = root;
        for (int on_path : path) roots[on_path] = root;
        path.clear();
    }
    return roots;
}

size_t value_bytes(const PlanValue& v) { return static_cast<size_t>(v.shape.numel()) * dtype_size(v.dtype); }

bool is_random(OpId op) { return op == OP_rand || op == OP_randn; }

double seconds_since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// A hash of the attributes that tell steps apart (equal attributes hash equal; attrs_equal decides).
size_t attrs_hash(const OpAttrs& a) {
    size_t h = 0;
    auto mix = [&h](size_t x) { h = h * 1000003u ^ x; };
    for (int64_t x : {int64_t(a.dim), int64_t(a.dim2), a.start, a.length, int64_t(a.shape.ndim), int64_t(a.strides.ndim),
                      int64_t(a.dtype), int64_t(a.trans_a) * 2 + a.trans_b + 4 * a.accumulate + 8 * a.keepdim + 16 * a.all,
                      int64_t(a.kernel_h), int64_t(a.stride_h), int64_t(a.padding_h), int64_t(a.groups)})
        mix(std::hash<int64_t>()(x));
    for (double x : {a.scalar, a.lo, a.hi}) mix(std::hash<double>()(x));
    for (int i = 0; i < a.shape.ndim; ++i) mix(std::hash<int64_t>()(a.shape[i]));
    for (int i = 0; i < a.strides.ndim; ++i) mix(std::hash<int64_t>()(a.strides[i]));
    return h;
}

// The root a step writes in place, or -1 (its own outputs are made, not written). `roots`: value_roots.
int step_written_root(const Plan& plan, const std::vector<int>& roots, const PlanStep& s) {
    if (s.kind == STEP_GRAD_ACCUMULATE || s.kind == STEP_GRAD_CLEAR) return plan.grad_targets[s.target].grad_value;
    if (s.kind == STEP_KERNEL && s.into_grad >= 0) return plan.grad_targets[s.into_grad].grad_value;
    if (s.kind == STEP_KERNEL && plan_step_attrs(plan, s).accumulate) return roots[s.outputs[0]];   // Y += A B
    if (s.kind == STEP_KERNEL && (op_info(s.op).flags & OPF_INPLACE)) return roots[s.inputs[0]];
    return -1;
}

bool root_is_outside(const Plan& plan, int root) {
    ValueKind k = plan.values[root].kind;
    return k == VALUE_INPUT || k == VALUE_CAPTURED || k == VALUE_GRAD;
}

// Whether running the step changes anything a caller could see (or the random stream).
bool step_is_effect(const Plan& plan, const std::vector<int>& roots, const PlanStep& s) {
    if (s.kind == STEP_GUARD || s.kind == STEP_GRAD_ACCUMULATE || s.kind == STEP_GRAD_CLEAR) return true;
    if (s.kind == STEP_KERNEL && is_random(s.op)) return true;
    int written = step_written_root(plan, roots, s);
    return written >= 0 && root_is_outside(plan, written);
}

int add_value(Plan& plan, ValueKind kind, int index, const Shape& shape, DType dtype, int64_t recorded_id,
              Device device = DEVICE_CPU) {
    PlanValue v;
    v.kind = kind;
    v.index = index;
    v.shape = shape;
    v.dtype = dtype;
    v.device = device;
    v.recorded_id = recorded_id;
    plan.values.push_back(v);
    return static_cast<int>(plan.values.size()) - 1;
}

// The node whose .grad a target is, for this call's inputs.
Node* target_node(Plan& plan, int t, const std::vector<Tensor>& inputs) {
    const GradTarget& target = plan.grad_targets[t];
    return target.kind == VALUE_INPUT ? inputs[target.index].node.get() : plan.captured[target.index].tensor.node.get();
}

Output& target_output(Plan& plan, int t, const std::vector<Tensor>& inputs) {
    return target_node(plan, t, inputs)->outputs[plan.grad_targets[t].output];
}

}  // namespace

const Value& plan_captured_value(const PlanCaptured& captured) { return captured.tensor.value(); }

// A long loop's plan has a million steps and values: these sizes are most of its memory.
static_assert(sizeof(ValueIds) == 16, "ValueIds: 3 ids, or a capacity and a pointer, and a count");
static_assert(sizeof(PlanValue) == 32, "PlanValue: its shape is interned (ShapeRef)");
static_assert(sizeof(PlanStep) <= 80, "PlanStep: fused lists behind one pointer, no padding");

ValueIds::ValueIds(std::initializer_list<int> ids) : ValueIds() {
    reserve(ids.size());
    for (int id : ids) push_back(id);
}

ValueIds::ValueIds(const std::vector<int>& ids) : ValueIds() {
    reserve(ids.size());
    for (int id : ids) push_back(id);
}

ValueIds::ValueIds(const ValueIds& other) : ValueIds() { *this = other; }

ValueIds::ValueIds(ValueIds&& other) noexcept : ValueIds() { *this = std::move(other); }

ValueIds& ValueIds::operator=(const ValueIds& other) {
    if (this == &other) return *this;
    clear();
    reserve(other.size_);
    for (int id : other) push_back(id);
    return *this;
}

ValueIds& ValueIds::operator=(ValueIds&& other) noexcept {
    if (this == &other) return *this;
    if (on_heap_) delete[] heap();
    std::copy(other.words_, other.words_ + INLINE, words_);   // the ids, or the capacity and the pointer
    size_ = other.size_;
    on_heap_ = other.on_heap_;
    other.size_ = 0;
    other.on_heap_ = 0;   // the pointer, if any, is ours now
    return *this;
}

int* ValueIds::heap() const {
    int* ids;
    std::memcpy(&ids, &words_[1], sizeof ids);
    return ids;
}

void ValueIds::set_heap(int* ids, size_t capacity) {
    words_[0] = static_cast<int>(capacity);
    std::memcpy(&words_[1], &ids, sizeof ids);
    on_heap_ = 1;
}

void ValueIds::reserve(size_t n) {
    if (n <= capacity()) return;
    if (n > 0x7fffffff) engine_fail("a plan step with %zu values (at most 2^31 - 1)", n);
    int* grown = new int[n];
    std::copy(begin(), end(), grown);
    if (on_heap_) delete[] heap();
    set_heap(grown, n);   // over the inline ids, copied above
}

void ValueIds::push_back(int id) {
    if (size_ == capacity()) reserve(2 * capacity());
    data()[size_++] = id;
}

bool ValueIds::operator==(const ValueIds& other) const {
    return size_ == other.size_ && std::equal(begin(), end(), other.begin());
}

OpAttrs& plan_step_own_attrs(Plan& plan, PlanStep& step) {
    plan.attrs.push_back(plan.attrs[step.attrs]);
    step.attrs = static_cast<int>(plan.attrs.size()) - 1;
    return plan.attrs.back();
}

// The interned shapes: each distinct one once, in a deque (its elements never move), found by a
// hash of ndim and dims.
const Shape& ShapeRef::intern(const Shape& shape) {
    static std::deque<Shape> shapes;
    static std::unordered_multimap<size_t, const Shape*> by_hash;
    size_t h = std::hash<int>()(shape.ndim);
    for (int i = 0; i < shape.ndim; ++i) h = h * 1000003u ^ std::hash<int64_t>()(shape.dims[i]);
    auto range = by_hash.equal_range(h);
    for (auto it = range.first; it != range.second; ++it)
        if (*it->second == shape) return *it->second;
    shapes.push_back(shape);
    by_hash.emplace(h, &shapes.back());
    return shapes.back();
}

PlanAttrsTable::PlanAttrsTable(Plan& plan) : plan_(plan) {
    for (size_t i = 0; i < plan.attrs.size(); ++i) by_hash_.emplace(attrs_hash(plan.attrs[i]), static_cast<int>(i));
}

int PlanAttrsTable::index_of(const OpAttrs& attrs) {
    size_t hash = attrs_hash(attrs);
    auto candidates = by_hash_.equal_range(hash);
    for (auto it = candidates.first; it != candidates.second; ++it)
        if (attrs_equal(plan_.attrs[it->second], attrs)) return it->second;
    plan_.attrs.push_back(attrs);
    plan_.attrs.back().init_values = nullptr;   // not an attribute (OpAttrs)
    int index = static_cast<int>(plan_.attrs.size()) - 1;
    by_hash_.emplace(hash, index);
    return index;
}

// ============================================================================================
// [SECTION] record

namespace {

// (node id, output) -> the value the recording made, or was given, for that tensor; -1 for none.
// The nodes the recording made have dense ids from first_id on: their first two outputs are found
// by index in a vector (a hash map entry per node cost the recording of a long loop more time and
// memory than its steps). The rest (tensors from outside, a custom function's third output) are
// in a hash map.
class ValueTable {
public:
    void start_at(int64_t first_id) { first_id_ = first_id; }
    int find(int64_t id, int output) const {
        if (!dense_key(id, output)) {
            auto found = others_.find(value_key(id, output));
            return found == others_.end() ? -1 : found->second;
        }
        size_t at = dense_index(id, output);
        return at < dense_.size() ? dense_[at] : -1;
    }
    void set(int64_t id, int output, int value) {
        if (!dense_key(id, output)) {
            others_[value_key(id, output)] = value;
            return;
        }
        size_t at = dense_index(id, output);
        if (at >= dense_.size()) dense_.resize(at + 1, -1);   // grows geometrically
        dense_[at] = value;
    }

private:
    static constexpr int DENSE_OUTPUTS = 2;
    bool dense_key(int64_t id, int output) const { return id >= first_id_ && output < DENSE_OUTPUTS; }
    size_t dense_index(int64_t id, int output) const {
        return static_cast<size_t>(id - first_id_) * DENSE_OUTPUTS + static_cast<size_t>(output);
    }
    int64_t first_id_ = 0;
    BigVector<int> dense_;   // big_array.h
    std::unordered_map<uint64_t, int> others_;
};

// Storage serial -> the last value seen with those bytes; -1 for none. Storages made while the
// recording runs have dense serials from first_serial on: found by index in a vector (4 bytes a
// storage, where a hash map entry cost ~50). Older ones (arguments, captured tensors) are in a
// hash map.
class StorageValues {
public:
    void start_at(uint64_t first_serial) { first_serial_ = first_serial; }
    int find(uint64_t serial) const {
        if (serial < first_serial_) {
            auto found = older_.find(serial);
            return found == older_.end() ? -1 : found->second;
        }
        size_t at = static_cast<size_t>(serial - first_serial_);
        return at < dense_.size() ? dense_[at] : -1;
    }
    void set(uint64_t serial, int value) {
        if (serial < first_serial_) {
            older_[serial] = value;
            return;
        }
        size_t at = static_cast<size_t>(serial - first_serial_);
        if (at >= dense_.size()) dense_.resize(at + 1, -1);   // grows geometrically
        dense_[at] = value;
    }

private:
    uint64_t first_serial_ = 0;
    BigVector<int> dense_;
    std::unordered_map<uint64_t, int> older_;
};

struct Recorder {
    std::unique_ptr<Plan> plan;
    int observer = 0;
    int64_t first_id = 0;                           // nodes from this id on were made by the recording
    ValueTable value_of;                            // (node id, output) -> value
    std::unique_ptr<PlanAttrsTable> attrs;          // the plan's attribute sets
    // The last value seen with these bytes, by the storage's serial (unique for the run, where its
    // address is not: a backward pass frees what it has used while the recording goes on).
    StorageValues latest_by_storage;
    std::vector<uint64_t> input_keys;
    std::unordered_map<uint64_t, int> target_of;    // (leaf id, output) -> grad target
    std::vector<bool> target_state_known;           // a clear or an accumulation fixed its .grad state
    std::string refusal;
    size_t live_at_begin = 0;
    std::chrono::steady_clock::time_point began = std::chrono::steady_clock::now();
};


Recorder* g_recorder = nullptr;

void refuse(Recorder& r, const std::string& why) {
    if (r.refusal.empty()) r.refusal = why;
}

void remember_storage(Recorder& r, const Value& value, int v) {
    if (value.storage) r.latest_by_storage.set(value.storage->serial, v);
}

// The value for a tensor the recording reads: one it made or an input, else a new captured one.
int value_for(Recorder& r, int64_t id, int output, const Value& value, Node* node) {
    int known = r.value_of.find(id, output);
    if (known >= 0) return known;
    Plan& plan = *r.plan;
    if (!node) node = tape_find(id);
    PlanCaptured c;
    if (node) c.tensor = Tensor(node, output);
    else c.tensor = tape_record_prepared(OP_tensor, OpAttrs(), nullptr, nullptr, 0, &value, 1, PHASE_FORWARD, SourceLoc());
    plan.captured.push_back(c);
    int v = add_value(plan, VALUE_CAPTURED, static_cast<int>(plan.captured.size()) - 1, value.shape, value.dtype, id,
                      value.storage ? value.device() : DEVICE_CPU);
    r.value_of.set(id, output, v);
    remember_storage(r, value, v);
    return v;
}

int value_for_tensor(Recorder& r, const Tensor& t) {
    return value_for(r, t.node->id, t.output, t.value(), t.node.get());
}

// The recording keeps its last steps as PlanSteps (record_grad may drop the last few it made) and
// packs the ones before (PackedSteps): a long loop's recording then costs ~15 bytes a step while
// the recorded run's graph is alive, not 80.
constexpr size_t RECORDING_UNPACKED_STEPS = 4096;

PlanStep& add_step(Plan& plan, StepKind kind, OpId op, Phase phase, SourceLoc where, int64_t recorded_id) {
    if (plan.steps.size() >= 2 * RECORDING_UNPACKED_STEPS) plan_pack_steps(plan, RECORDING_UNPACKED_STEPS);
    PlanStep s;
    s.kind = kind;
    s.op = op;
    s.phase = phase;
    s.where = where;
    s.recorded_id = recorded_id;
    plan.steps.push_back(std::move(s));
    return plan.steps.back();
}

// The outputs of a custom function node are the values its own ops made (or were given): found
// by their bytes, the latest value that has them with the same shape.
void record_custom_outputs(Recorder& r, Node* node) {
    for (int i = 0; i < node->outputs.size(); ++i) {
        const Value& value = node->outputs[i].value;
        int latest = value.storage ? r.latest_by_storage.find(value.storage->serial) : -1;
        int v = -1;
        if (latest >= 0) {
            const PlanValue& candidate = r.plan->values[latest];
            if (candidate.shape == value.shape && candidate.dtype == value.dtype) v = latest;
        }
        if (v < 0) v = value_for(r, node->id, i, value, nullptr);
        r.value_of.set(node->id, i, v);
    }
}

// The value the recording made (or was given) for one output of a node; -1 when it has none.
int known_value(const Recorder& r, const Tensor& t) {
    if (!t.defined()) return -1;
    return r.value_of.find(t.node->id, t.output);
}

// Backward finished forward node `node`'s rule: a PlanGroup with what the group saw and where it
// ended among the steps, so the debug replay can stop there as eager does (its compile makes the
// STEP_GROUP_DONE steps). Only for forward nodes the function made.
void record_group_done(Recorder& r, Node* node) {
    const BackwardPass* pass = engine_backward_pass();
    if (!pass || pass->group.node != node) return;
    Plan& plan = *r.plan;
    PlanGroup group;
    group.recorded_id = node->id;
    group.root_value = known_value(r, Tensor(pass->root, 0));
    for (int i = 0; i < node->outputs.size(); ++i) group.grad_outputs.push_back(known_value(r, pass->group.grad_outputs[i]));
    for (int i = 0; i < node->inputs.size(); ++i) group.grad_inputs.push_back(known_value(r, pass->group.grad_inputs[i]));
    group.where = node->where;
    group.before_step = static_cast<int>(plan_step_count(plan));
    plan_add_group(plan, group);
}

// Whether the last step recorded is the last before a backward group ended.
bool group_ended_after_last_step(const Plan& plan) {
    return plan_last_group_end(plan) == static_cast<int>(plan_step_count(plan));
}

void record_grad(Node* node, int output, const Tensor& grad, int64_t first_id, int64_t end_id);

void record_node(Node* node, HookEvent event, void*) {
    if (event == HOOK_GRAD_STORED) {   // a leaf's .grad (made before the recording, often)
        const GradStored& stored = engine_backward_pass()->stored;
        record_grad(node, stored.output, *stored.grad, stored.first_id, stored.end_id);
        return;
    }
    Recorder& r = *g_recorder;
    if (node->id < r.first_id) return;
    if (event == HOOK_GROUP_DONE) {
        record_group_done(r, node);
        return;
    }
    if (event != HOOK_AFTER) return;
    Plan& plan = *r.plan;
    ++plan.stats.recorded_nodes;
    if (node->custom()) {   // its own ops were recorded as they ran: replay those, not the Lua code
        record_custom_outputs(r, node);
        return;
    }
    const OpInfo& info = node->info();
    auto named = [node] { return "node #" + std::to_string(node->id) + " (" + node->name() + ", " + source_loc_str(node->where) + ")"; };
    if (info.flags & OPF_CUSTOM) {
        refuse(r, named() + " runs code outside the op table and recorded no ops of its own; a plan cannot replay it");
        return;
    }
    if (node->op == OP_tensor) {   // values from Lua: a constant, copied each call (it may be changed in place)
        const Value& made = node->outputs[0].value;
        Value copy = value_new(made.shape, made.dtype, made.device());
        value_copy_elements(copy, made);
        plan.constants.push_back(copy);
        int c = add_value(plan, VALUE_CONSTANT, static_cast<int>(plan.constants.size()) - 1, made.shape, made.dtype,
                          node->id, made.device());
        int v = add_value(plan, VALUE_STEP, -1, made.shape, made.dtype, node->id, made.device());
        PlanStep& s = add_step(plan, STEP_KERNEL, OP_clone, node->phase, node->where, node->id);
        s.inputs.push_back(c);
        s.outputs.push_back(v);
        r.value_of.set(node->id, 0, v);
        remember_storage(r, made, v);
        return;
    }

    PlanStep& s = add_step(plan, STEP_KERNEL, node->op, node->phase, node->where, node->id);
    if (node->phase == PHASE_BACKWARD) s.recorded_group = node->group;
    s.attrs = r.attrs->index_of(node->attrs());
    s.inputs.reserve(node->inputs.size());   // value_for adds values, never steps: `s` stays valid
    for (const Edge& e : node->inputs) s.inputs.push_back(value_for(r, e.id, e.output, e.value(), e.node()));
    s.outputs.reserve(node->outputs.size());
    for (int i = 0; i < node->outputs.size(); ++i) {
        const Value& value = node->outputs[i].value;
        int v = add_value(plan, VALUE_STEP, -1, value.shape, value.dtype, node->id,
                          value.storage ? value.device() : DEVICE_CPU);
        if (i == 0 && (info.flags & (OPF_VIEW | OPF_INPLACE))) plan.values[v].alias_of = s.inputs[0];
        s.outputs.push_back(v);
        r.value_of.set(node->id, i, v);
        remember_storage(r, value, v);
    }
}

// The grad target for a leaf from outside (a captured tensor or an argument), made on first use.
int target_for(Recorder& r, Node* leaf, int output) {
    uint64_t key = value_key(leaf->id, output);
    auto found = r.target_of.find(key);
    if (found != r.target_of.end()) return found->second;
    Plan& plan = *r.plan;
    GradTarget t;
    t.output = output;
    auto input = std::find(r.input_keys.begin(), r.input_keys.end(), key);
    if (input != r.input_keys.end()) {
        t.kind = VALUE_INPUT;
        t.index = static_cast<int>(input - r.input_keys.begin());
    } else {
        int v = value_for(r, leaf->id, output, leaf->outputs[output].value, leaf);
        if (plan.values[v].kind != VALUE_CAPTURED) {
            refuse(r, "the .grad of tensor #" + std::to_string(leaf->id) + " is used in a way a plan cannot replay");
            return -1;
        }
        t.kind = VALUE_CAPTURED;
        t.index = plan.values[v].index;
    }
    const Value& value = leaf->outputs[output].value;
    int index = static_cast<int>(plan.grad_targets.size());
    t.grad_value = add_value(plan, VALUE_GRAD, index, value.shape, value.dtype, leaf->id);
    plan.grad_targets.push_back(t);
    r.target_state_known.push_back(false);
    r.target_of[key] = index;
    return index;
}

bool made_by_recording(const Recorder& r, const Node* node) { return node->id >= r.first_id; }

// backward() stored a gradient: for a leaf from outside, the add_ (or clone) it recorded becomes one
// accumulation step, which at run time adds into .grad or creates it, whatever its state then.
void record_grad(Node* node, int output, const Tensor& grad, int64_t first_id, int64_t end_id) {
    Recorder& r = *g_recorder;
    if (made_by_recording(r, node)) return;   // a fresh node each call: its recorded steps are right as they are
    Plan& plan = *r.plan;
    while (!plan.steps.empty() && plan.steps.back().recorded_id >= first_id && plan.steps.back().recorded_id < end_id &&
           plan.steps.back().kind == STEP_KERNEL && !group_ended_after_last_step(plan))
        plan.steps.pop_back();
    int t = target_for(r, node, output);
    if (t < 0) return;
    int v = value_for_tensor(r, grad);
    if (plan.values[v].dtype != plan.values[plan.grad_targets[t].grad_value].dtype) {
        refuse(r, "a gradient of tensor #" + std::to_string(node->id) + " has another dtype than the tensor");
        return;
    }
    PlanStep& s = add_step(plan, STEP_GRAD_ACCUMULATE, OP_add_, PHASE_BACKWARD, grad.node->where, grad.node->id);
    s.recorded_group = node->id;   // as in eager: the leaf's visit adds into its .grad
    s.target = t;
    s.inputs.push_back(v);
    r.target_state_known[t] = true;
    const Tensor& stored = node->outputs[output].grad;
    if (stored.defined()) r.value_of.set(stored.node->id, stored.output, plan.grad_targets[t].grad_value);
}

void add_guard_step(Plan& plan, PlanGuard guard) {
    plan.guards.push_back(guard);
    PlanStep& s = add_step(plan, STEP_GUARD, OP_clone, PHASE_FORWARD, guard.where, 0);
    s.target = static_cast<int>(plan.guards.size()) - 1;
    s.inputs.push_back(guard.value);
    if (guard.other_value >= 0) s.inputs.push_back(guard.other_value);
}

}  // namespace

void plan_record_begin(const std::string& name, const std::vector<Tensor>& inputs,
                       const std::vector<std::string>& input_names, SourceLoc where) {
    if (g_recorder) engine_fail("freeze: already recording a function (one at a time)");
    auto r = std::make_unique<Recorder>();
    r->plan = std::make_unique<Plan>();
    Plan& plan = *r->plan;
    plan.name = name;
    plan.where = where;
    plan.grad_mode = grad_enabled();
    r->first_id = tape_next_id();
    r->value_of.start_at(r->first_id);
    r->latest_by_storage.start_at(storage_next_serial());
    for (size_t k = 0; k < inputs.size(); ++k) {
        const Tensor& t = inputs[k];
        PlanInput in;
        in.name = k < input_names.size() ? input_names[k] : "argument " + std::to_string(k + 1);
        in.shape = t.shape();
        in.dtype = t.dtype();
        in.device = t.value().device();
        in.requires_grad = t.requires_grad();
        in.contiguous = t.value().is_contiguous();
        if (t.requires_grad() && !t.node->is_leaf())
            engine_fail("freeze: %s (argument %zu) is part of a graph (it requires grad and is not a leaf); detach it, "
                        "or freeze the code that made it too",
                        in.name.c_str(), k + 1);
        plan.inputs.push_back(in);
        int v = add_value(plan, VALUE_INPUT, static_cast<int>(k), t.shape(), t.dtype(), t.id(), t.value().device());
        uint64_t key = value_key(t.node->id, t.output);
        r->value_of.set(t.node->id, t.output, v);
        r->input_keys.push_back(key);
        remember_storage(*r, t.value(), v);
    }
    r->live_at_begin = storage_bytes_live();
    storage_peak_reset();
    r->attrs = std::make_unique<PlanAttrsTable>(plan);
    g_recorder = r.release();
    g_recorder->observer = engine_observe(record_node, nullptr,
                                          hook_bit(HOOK_AFTER) | hook_bit(HOOK_GROUP_DONE) | hook_bit(HOOK_GRAD_STORED),
                                          OBSERVER_RECORDS);
}

bool plan_recording() { return g_recorder != nullptr; }

void plan_record_note_values(const Tensor& t, SourceLoc where, const std::string& text) {
    if (!g_recorder || !t.defined()) return;
    PlanGuard g;
    g.kind = GUARD_VALUES;
    g.value = value_for_tensor(*g_recorder, t);
    Value host = value_to_host(t.value());
    for (int64_t i = 0; i < host.numel(); ++i) g.expected.push_back(value_get(host, i));
    g.where = where;
    g.text = text;
    add_guard_step(*g_recorder->plan, g);
}

void plan_record_note_compare(const Tensor& t, CompareOp op, bool swapped, const Tensor* other, double other_number,
                              bool truth, SourceLoc where, const std::string& text) {
    if (!g_recorder || !t.defined()) return;
    PlanGuard g;
    g.kind = GUARD_COMPARE;
    g.value = value_for_tensor(*g_recorder, t);
    g.compare = op;
    g.swapped = swapped;
    if (other && other->defined()) g.other_value = value_for_tensor(*g_recorder, *other);
    g.other_number = other_number;
    g.truth = truth;
    g.where = where;
    g.text = text;
    add_guard_step(*g_recorder->plan, g);
}

void plan_record_note_grad_read(const Tensor& leaf, const Tensor& grad, SourceLoc where) {
    if (!g_recorder || !leaf.defined()) return;
    Recorder& r = *g_recorder;
    if (made_by_recording(r, leaf.node.get())) return;
    int t = target_for(r, leaf.node.get(), leaf.output);
    if (t < 0) return;
    if (!r.target_state_known[t]) {   // the state it had when the call began: checked before running
        PlanGuard g;
        g.kind = GUARD_GRAD_STATE;
        g.target = t;
        g.defined = grad.defined();
        g.where = where;
        g.text = "grad";
        r.plan->guards.push_back(g);
        r.target_state_known[t] = true;
    }
    if (grad.defined()) r.value_of.set(grad.node->id, grad.output, r.plan->grad_targets[t].grad_value);
}

void plan_record_note_grad_clear(const Tensor& leaf, SourceLoc where) {
    if (!g_recorder || !leaf.defined()) return;
    Recorder& r = *g_recorder;
    if (made_by_recording(r, leaf.node.get())) {
        refuse(r, "the function sets .grad = nil on tensor #" + std::to_string(leaf.id()) + " (" + source_loc_str(where) +
                      "), which it made itself; a plan can only clear the .grad of its arguments and captured tensors");
        return;
    }
    int t = target_for(r, leaf.node.get(), leaf.output);
    if (t < 0) return;
    PlanStep& s = add_step(*r.plan, STEP_GRAD_CLEAR, OP_zero_, PHASE_FORWARD, where, 0);
    s.target = t;
    r.target_state_known[t] = true;
}

void plan_record_refuse(const std::string& why) {
    if (g_recorder) refuse(*g_recorder, why);
}

namespace {

void record_stop() {
    engine_unobserve(g_recorder->observer);
}

// Drop captured tensors nothing reads any more (a gradient's old tensor, replaced by its target).
void prune_captured(Plan& plan) {
    std::vector<bool> used(plan.captured.size(), false);
    auto mark = [&](int v) {
        if (v >= 0 && plan.values[v].kind == VALUE_CAPTURED) used[plan.values[v].index] = true;
    };
    plan_visit_steps(plan, [&](const PlanStep& s) {
        for (int v : s.inputs) mark(v);
    });
    for (const PlanValue& v : plan.values)
        if (v.alias_of >= 0) mark(v.alias_of);
    for (const PlanOutput& o : plan.outputs) mark(o.value);
    for (const PlanGuard& g : plan.guards) {
        mark(g.value);
        mark(g.other_value);
    }
    for (const GradTarget& t : plan.grad_targets)
        if (t.kind == VALUE_CAPTURED) used[t.index] = true;
    std::vector<int> renumber(plan.captured.size(), -1);
    std::vector<PlanCaptured> kept;
    for (size_t i = 0; i < plan.captured.size(); ++i) {
        if (!used[i]) continue;
        renumber[i] = static_cast<int>(kept.size());
        kept.push_back(plan.captured[i]);
    }
    plan.captured = kept;
    for (PlanValue& v : plan.values)
        if (v.kind == VALUE_CAPTURED) v.index = renumber[v.index];
    for (GradTarget& t : plan.grad_targets)
        if (t.kind == VALUE_CAPTURED) t.index = renumber[t.index];
}

}  // namespace

std::unique_ptr<Plan> plan_record_end(const std::vector<Tensor>& outputs) {
    if (!g_recorder) engine_fail("freeze: not recording");
    std::unique_ptr<Recorder> r(g_recorder);
    for (const Tensor& t : outputs) {
        PlanOutput o;
        o.value = value_for_tensor(*r, t);
        const Tensor& grad = t.node->outputs[t.output].grad;
        if (grad.defined() && made_by_recording(*r, t.node.get())) o.grad_value = value_for_tensor(*r, grad);
        r->plan->outputs.push_back(o);
    }
    record_stop();
    g_recorder = nullptr;
    if (!r->refusal.empty()) engine_fail("freeze: %s", r->refusal.c_str());
    Plan& plan = *r->plan;
    size_t peak = storage_bytes_peak();
    plan.stats.eager_peak_bytes = peak > r->live_at_begin ? peak - r->live_at_begin : 0;
    plan.stats.record_seconds = seconds_since(r->began);
    prune_captured(plan);
    std::unique_ptr<Plan> recorded = std::move(r->plan);
    r.reset();   // the recorder's tables go now, not when the caller is done with the recording
    return recorded;
}

void plan_record_abort() {
    if (!g_recorder) return;
    record_stop();
    delete g_recorder;
    g_recorder = nullptr;
}

// ============================================================================================
// [SECTION] passes
//
// Steps stay in record order (a valid order, with every in-place write where the function made
// it); the passes remove steps, replace values, merge elementwise steps into the last of them and
// move guards up. What a root's bytes hold at a step is tracked as a version: the number of
// in-place writes to that root so far, so no pass reads a value across a write to it.

namespace {

// Removes the steps `drop` marks, in place (a new list per pass was a long loop's plan's worth of
// fresh memory each time).
void remove_plan_steps(Plan& plan, const std::vector<bool>& drop) {
    size_t kept = 0;
    for (size_t k = 0; k < plan.steps.size(); ++k) {
        if (drop[k]) continue;
        if (kept != k) plan.steps[kept] = std::move(plan.steps[k]);
        ++kept;
    }
    plan.steps.erase(plan.steps.begin() + static_cast<long>(kept), plan.steps.end());
}

struct PassState {
    Plan& plan;
    explicit PassState(Plan& p) : plan(p) {}

    // roots[v]: value_roots as the pass began (a pass that changes alias_of updates it).
    std::vector<int> roots = value_roots(plan);
    int root(int v) const { return roots[v]; }
    int written_root(const PlanStep& s) const { return step_written_root(plan, roots, s); }

    // uses[v]: the steps (and outputs, guards) that read value v, counted.
    std::vector<int> use_counts() const {
        std::vector<int> uses(plan.values.size(), 0);
        for (const PlanStep& s : plan.steps)
            for (int v : s.inputs) ++uses[v];
        for (const PlanValue& v : plan.values)
            if (v.alias_of >= 0) ++uses[v.alias_of];
        for (const PlanOutput& o : plan.outputs) {
            ++uses[o.value];
            if (o.grad_value >= 0) ++uses[o.grad_value];
        }
        return uses;
    }

    // written[r]: some step writes root r in place.
    std::vector<bool> written_roots() const {
        std::vector<bool> written(plan.values.size(), false);
        for (const PlanStep& s : plan.steps) {
            int w = written_root(s);
            if (w >= 0) written[w] = true;
        }
        return written;
    }

    // returned[r]: root r is returned (an output, or an output's gradient).
    std::vector<bool> returned_roots() const {
        std::vector<bool> returned(plan.values.size(), false);
        for (const PlanOutput& o : plan.outputs) {
            returned[root(o.value)] = true;
            if (o.grad_value >= 0) returned[root(o.grad_value)] = true;
        }
        return returned;
    }

    std::vector<int> producers() const {   // the step that makes each value, -1 for none
        std::vector<int> made_by(plan.values.size(), -1);
        for (size_t k = 0; k < plan.steps.size(); ++k)
            for (int v : plan.steps[k].outputs) made_by[v] = static_cast<int>(k);
        return made_by;
    }

    void remove_steps(const std::vector<bool>& drop) { remove_plan_steps(plan, drop); }
};

// Dead-node elimination over `steps` (plan.steps, or a recording's unpacked), backwards: a step
// stays when it has an effect outside the plan, or when a later step, an output or a guard needs
// what it makes (or writes in place). Returns the steps to drop and adds their count to *dead.
// Group steps (STEP_GROUP_DONE) read and make nothing: they are left to the caller.
std::vector<bool> dead_steps(const Plan& plan, const BigVector<PlanStep>& steps, int* dead, PlanPassLog* log = nullptr,
                              PlanLogReason why = LOG_DEAD_UNREAD) {
    std::vector<int> roots = value_roots(plan);
    std::vector<bool> needed(plan.values.size(), false);
    for (const PlanOutput& o : plan.outputs) {
        needed[roots[o.value]] = true;
        if (o.grad_value >= 0) needed[roots[o.grad_value]] = true;
    }
    std::vector<bool> drop(steps.size(), false);
    size_t logged_before = log ? log->passes[LOG_DCE].size() : 0;
    for (int k = static_cast<int>(steps.size()) - 1; k >= 0; --k) {
        const PlanStep& s = steps[k];
        if (s.kind == STEP_GROUP_DONE) continue;
        int written = step_written_root(plan, roots, s);
        bool live = step_is_effect(plan, roots, s) || (written >= 0 && needed[written]);
        for (int v : s.outputs) live = live || needed[roots[v]];
        if (!live) {
            drop[k] = true;
            ++*dead;
            if (log) {
                PlanLogEntry e;
                e.step = plan_log_step(s);
                e.reason = why;
                log->passes[LOG_DCE].push_back(std::move(e));
            }
            continue;
        }
        for (int v : s.outputs)
            if (plan.values[v].alias_of < 0) needed[v] = false;   // made here: not needed before
        for (int v : s.inputs) needed[roots[v]] = true;
        if (s.kind == STEP_GRAD_ACCUMULATE || s.into_grad >= 0) needed[written] = true;
    }
    if (log)   // in record order, as the other passes log
        std::reverse(log->passes[LOG_DCE].begin() + static_cast<long>(logged_before), log->passes[LOG_DCE].end());
    return drop;
}

void pass_dead_nodes(Plan& plan, PlanPassLog* log) {
    remove_plan_steps(plan, dead_steps(plan, plan.steps, &plan.stats.dead, log, LOG_DEAD_AFTER));
}

// Common subexpressions: a kernel step with the same op, attributes and inputs (at the same
// versions) as an earlier one is dropped and its outputs replaced by the earlier step's. Not when
// either result is written in place later, or returned: in eager they are two tensors, and a
// write into one (now, or by the caller) must not show in the other.
void pass_common_subexpressions(Plan& plan, PlanPassLog* log) {
    PassState p(plan);
    std::vector<bool> written = p.written_roots(), returned = p.returned_roots();
    std::vector<int> replace(plan.values.size());
    for (size_t v = 0; v < replace.size(); ++v) replace[v] = static_cast<int>(v);
    std::vector<uint32_t> version(plan.values.size(), 0);
    // The candidate steps seen so far, by a hash of (op, attributes, inputs, their versions): a step
    // is compared with the steps that may match it, not with every step before it (that made freeze
    // quadratic on long loops). A table of buckets, each a chain through `Seen::next`, all in flat
    // lists (no allocation per step); the versions of a seen step's inputs are in one flat list.
    struct Seen {
        int step;
        size_t versions_at;   // its inputs' versions: seen_versions[versions_at ..], one per input
        int next;             // the next seen step in the same bucket, -1 at the end
    };
    std::vector<Seen> seen;
    std::vector<uint32_t> seen_versions;
    size_t n_buckets = 1024;
    while (n_buckets < plan.steps.size()) n_buckets *= 2;
    std::vector<int> bucket_first(n_buckets, -1);   // hash & (n_buckets - 1) -> a seen index, -1 none
    std::vector<uint32_t> versions;
    auto hash_of = [](const PlanStep& step, const std::vector<uint32_t>& versions) {
        size_t h = std::hash<int>()(static_cast<int>(step.op));
        h = h * 1000003u ^ std::hash<int>()(step.attrs);   // equal attributes share their entry
        for (int v : step.inputs) h = h * 1000003u ^ std::hash<int>()(v);
        for (uint32_t v : versions) h = h * 1000003u ^ std::hash<uint32_t>()(v);
        return h;
    };
    std::vector<bool> drop(plan.steps.size(), false);
    for (size_t k = 0; k < plan.steps.size(); ++k) {
        PlanStep& s = plan.steps[k];
        for (int& v : s.inputs) v = replace[v];
        bool candidate = s.kind == STEP_KERNEL && !is_random(s.op) && !(op_info(s.op).flags & (OPF_INPLACE | OPF_CUSTOM)) &&
                         s.into_grad < 0;
        for (int v : s.outputs) candidate = candidate && !written[v] && !returned[v];
        if (candidate) {
            versions.clear();
            for (int v : s.inputs) versions.push_back(version[p.root(v)]);
            size_t hash = hash_of(s, versions);
            const Seen* match = nullptr;   // the earliest step that computes the same
            size_t bucket = hash & (n_buckets - 1);
            for (int at = bucket_first[bucket]; at >= 0; at = seen[at].next) {
                const Seen& e = seen[at];
                const PlanStep& o = plan.steps[e.step];
                if (o.op == s.op && o.inputs == s.inputs && o.outputs.size() == s.outputs.size() && o.attrs == s.attrs &&
                    std::equal(versions.begin(), versions.end(), seen_versions.begin() + static_cast<long>(e.versions_at)) &&
                    (!match || e.step < match->step))
                    match = &e;
            }
            if (match) {
                const PlanStep& o = plan.steps[match->step];
                for (size_t i = 0; i < s.outputs.size(); ++i) replace[s.outputs[i]] = o.outputs[i];
                drop[k] = true;
                ++plan.stats.common;
                if (log) {
                    PlanLogEntry e;
                    e.step = plan_log_step(s);
                    e.other = plan_log_step(o);
                    log->passes[LOG_CSE].push_back(std::move(e));
                }
                continue;
            }
            seen.push_back({static_cast<int>(k), seen_versions.size(), bucket_first[bucket]});
            bucket_first[bucket] = static_cast<int>(seen.size()) - 1;
            seen_versions.insert(seen_versions.end(), versions.begin(), versions.end());
        }
        int written = p.written_root(s);
        if (written >= 0) ++version[written];
    }
    for (PlanValue& v : plan.values)
        if (v.alias_of >= 0) v.alias_of = replace[v.alias_of];
    for (PlanOutput& o : plan.outputs) {
        o.value = replace[o.value];
        if (o.grad_value >= 0) o.grad_value = replace[o.grad_value];
    }
    for (PlanGuard& g : plan.guards) {
        if (g.value >= 0) g.value = replace[g.value];
        if (g.other_value >= 0) g.other_value = replace[g.other_value];
    }
    p.remove_steps(drop);
}

// Constant folding: a kernel step whose inputs are all constants (and is not random, not in
// place, and makes bytes nothing writes later) runs now; its outputs become constants. Captured
// tensors are not constants: they may be updated in place between calls.
void pass_constant_folding(Plan& plan, PlanPassLog* log) {
    PassState p(plan);
    std::vector<bool> written = p.written_roots();
    std::vector<bool> drop(plan.steps.size(), false);
    for (size_t k = 0; k < plan.steps.size(); ++k) {
        PlanStep& s = plan.steps[k];
        const OpInfo& info = op_info(s.op);
        if (s.kind != STEP_KERNEL || is_random(s.op) || (info.flags & (OPF_INPLACE | OPF_CUSTOM)) || s.into_grad >= 0)
            continue;
        bool foldable = true;
        for (int v : s.inputs) foldable = foldable && plan.values[v].kind == VALUE_CONSTANT;
        for (int v : s.outputs) foldable = foldable && !written[p.root(v)];
        if (!foldable) continue;
        std::vector<const Value*> inputs;
        for (int v : s.inputs) inputs.push_back(&plan.constants[plan.values[v].index]);
        std::vector<Value> outputs(s.outputs.size());
        for (size_t i = 0; i < s.outputs.size(); ++i) {
            const PlanValue& pv = plan.values[s.outputs[i]];
            if (i == 0 && (info.flags & OPF_VIEW)) {
                outputs[i] = *inputs[0];
                outputs[i].shape = pv.shape;
                outputs[i].dtype = pv.dtype;
            } else {
                outputs[i] = value_new(pv.shape, pv.dtype, pv.device);
            }
        }
        std::vector<Value*> output_pointers;
        for (Value& v : outputs) output_pointers.push_back(&v);
        KernelCall call{inputs.data(), static_cast<int>(inputs.size()), output_pointers.data(),
                        static_cast<int>(outputs.size()), plan_step_attrs(plan, s)};
        kernel_run(s.op, call);
        for (size_t i = 0; i < s.outputs.size(); ++i) {
            PlanValue& pv = plan.values[s.outputs[i]];
            plan.constants.push_back(value_contiguous(outputs[i]));   // a folded view owns its bytes
            pv.kind = VALUE_CONSTANT;
            pv.index = static_cast<int>(plan.constants.size()) - 1;
            pv.alias_of = -1;
        }
        drop[k] = true;
        ++plan.stats.folded;
        if (log) {
            PlanLogEntry e;
            e.step = plan_log_step(s);
            log->passes[LOG_FOLD].push_back(std::move(e));
        }
    }
    p.remove_steps(drop);
}

// How input value `in` of a fused step broadcasts to the result's shape, or -1 when it cannot.
int fused_input_mode(const PlanValue& in, const PlanValue& result) {
    if (in.shape == result.shape) return FUSED_FULL;
    if (in.shape.numel() == 1) return FUSED_SCALAR;
    const Shape& a = in.shape;
    const Shape& r = result.shape;
    int first = 0;
    while (first < a.ndim && a.dims[first] == 1) ++first;   // leading 1s broadcast
    int n = a.ndim - first;
    if (n > r.ndim) return -1;
    for (int i = 0; i < n; ++i)
        if (a.dims[first + i] != r.dims[r.ndim - n + i]) return -1;
    return FUSED_ROW;
}

// Whether step s can be part of a fused group: an elementwise op on float values whose inputs
// broadcast to its result in a way the fused loop reads.
bool fusable(const Plan& plan, const PlanStep& s) {
    if (s.kind != STEP_KERNEL || s.into_grad >= 0 || !elementwise_math(s.op)) return false;
    const PlanValue& out = plan.values[s.outputs[0]];
    if (s.outputs.size() != 1 || out.alias_of >= 0 || !dtype_is_float(out.dtype)) return false;
    if (static_cast<int>(s.inputs.size()) != elementwise_math(s.op)->arity) return false;
    for (int v : s.inputs)
        if (plan.values[v].dtype != out.dtype || fused_input_mode(plan.values[v], out) < 0) return false;
    return true;
}

constexpr int MAX_FUSED_OPS = 16;
constexpr int MAX_FUSED_INPUTS = 8;

// Elementwise fusion: a fusable step joins the group of an input's maker when that input is the
// maker's full-shape result, read by nothing else, and nothing writes the group's inputs in
// between. A group of two or more ops becomes one STEP_FUSED where its last op was.
void pass_fusion(Plan& plan, PlanPassLog* log) {
    PassState p(plan);
    std::vector<int> uses = p.use_counts();
    std::vector<bool> guarded(plan.values.size(), false);
    for (const PlanGuard& g : plan.guards) {
        if (g.value >= 0) guarded[g.value] = true;
        if (g.other_value >= 0) guarded[g.other_value] = true;
    }
    std::vector<int> made_by = p.producers();
    std::vector<int> group_of(plan.steps.size(), -1);      // group id = index of its last step
    std::vector<std::vector<int>> members(plan.steps.size());
    // write_steps[r]: the steps that write root r in place, ascending; writes_before(r, k) counts
    // those before step k (a table of counts per step would cost steps x values: a long unrolled
    // loop made freeze quadratic in time and memory).
    std::vector<std::vector<int>> write_steps(plan.values.size());
    for (size_t k = 0; k < plan.steps.size(); ++k) {
        int w = p.written_root(plan.steps[k]);
        if (w >= 0) write_steps[w].push_back(static_cast<int>(k));
    }
    auto writes_before = [&](int r, int k) {
        const std::vector<int>& at = write_steps[r];
        return std::lower_bound(at.begin(), at.end(), k) - at.begin();
    };
    auto group_inputs = [&](const std::vector<int>& group) {
        std::vector<int> inputs;
        for (int k : group)
            for (int v : plan.steps[k].inputs) {
                int maker = made_by[v];
                bool internal = maker >= 0 && std::find(group.begin(), group.end(), maker) != group.end();
                if (!internal && std::find(inputs.begin(), inputs.end(), v) == inputs.end()) inputs.push_back(v);
            }
        return inputs;
    };
    for (size_t k = 0; k < plan.steps.size(); ++k) {
        const PlanStep& s = plan.steps[k];
        if (!fusable(plan, s)) continue;
        std::vector<int> group{static_cast<int>(k)};
        for (int v : s.inputs) {
            int maker = made_by[v];
            if (maker < 0 || group_of[maker] < 0 || uses[v] != 1 || guarded[v]) continue;
            const PlanValue& value = plan.values[v];
            if (value.shape != plan.values[s.outputs[0]].shape || value.dtype != plan.values[s.outputs[0]].dtype) continue;
            std::vector<int>& other = members[group_of[maker]];
            if (std::find(group.begin(), group.end(), other.front()) != group.end()) continue;   // already joined
            std::vector<int> merged = group;
            merged.insert(merged.end(), other.begin(), other.end());
            if (static_cast<int>(merged.size()) > MAX_FUSED_OPS) continue;
            std::vector<int> inputs = group_inputs(merged);
            if (static_cast<int>(inputs.size()) > MAX_FUSED_INPUTS) continue;
            bool unchanged = true;   // the moved ops' inputs are not written between them and here
            for (int in : inputs) {
                int r = p.root(in);
                for (int m : other) unchanged = unchanged && writes_before(r, m) == writes_before(r, static_cast<int>(k));
            }
            if (!unchanged) continue;
            group = merged;
        }
        std::sort(group.begin(), group.end());
        for (int m : group) group_of[m] = static_cast<int>(k);
        members[k] = group;
    }
    std::vector<bool> drop(plan.steps.size(), false);
    for (size_t k = 0; k < plan.steps.size(); ++k) {
        const std::vector<int>& group = members[k];
        if (group.size() < 2 || group_of[k] != static_cast<int>(k)) continue;
        PlanStep fused;
        fused.kind = STEP_FUSED;
        fused.op = plan.steps[k].op;
        fused.phase = plan.steps[k].phase;
        fused.where = plan.steps[k].where;
        fused.recorded_id = plan.steps[k].recorded_id;
        fused.recorded_group = plan.steps[k].recorded_group;
        fused.inputs = group_inputs(group);
        fused.outputs = plan.steps[k].outputs;
        const PlanValue& result = plan.values[fused.outputs[0]];
        for (int v : fused.inputs) fused.fused.add_input_mode(static_cast<FusedInputMode>(fused_input_mode(plan.values[v], result)));
        int n_inputs = static_cast<int>(fused.inputs.size());
        for (size_t i = 0; i < group.size(); ++i) {
            const PlanStep& m = plan.steps[group[i]];
            FusedOp op;
            op.op = m.op;
            op.attrs = m.attrs;
            op.recorded_id = m.recorded_id;
            op.recorded_group = m.recorded_group;
            op.where = m.where;
            for (size_t j = 0; j < m.inputs.size(); ++j) {
                int v = m.inputs[j];
                int maker = made_by[v];
                auto at = std::find(group.begin(), group.end(), maker);
                if (maker >= 0 && at != group.end()) op.operands[j] = n_inputs + static_cast<int>(at - group.begin());
                else op.operands[j] = static_cast<int>(std::find(fused.inputs.begin(), fused.inputs.end(), v) - fused.inputs.begin());
            }
            fused.fused.push_back(op);
            if (group[i] != static_cast<int>(k)) drop[group[i]] = true;
        }
        plan.stats.fused_ops += static_cast<int>(group.size());
        ++plan.stats.fused_groups;
        if (log) {
            PlanLogEntry e;
            e.step = plan_log_step(plan.steps[k]);
            for (int m : group) e.ops.push_back(plan_log_step(plan.steps[m]));
            log->passes[LOG_FUSE].push_back(std::move(e));
        }
        plan.steps[k] = fused;
    }
    p.remove_steps(drop);
}

// Gradients in place: an mm/bmm whose result only feeds a gradient accumulation writes straight
// into the target's .grad (Y += A B when it exists), so the gradient never has a buffer of its own.
// Likewise one whose result only feeds an add_ into a sum the plan holds in a buffer of its own
// (backward sums a weight's gradients over an RNN's steps that way) adds into that buffer.

// Whether no step from the product `from` (it must not read r either: it will write r) up to `to`
// (excluded) reads or writes root r.
bool root_untouched_between(const Plan& plan, const PassState& p, size_t from, size_t to, int r) {
    for (size_t j = from; j < to; ++j) {
        const PlanStep& s = plan.steps[j];
        for (int in : s.inputs)
            if (p.root(in) == r) return false;
        if (p.written_root(s) == r) return false;
    }
    return true;
}

// Whether value v has its root's bytes as they are (the root itself, or in-place results of it;
// not a view, which could see them in another layout).
bool has_root_layout(const Plan& plan, const std::vector<int>& made_by, int v) {
    while (plan.values[v].alias_of >= 0) {
        int maker = made_by[v];
        if (maker < 0 || plan.steps[maker].kind != STEP_KERNEL || !(op_info(plan.steps[maker].op).flags & OPF_INPLACE))
            return false;
        v = plan.values[v].alias_of;
    }
    return true;
}

// The mm/bmm step that makes v, when v is read by nothing but the step that adds it somewhere; else -1.
int product_read_once(const Plan& plan, const std::vector<int>& uses, const std::vector<int>& made_by, int v) {
    int maker = made_by[v];
    if (maker < 0 || uses[v] != 1 || plan.values[v].alias_of >= 0) return -1;
    const PlanStep& m = plan.steps[maker];
    if (m.kind != STEP_KERNEL || (m.op != OP_mm && m.op != OP_bmm) || m.into_grad >= 0 || plan_step_attrs(plan, m).accumulate)
        return -1;
    return maker;
}

void pass_gradients_in_place(Plan& plan, PlanPassLog* log) {
    PassState p(plan);
    PlanAttrsTable attrs(plan);
    std::vector<int> uses = p.use_counts();
    std::vector<int> made_by = p.producers();
    std::vector<bool> drop(plan.steps.size(), false);
    for (size_t k = 0; k < plan.steps.size(); ++k) {
        const PlanStep& a = plan.steps[k];
        int maker = -1;
        if (a.kind == STEP_GRAD_ACCUMULATE) {
            maker = product_read_once(plan, uses, made_by, a.inputs[0]);
            if (maker < 0 || !root_untouched_between(plan, p, maker, k, plan.grad_targets[a.target].grad_value)) continue;
            plan.steps[maker].into_grad = a.target;
        } else if (a.kind == STEP_KERNEL && a.op == OP_add_ && a.inputs.size() == 2) {
            int sum = a.inputs[0], product = a.inputs[1];
            maker = product_read_once(plan, uses, made_by, product);
            int r = p.root(sum);
            if (maker < 0 || plan.values[r].kind != VALUE_STEP || uses[a.outputs[0]] != 0 ||
                plan.values[r].shape != plan.values[product].shape || plan.values[r].dtype != plan.values[product].dtype ||
                !has_root_layout(plan, made_by, sum) || !root_untouched_between(plan, p, maker, k, r))
                continue;
            OpAttrs accumulating = plan_step_attrs(plan, plan.steps[maker]);
            accumulating.accumulate = true;
            plan.steps[maker].attrs = attrs.index_of(accumulating);
            plan.values[product].alias_of = sum;
            p.roots[product] = r;   // nothing else aliases the product (it is read once)
        } else {
            continue;
        }
        drop[k] = true;
        ++plan.stats.grads_in_place;
        if (log) {
            PlanLogEntry e;
            e.step = plan_log_step(plan.steps[maker]);
            e.other = plan_log_step(a);
            e.reason = a.kind == STEP_GRAD_ACCUMULATE ? LOG_INTO_GRAD : LOG_INTO_SUM;
            e.value = a.kind == STEP_GRAD_ACCUMULATE ? plan.grad_targets[a.target].grad_value : a.inputs[0];
            log->passes[LOG_INPLACE].push_back(std::move(e));
        }
    }
    p.remove_steps(drop);
}

// Guards move up to right after the step that makes (or last writes) what they read, so that they
// are checked before the plan changes anything outside it whenever the data allow; each stays
// after the guards before it. O(steps): the last step touching each root is kept as steps pass.
void pass_hoist_guards(Plan& plan) {
    auto is_guard = [](const PlanStep& s) { return s.kind == STEP_GUARD; };
    if (std::none_of(plan.steps.begin(), plan.steps.end(), is_guard)) return;
    PassState p(plan);
    std::vector<int> kept;                                // the steps that are not guards, in order
    std::vector<std::vector<int>> guards_after;           // kept index + 1 -> the guards placed after it (0: first)
    std::vector<int> last_touch(plan.values.size(), -1);  // root -> kept index of the last step making or writing it
    int anchor = -1;                                      // where the previous guard went
    guards_after.emplace_back();
    for (size_t k = 0; k < plan.steps.size(); ++k) {
        const PlanStep& s = plan.steps[k];
        if (s.kind == STEP_GUARD) {
            for (int in : s.inputs) anchor = std::max(anchor, last_touch[p.root(in)]);
            guards_after[static_cast<size_t>(anchor + 1)].push_back(static_cast<int>(k));
            continue;
        }
        int at = static_cast<int>(kept.size());
        kept.push_back(static_cast<int>(k));
        guards_after.emplace_back();
        for (int out : s.outputs) last_touch[p.root(out)] = at;
        int written = p.written_root(s);
        if (written >= 0) last_touch[written] = at;
    }
    BigVector<PlanStep> steps;
    steps.reserve(plan.steps.size());
    for (int g : guards_after[0]) steps.push_back(std::move(plan.steps[g]));
    for (size_t i = 0; i < kept.size(); ++i) {
        steps.push_back(std::move(plan.steps[kept[i]]));
        for (int g : guards_after[i + 1]) steps.push_back(std::move(plan.steps[g]));
    }
    plan.steps = std::move(steps);
}

bool step_is_elementwise_over(const Plan& plan, const PlanStep& s, size_t input) {
    if (s.kind == STEP_FUSED) return s.fused.input_mode(input) == FUSED_FULL;
    if (s.kind != STEP_KERNEL || !elementwise_math(s.op) || s.into_grad >= 0) return false;
    return plan.values[s.inputs[input]].shape == plan.values[s.outputs[0]].shape;
}

// Buffers: each value made by a step gets bytes, shared with its views and in-place outputs.
// Returned values get new bytes every call; gradients written in place use the .grad's. With
// reuse, a buffer whose values are all dead is given to the next value that fits (best fit);
// with in-place, an elementwise step may write over an input that dies at that step.
void pass_buffers(Plan& plan, bool reuse, bool inplace, PlanPassLog* log) {
    PassState p(plan);
    size_t n = plan.values.size();
    plan.value_buffer.assign(n, -1);
    plan.value_per_call.assign(n, false);
    plan.buffer_bytes.clear();
    std::vector<bool> into_grad_output(n, false);
    for (const PlanStep& s : plan.steps)
        if (s.kind == STEP_KERNEL && s.into_grad >= 0) into_grad_output[s.outputs[0]] = true;
    for (size_t v = 0; v < n; ++v)   // off the plan's device: new bytes each call, on its own device
        if (plan.values[v].kind == VALUE_STEP && plan.values[v].alias_of < 0 && plan.values[v].device != plan.device)
            plan.value_per_call[v] = true;
    for (const PlanOutput& o : plan.outputs) {
        int r = p.root(o.value);
        if (plan.values[r].kind == VALUE_STEP) plan.value_per_call[r] = true;
        if (o.grad_value >= 0 && plan.values[p.root(o.grad_value)].kind == VALUE_STEP)
            plan.value_per_call[p.root(o.grad_value)] = true;
    }
    std::vector<int> last_use(n, -1);
    for (size_t k = 0; k < plan.steps.size(); ++k) {
        const PlanStep& s = plan.steps[k];
        for (int v : s.inputs) last_use[p.root(v)] = static_cast<int>(k);
        for (int v : s.outputs) last_use[p.root(v)] = std::max(last_use[p.root(v)], static_cast<int>(k));
    }
    auto owns_buffer = [&](int r) {
        return plan.values[r].kind == VALUE_STEP && plan.values[r].alias_of < 0 && !plan.value_per_call[r] &&
               !into_grad_output[r];
    };
    // The roots each step reads or writes last: dying[dying_at[k] .. dying_at[k + 1]) for step k
    // (one flat list, not a list per step).
    std::vector<int> dying_at(plan.steps.size() + 1, 0), dying;
    for (size_t r = 0; r < n; ++r)
        if (last_use[r] >= 0) ++dying_at[static_cast<size_t>(last_use[r]) + 1];
    for (size_t k = 0; k < plan.steps.size(); ++k) dying_at[k + 1] += dying_at[k];
    dying.resize(static_cast<size_t>(dying_at.back()));
    std::vector<int> filled(dying_at.begin(), dying_at.end() - 1);
    for (size_t r = 0; r < n; ++r)
        if (last_use[r] >= 0) dying[static_cast<size_t>(filled[static_cast<size_t>(last_use[r])]++)] = static_cast<int>(r);
    std::multimap<size_t, int> free_buffers;   // bytes -> buffer, in the order they were freed
    std::vector<bool> handed_on(n, false);
    for (size_t k = 0; k < plan.steps.size(); ++k) {
        const PlanStep& s = plan.steps[k];
        for (int out : s.outputs) {
            if (!owns_buffer(out) || plan.value_buffer[out] >= 0) continue;
            size_t bytes = value_bytes(plan.values[out]);
            plan.stats.unshared_bytes += bytes;
            int chosen = -1;
            if (inplace && s.outputs.size() == 1) {
                for (size_t i = 0; i < s.inputs.size() && chosen < 0; ++i) {
                    int r = p.root(s.inputs[i]);
                    bool read_as_is = true;   // no input reads r through a view (a transpose would see the writes)
                    for (int other : s.inputs) read_as_is = read_as_is && (p.root(other) != r || other == r);
                    if (read_as_is && owns_buffer(r) && last_use[r] == static_cast<int>(k) && !handed_on[r] &&
                        value_bytes(plan.values[r]) == bytes && step_is_elementwise_over(plan, s, i)) {
                        chosen = plan.value_buffer[r];
                        handed_on[r] = true;
                        ++plan.stats.inplace;
                        if (log) {
                            PlanLogEntry e;
                            e.step = plan_log_step(s);
                            e.reason = LOG_OVER_INPUT;
                            e.value = s.inputs[i];
                            log->passes[LOG_INPLACE].push_back(std::move(e));
                        }
                    }
                }
            }
            if (chosen < 0 && reuse && !free_buffers.empty()) {
                // Best fit: the smallest free buffer that holds `bytes`, else the largest (grown);
                // among buffers of one size, the one freed first.
                auto best = free_buffers.lower_bound(bytes);
                if (best == free_buffers.end()) best = free_buffers.lower_bound(std::prev(free_buffers.end())->first);
                chosen = best->second;
                free_buffers.erase(best);
                plan.buffer_bytes[chosen] = std::max(plan.buffer_bytes[chosen], bytes);
            }
            if (chosen < 0) {
                chosen = static_cast<int>(plan.buffer_bytes.size());
                plan.buffer_bytes.push_back(bytes);
            }
            plan.value_buffer[out] = chosen;
        }
        for (int at = dying_at[k]; at < dying_at[k + 1]; ++at) {
            int r = dying[static_cast<size_t>(at)];
            if (plan.value_buffer[r] >= 0 && owns_buffer(r) && !handed_on[r])
                free_buffers.emplace(plan.buffer_bytes[plan.value_buffer[r]], plan.value_buffer[r]);
        }
    }
    for (size_t v = 0; v < n; ++v) {
        int r = p.root(static_cast<int>(v));
        if (plan.value_buffer[r] >= 0) plan.value_buffer[v] = plan.value_buffer[r];
        if (plan.value_per_call[r] && plan.values[v].alias_of < 0) plan.stats.per_call_bytes += value_bytes(plan.values[v]);
    }
    for (size_t k = 0; k < plan.steps.size(); ++k)   // gradients created when .grad is nil
        if (plan.steps[k].into_grad >= 0 || plan.steps[k].kind == STEP_GRAD_ACCUMULATE)
            plan.stats.per_call_bytes += value_bytes(plan.values[plan.grad_targets[plan.steps[k].into_grad >= 0 ? plan.steps[k].into_grad : plan.steps[k].target].grad_value]);
    plan.stats.buffers = static_cast<int>(plan.buffer_bytes.size());
    plan.stats.buffer_bytes = 0;
    for (size_t b : plan.buffer_bytes) plan.stats.buffer_bytes += b;
    if (log) {   // each buffer and the values that own it in turn, in the order they got it
        std::vector<PlanLogEntry>& entries = log->passes[LOG_REUSE];
        entries.assign(plan.buffer_bytes.size(), PlanLogEntry());
        for (size_t b = 0; b < entries.size(); ++b) {
            entries[b].buffer = static_cast<int>(b);
            entries[b].bytes = plan.buffer_bytes[b];
        }
        for (const PlanStep& s : plan.steps)
            for (int out : s.outputs)
                if (owns_buffer(out) && plan.value_buffer[out] >= 0) {
                    std::vector<int>& values = entries[static_cast<size_t>(plan.value_buffer[out])].values;
                    if (values.empty() || values.back() != out) values.push_back(out);
                }
        log->buffers = plan.stats.buffers;
        log->unshared_bytes = plan.stats.unshared_bytes;
        log->buffer_bytes = plan.stats.buffer_bytes;
    }
}

// `recorded` without its steps (compile_with copies those it keeps): every field of Plan but
// `steps` and `packed`, and but the run-time ones (exec, recording, debug_replay), which a
// compiled plan makes for itself; `groups` only with keep_groups (only the debug replay's steps
// announce groups), unpacked. A field added to Plan is added here.
std::unique_ptr<Plan> copy_without_steps(const Plan& recorded, bool keep_groups) {
    auto plan = std::make_unique<Plan>();
    plan->name = recorded.name;
    plan->where = recorded.where;
    plan->grad_mode = recorded.grad_mode;
    plan->inputs = recorded.inputs;
    plan->captured = recorded.captured;
    plan->constants = recorded.constants;
    plan->grad_targets = recorded.grad_targets;
    plan->values = recorded.values;
    plan->attrs = recorded.attrs;
    plan->guards = recorded.guards;
    plan->outputs = recorded.outputs;
    if (keep_groups) plan->groups = plan_unpacked_groups(recorded);
    plan->compiled = recorded.compiled;
    plan->passes = recorded.passes;
    plan->stats = recorded.stats;
    plan->value_buffer = recorded.value_buffer;
    plan->buffer_bytes = recorded.buffer_bytes;
    plan->value_per_call = recorded.value_per_call;
    plan->first_effect_step = recorded.first_effect_step;
    return plan;
}

// A STEP_GROUP_DONE step announcing plan.groups[group].
PlanStep group_done_step(const Plan& plan, int group) {
    const PlanGroup& g = plan.groups[group];
    PlanStep s;
    s.kind = STEP_GROUP_DONE;
    s.phase = PHASE_BACKWARD;
    s.where = g.where;
    s.recorded_id = s.recorded_group = g.recorded_id;
    s.target = group;
    return s;
}

// `recorded` with `passes` applied; with keep_groups (the debug replay), a STEP_GROUP_DONE step
// where each backward group ended. The first dead-node elimination runs on the recording, so
// dropped steps are not copied.
std::unique_ptr<Plan> compile_with(const Plan& recorded, const PlanPasses& passes, bool keep_groups,
                                   PlanPassLog* log = nullptr) {
    auto began = std::chrono::steady_clock::now();
    std::unique_ptr<Plan> plan = copy_without_steps(recorded, keep_groups);
    plan->passes = passes;
    PlanStats& st = plan->stats;
    st.dead = st.common = st.folded = st.fused_ops = st.fused_groups = st.inplace = st.grads_in_place = 0;
    st.unshared_bytes = st.per_call_bytes = 0;
    // The recording's steps (an unpacked copy when it is packed: PackedSteps); the dead ones are
    // not copied on.
    BigVector<PlanStep> unpacked;
    if (recorded.packed.count) unpacked = plan_unpacked_steps(recorded);
    const BigVector<PlanStep>& all = recorded.packed.count ? unpacked : recorded.steps;
    if (log) {
        *log = PlanPassLog();
        log->recorded_steps = all.size();
    }
    std::vector<bool> drop = passes.dce ? dead_steps(recorded, all, &st.dead, log) : std::vector<bool>(all.size(), false);
    size_t n_groups = keep_groups ? plan->groups.size() : 0;
    plan->steps.reserve(static_cast<size_t>(std::count(drop.begin(), drop.end(), false)) + n_groups);
    size_t group = 0;
    for (size_t k = 0; k <= drop.size(); ++k) {
        for (; group < n_groups && plan->groups[group].before_step <= static_cast<int>(k); ++group)
            plan->steps.push_back(group_done_step(*plan, static_cast<int>(group)));
        if (k < drop.size() && !drop[k]) plan->steps.push_back(all[k]);
    }
    BigVector<PlanStep>().swap(unpacked);   // before the passes run: a long loop's is tens of MB
    plan->device = DEVICE_CPU;
    for (const PlanValue& v : plan->values)
        if (v.kind == VALUE_STEP && v.device != DEVICE_CPU) plan->device = v.device;
    if (log) {
        log->ran[LOG_DCE] = passes.dce;
        log->ran[LOG_CSE] = passes.cse;
        log->ran[LOG_FOLD] = passes.fold;
        log->ran[LOG_FUSE] = passes.fuse && plan->device == DEVICE_CPU;
        log->on_gpu = plan->device != DEVICE_CPU;
        log->ran[LOG_INPLACE] = passes.inplace;
        log->ran[LOG_REUSE] = passes.reuse;
    }
    if (passes.cse) pass_common_subexpressions(*plan, log);
    if (passes.fold) pass_constant_folding(*plan, log);
    if (passes.dce && (passes.cse || passes.fold)) pass_dead_nodes(*plan, log);
    if (passes.inplace) pass_gradients_in_place(*plan, log);
    if (passes.fuse && plan->device == DEVICE_CPU) pass_fusion(*plan, log);   // fused loops are CPU code
    pass_hoist_guards(*plan);
    pass_buffers(*plan, passes.reuse, passes.inplace, log);
    if (log) log->steps = plan->steps.size();
    plan->first_effect_step = -1;
    std::vector<int> roots = value_roots(*plan);
    for (size_t k = 0; k < plan->steps.size() && plan->first_effect_step < 0; ++k) {
        const PlanStep& s = plan->steps[k];
        if (s.kind != STEP_GUARD && step_is_effect(*plan, roots, s)) plan->first_effect_step = static_cast<int>(k);
    }
    plan->compiled = true;
    st.compile_seconds = seconds_since(began);
    return plan;
}

}  // namespace

// The plan; its debug replay (the recording compiled with no pass, its group steps kept: plan.h)
// is compiled when an observed call first needs it, and its buffers allocated then.
std::unique_ptr<Plan> plan_compile(std::shared_ptr<const Plan> recorded, const PlanPasses& passes, PlanPassLog* log) {
    if (!recorded || recorded->compiled) engine_fail("freeze: plan_compile needs a recorded plan, not a compiled one");
    std::unique_ptr<Plan> plan = compile_with(*recorded, passes, false, log);
    plan->recording = std::move(recorded);
    return plan;
}

// ============================================================================================
// [SECTION] run
//
// The run-time state is built once: a Value per plan value (the plan's buffers, constants and
// captured tensors bound for good; arguments, .grad tensors and returned values bound per call)
// and, per step, its kernel's input and output pointers. A call binds, runs the steps in a loop
// and unbinds, so the plan never keeps a caller's tensor alive.

constexpr int64_t FUSED_CHUNK = 1024;   // elements per chunk of a fused loop (its registers stay in L1/L2)

// A step's prepared call. Its pointer lists lie in PlanExec's flat lists (three heap blocks a step
// cost a long loop's plan ~150 bytes a step), found by index: 32 bytes a step, where the pointers
// themselves took 48.
struct StepExec {
    uint32_t first_input = 0;                  // n_inputs slots from here in PlanExec::input_slots
    uint32_t first_output = 0;                 // n_outputs slots from here in PlanExec::output_slots
    uint32_t first_math = 0;                   // STEP_FUSED: per op, from here in PlanExec::fused_math
    uint16_t n_inputs = 0, n_outputs = 0;
    uint32_t fresh = 0;                        // bit i: output i gets new bytes each call (it is returned)
    bool rebind = false;                       // output 0 shares input 0's bytes, bound each call
    bool view = false;                         // an OPF_VIEW op: output 0 is a view of input 0
    bool contiguous_view_seen = false;         // view: a run on a contiguous input gave a contiguous
    int64_t contiguous_view_offset = 0;        // output this many elements on; again so for any
                                               // contiguous input (shapes and attrs are fixed)
    bool is_fresh(int i) const { return (fresh >> i) & 1u; }
};

// A step's call as the run loop uses it: StepExec's lists as pointers (PlanExec::step_call).
struct StepCall {
    StepExec& exec;
    const Value* const* inputs;
    Value* const* outputs;
    int n_inputs, n_outputs;
    const ElementwiseMath* const* math;
    bool is_fresh(int i) const { return exec.is_fresh(i); }
};

// A run of a GPU plan's steps [begin, end) that a CUDA graph replays with one launch, once the
// second unobserved call captured it. Its steps only touch bytes whose address stays from call to
// call (the plan's buffers, captured tensors, constants: not the arguments, nor new results, nor
// .grad tensors), and their kernels neither check data on the host nor copy from it
// (cuda_kernel_capturable). A launch first checks those addresses are still the captured ones;
// a capture that fails (a kernel that synchronises) leaves the run step by step for good.
struct GraphSegment {
    size_t begin = 0, end = 0;
    int calls = 0;                   // unobserved calls that ran it step by step so far
    bool refused = false;            // capturing failed: step by step from now on
    DeviceGraph* graph = nullptr;
    std::vector<std::pair<const Value*, const void*>> addresses;   // each slot it reads or writes, and where its bytes were
    std::vector<Storage*> written_in_place;   // in-place outputs: a launch bumps their versions as the steps would
};

struct PlanExec {
    // The run-time value of each plan value, in a slot: slots[slot_of[v]] (-1: no step, output or
    // guard reads or writes v). See assign_slots.
    std::vector<Value> slots;
    std::vector<int> slot_of;
    Value& slot(int v) { return slots[static_cast<size_t>(slot_of[v])]; }
    const Value& slot(int v) const { return slots[static_cast<size_t>(slot_of[v])]; }
    std::vector<Ref<Storage>> buffers;
    std::vector<StepExec> steps;
    std::vector<const Value*> input_slots;             // every step's inputs, in order (sized once)
    std::vector<Value*> output_slots;                  // every step's outputs
    std::vector<const ElementwiseMath*> fused_math;    // every fused step's ops
    std::vector<int> per_call_values;   // slots to unbind after a call
    std::vector<int> bound_values;      // slots bound at the start of a call: inputs, .grad tensors, captured
    // Fused registers (double-sized, so either dtype fits), 64-byte aligned as tensor storage is:
    // Eigen's loops compute the elements before the first aligned one on a scalar path, whose
    // exp, tanh, ... can differ by an ulp from the vector path. Aligned as eager's outputs are,
    // a fused step rounds as eager does, whatever the heap's layout (it varied from run to run).
    Ref<Storage> scratch;
    std::vector<Tensor> recycled;       // per grad target: a .grad the call cleared that nothing else holds
    std::unordered_map<int64_t, int> value_of_recorded;   // observed runs: a recorded node's id -> its output 0's value
    bool running = false;
    // A GPU plan's runs of steps replayed as CUDA graphs (GraphSegment); segment_at[k] is the one
    // that starts at step k, or -1.
    std::vector<GraphSegment> segments;
    std::vector<int> segment_at;

    PlanExec() = default;
    PlanExec(const PlanExec&) = delete;
    PlanExec& operator=(const PlanExec&) = delete;
    ~PlanExec() {
        for (GraphSegment& g : segments) cuda_graph_free(g.graph);
    }

    StepCall step_call(size_t k) {
        StepExec& x = steps[k];
        return {x, input_slots.data() + x.first_input, output_slots.data() + x.first_output, x.n_inputs, x.n_outputs,
                fused_math.data() + x.first_math};
    }
};

namespace {

// Which slot each value gets (PlanExec::slot_of); returns the number of slots. Only the values
// the run reads or writes get one: a long loop's compiled plan leaves ~150,000 of its ~800,000
// values to no step (the steps the passes dropped, the values inside fused steps), and a slot is
// 88 bytes. (Sharing one slot among the values of a buffer whose slot never changes saved 14 MB
// more at 50,000 steps but made the replay ~10% slower there.)
int assign_slots(const Plan& plan, std::vector<int>& slot_of) {
    size_t n = plan.values.size();
    std::vector<bool> used(n, false);
    auto use = [&](int v) {
        if (v >= 0) used[static_cast<size_t>(v)] = true;
    };
    for (const PlanStep& s : plan.steps) {
        for (int v : s.inputs) use(v);
        for (int v : s.outputs) use(v);
    }
    for (const PlanOutput& o : plan.outputs) {
        use(o.value);
        use(o.grad_value);
    }
    for (const PlanGuard& g : plan.guards) {
        use(g.value);
        use(g.other_value);
    }
    slot_of.assign(n, -1);
    int slots = 0;
    for (size_t v = 0; v < n; ++v)   // values from outside are bound each call, or for good: each has one
        if (used[v] || plan.values[v].kind != VALUE_STEP) slot_of[v] = slots++;
    return slots;
}

// Whether step k may be part of a GraphSegment (see there).
bool step_capturable(const Plan& plan, const std::vector<int>& roots, const PlanExec& e, size_t k) {
    const PlanStep& s = plan.steps[k];
    if (s.kind != STEP_KERNEL || s.into_grad >= 0 || !cuda_kernel_capturable(s.op)) return false;
    if (e.steps[k].fresh) return false;
    // On the plan's device (a step on a CPU value, an optimizer's step count, runs on the host:
    // a graph would not repeat it) and at the same address every call.
    auto fixed = [&](int v) {
        int r = roots[v];
        const PlanValue& root = plan.values[r];
        if (plan.values[v].device != plan.device || root.device != plan.device) return false;
        if (root.kind == VALUE_CAPTURED || root.kind == VALUE_CONSTANT) return true;
        return root.kind == VALUE_STEP && plan.value_buffer[r] >= 0 && !plan.value_per_call[r];
    };
    for (int v : s.inputs)
        if (!fixed(v)) return false;
    for (int v : s.outputs)
        if (!fixed(v)) return false;
    return true;
}

// A GPU plan's GraphSegments: each run of two or more capturable steps.
void find_graph_segments(const Plan& plan, const std::vector<int>& roots, PlanExec& e) {
    e.segment_at.assign(plan.steps.size(), -1);
    size_t k = 0;
    while (k < plan.steps.size()) {
        size_t end = k;
        while (end < plan.steps.size() && step_capturable(plan, roots, e, end)) ++end;
        if (end - k >= 2) {
            GraphSegment g;
            g.begin = k;
            g.end = end;
            e.segment_at[k] = static_cast<int>(e.segments.size());
            e.segments.push_back(std::move(g));
        }
        k = end > k ? end : k + 1;
    }
}

std::shared_ptr<PlanExec> exec_build(Plan& plan) {
    auto e = std::make_shared<PlanExec>();
    size_t n = plan.values.size();
    std::vector<int> roots = value_roots(plan);
    e->slots.resize(static_cast<size_t>(assign_slots(plan, e->slot_of)));
    for (size_t b = 0; b < plan.buffer_bytes.size(); ++b)
        e->buffers.push_back(Ref<Storage>::adopt(storage_new(plan.buffer_bytes[b], plan.device)));
    for (size_t v = 0; v < n; ++v) {
        if (e->slot_of[v] < 0) continue;
        const PlanValue& pv = plan.values[v];
        Value& slot = e->slot(static_cast<int>(v));
        slot.shape = pv.shape;
        slot.dtype = pv.dtype;
        int r = roots[v];
        const PlanValue& root = plan.values[r];
        if (root.kind == VALUE_CAPTURED && r == static_cast<int>(v)) value_share_layout(slot, plan_captured_value(plan.captured[root.index]));
        else if (root.kind == VALUE_CAPTURED) slot.storage = plan_captured_value(plan.captured[root.index]).storage;
        else if (root.kind == VALUE_CONSTANT) slot.storage = plan.constants[root.index].storage;
        else if (plan.value_buffer[v] >= 0) slot.storage = e->buffers[plan.value_buffer[v]];
        else e->per_call_values.push_back(static_cast<int>(v));
        if (pv.kind == VALUE_INPUT || pv.kind == VALUE_GRAD || pv.kind == VALUE_CAPTURED) e->bound_values.push_back(static_cast<int>(v));
    }
    size_t n_inputs = 0, n_outputs = 0, n_fused = 0;
    for (const PlanStep& s : plan.steps) {
        n_inputs += s.inputs.size();
        n_outputs += s.outputs.size();
        n_fused += s.fused.size();
        if (s.outputs.size() > 32) engine_fail("%s: a step with %zu outputs (at most 32)", plan.name.c_str(), s.outputs.size());
        if (s.inputs.size() > UINT16_MAX)
            engine_fail("%s: a step with %zu inputs (at most %d)", plan.name.c_str(), s.inputs.size(), UINT16_MAX);
    }
    if (std::max({n_inputs, n_outputs, n_fused}) > UINT32_MAX) engine_fail("%s: too many steps to run", plan.name.c_str());
    e->input_slots.reserve(n_inputs);   // sized once
    e->output_slots.reserve(n_outputs);
    e->fused_math.reserve(n_fused);
    e->steps.reserve(plan.steps.size());
    size_t scratch = 0;
    for (const PlanStep& s : plan.steps) {
        StepExec x;
        x.first_input = static_cast<uint32_t>(e->input_slots.size());
        x.n_inputs = static_cast<uint16_t>(s.inputs.size());
        for (int v : s.inputs) e->input_slots.push_back(&e->slot(v));
        x.first_output = static_cast<uint32_t>(e->output_slots.size());
        x.n_outputs = static_cast<uint16_t>(s.outputs.size());
        for (size_t i = 0; i < s.outputs.size(); ++i) {
            int v = s.outputs[i];
            e->output_slots.push_back(&e->slot(v));
            if (plan.value_per_call[v] && plan.values[v].alias_of < 0) x.fresh |= 1u << i;
        }
        x.rebind = s.kind == STEP_KERNEL && (op_info(s.op).flags & (OPF_VIEW | OPF_INPLACE));
        x.view = s.kind == STEP_KERNEL && (op_info(s.op).flags & OPF_VIEW) && s.into_grad < 0 && x.n_outputs == 1 &&
                 !x.is_fresh(0);
        x.first_math = static_cast<uint32_t>(e->fused_math.size());
        for (const FusedOp& op : s.fused) e->fused_math.push_back(elementwise_math(op.op));
        if (s.kind == STEP_FUSED) scratch = std::max(scratch, (s.inputs.size() + s.fused.size()) * FUSED_CHUNK);
        e->steps.push_back(x);
    }
    e->scratch = Ref<Storage>::adopt(storage_new(scratch * sizeof(double), DEVICE_CPU));
    e->recycled.resize(plan.grad_targets.size());
    if (plan.device != DEVICE_CPU) find_graph_segments(plan, roots, *e);
    return e;
}

// A tensor handed back to the caller: a leaf on the tape holding `value` (no autograd history).
Tensor leaf_tensor(const Value& value, Phase phase, SourceLoc where) {
    return tape_record_prepared(OP_tensor, OpAttrs(), nullptr, nullptr, 0, &value, 1, phase, where);
}

void give_fresh_bytes(Value& v, Device device) {
    v.storage = Ref<Storage>::adopt(storage_new(static_cast<size_t>(v.numel()) * dtype_size(v.dtype), device));
}

bool guard_holds(const Plan& plan, const PlanExec& e, const PlanGuard& g) {
    if (g.kind == GUARD_GRAD_STATE) return true;   // checked with the inputs, before the run
    Value v = value_to_host(e.slot(g.value));   // an input may be on another device
    if (g.kind == GUARD_VALUES) {
        if (static_cast<size_t>(v.numel()) != g.expected.size()) return false;
        for (int64_t i = 0; i < v.numel(); ++i) {
            double x = value_get(v, i), want = g.expected[static_cast<size_t>(i)];
            if (!(x == want || (std::isnan(x) && std::isnan(want)))) return false;
        }
        return true;
    }
    double a = value_get(v, 0);
    double b = g.other_value >= 0 ? value_get(value_to_host(e.slot(g.other_value)), 0) : g.other_number;
    if (g.swapped) std::swap(a, b);
    bool truth = g.compare == COMPARE_LT ? a < b : a <= b;
    (void)plan;
    return truth == g.truth;
}

// Fills a chunk register from a row repeated along the result (FUSED_ROW), a segment at a time.
template <class T>
void fill_row(T* to, const T* row, int64_t period, int64_t start, int64_t len) {
    int64_t at = start % period;
    while (len > 0) {
        int64_t part = std::min(len, period - at);
        std::memcpy(to, row + at, static_cast<size_t>(part) * sizeof(T));
        to += part;
        len -= part;
        at = 0;
    }
}

constexpr int64_t ROW_DIRECT = 64;   // rows at least this long are read in place: chunks stop at row ends

// One fused step: chunk by chunk, each op's span math over registers; the last op writes the
// result. A full-shape input is read in place; a long row (a bias) too, the chunks cut at its ends.
template <class T>
void run_fused(const Plan& plan, const PlanStep& s, const StepCall& x, PlanExec& e) {
    int n_inputs = static_cast<int>(s.inputs.size());
    int n_ops = static_cast<int>(s.fused.size());
    Value& out = *x.outputs[0];
    int64_t n = out.numel();
    T* scratch = static_cast<T*>(e.scratch->data);
    auto reg_at = [&](int r) { return scratch + static_cast<int64_t>(r) * FUSED_CHUNK; };
    const T* regs[MAX_FUSED_INPUTS + MAX_FUSED_OPS];
    // The loop reads memory in order: a strided view among the inputs is read from a copy.
    Value packed[MAX_FUSED_INPUTS];
    const Value* inputs[MAX_FUSED_INPUTS];
    for (int i = 0; i < n_inputs; ++i) {
        inputs[i] = x.inputs[i];
        if (inputs[i]->strided()) {
            packed[i] = value_contiguous(*inputs[i]);
            inputs[i] = &packed[i];
        }
    }
    for (int i = 0; i < n_inputs; ++i)
        if (s.fused.input_mode(i) == FUSED_SCALAR) std::fill(reg_at(i), reg_at(i) + FUSED_CHUNK, inputs[i]->data<T>()[0]);
    for (int64_t start = 0; start < n;) {
        int64_t len = std::min(FUSED_CHUNK, n - start);
        for (int i = 0; i < n_inputs; ++i) {
            int64_t period = inputs[i]->numel();
            if (s.fused.input_mode(i) == FUSED_ROW && period >= ROW_DIRECT) len = std::min(len, period - start % period);
        }
        for (int i = 0; i < n_inputs; ++i) {
            const Value& in = *inputs[i];
            int64_t period = in.numel();
            if (s.fused.input_mode(i) == FUSED_FULL) regs[i] = in.data<T>() + start;
            else if (s.fused.input_mode(i) == FUSED_SCALAR) regs[i] = reg_at(i);
            else if (period >= ROW_DIRECT) regs[i] = in.data<T>() + start % period;
            else {
                fill_row(reg_at(i), in.data<T>(), period, start, len);
                regs[i] = reg_at(i);
            }
        }
        for (int j = 0; j < n_ops; ++j) {
            const FusedOp& op = s.fused[j];
            T* dst = j == n_ops - 1 ? out.data<T>() + start : reg_at(n_inputs + j);
            const T* operands[2] = {regs[op.operands[0]], regs[op.operands[1]]};
            const OpAttrs& attrs = plan.attrs[op.attrs];
            if constexpr (sizeof(T) == 4) x.math[j]->f32(operands, dst, len, attrs);
            else x.math[j]->f64(operands, dst, len, attrs);
            regs[n_inputs + j] = dst;
        }
        start += len;
    }
}

PlanReplayStep* g_replay_current = nullptr;   // the observed step in progress (plan_replay_current)

// Sets g_replay_current for the extent of one observed node or group event (a frozen call run at
// a stop of another restores the outer one).
struct ReplayStepScope {
    PlanReplayStep step;
    PlanReplayStep* saved = g_replay_current;
    explicit ReplayStepScope(const PlanReplayStep& s) : step(s) { g_replay_current = &step; }
    ~ReplayStepScope() { g_replay_current = saved; }
};

// engine_backward_pass() is `pass` while a replayed group is announced.
struct ReplayPassScope {
    explicit ReplayPassScope(BackwardPass* pass) { engine_backward_pass_replay(pass); }
    ~ReplayPassScope() { engine_backward_pass_replay(nullptr); }
};

// The run of one call: binds, runs, unbinds (also when a kernel raises).
struct PlanCall {
    Plan& plan;                 // what runs: the plan, or its debug replay when observed
    const Plan& called;         // the plan plan_run was called with
    PlanExec& e;
    const std::vector<Tensor>& inputs;
    bool observed;
    std::vector<int64_t> ids;   // observed runs: the node that made each value in this run
    // Observed runs: the tensor each value is in this call (its node is kept until the call
    // returns, so a backward group can name its forward node and show its gradients), and the
    // forward nodes of the groups announced so far (the pass's `order`, ids decreasing).
    std::vector<Tensor> made;
    std::vector<Node*> groups_visited;
    int step_index = 0;         // the step being run (for plan_replay_current)

    PlanCall(Plan& p, const Plan& c, const std::vector<Tensor>& in)
        : plan(p), called(c), e(*p.exec), inputs(in), observed(engine_observed()) {
        e.running = true;
        if (observed) {
            ids.assign(plan.values.size(), 0);
            made.resize(plan.values.size());
            if (e.value_of_recorded.empty())   // made on the first observed call
                for (const PlanStep& s : plan.steps)
                    if (s.kind == STEP_KERNEL && !s.outputs.empty()) e.value_of_recorded.emplace(s.recorded_id, s.outputs[0]);
        }
        for (int v : e.bound_values) {
            const PlanValue& pv = plan.values[v];
            if (pv.kind == VALUE_INPUT) value_share_layout(e.slot(v), inputs[pv.index].value());   // a view keeps its layout
            else if (pv.kind == VALUE_GRAD) bind_grad(pv.index);
            if (!observed) continue;
            if (pv.kind == VALUE_INPUT) ids[v] = inputs[pv.index].id();
            if (pv.kind == VALUE_CAPTURED) ids[v] = plan.captured[pv.index].tensor.id();
        }
    }
    ~PlanCall() {
        for (int v : e.per_call_values) e.slot(v).storage.reset();
        for (Tensor& t : e.recycled) t = Tensor();
        e.running = false;
    }

    Output& target(int t) { return target_output(plan, t, inputs); }

    void bind_grad(int t) {
        const Tensor& grad = target(t).grad;
        Value& slot = e.slot(plan.grad_targets[t].grad_value);
        if (grad.defined()) {
            value_share_layout(slot, grad.value());
        } else {
            slot.storage.reset();
            slot.layout.reset();
        }
        if (observed && !ids.empty()) ids[plan.grad_targets[t].grad_value] = grad.defined() ? grad.id() : 0;
    }

    // Runs op on values: straight through the kernel, or as a node through exec_node when observed.
    void run_op(OpId op, const OpAttrs& attrs, const Value* const* in, const int* in_values, int n_in, Value* const* out,
                const int* out_values, int n_out, const PlanStep& s) {
        if (!observed) {
            if (!(op_info(op).flags & OPF_VIEW))   // as exec_node: observers hear of a storage before it is written
                for (int i = 0; i < n_out; ++i) engine_notify_before_write(nullptr, out[i]->storage.get());
            KernelCall call{in, n_in, out, n_out, attrs};
            kernel_run(op, call);
            if (op_info(op).flags & OPF_INPLACE) ++out[0]->storage->version;
            return;
        }
        std::vector<Value> in_copy, out_copy;
        std::vector<int64_t> in_ids;
        for (int i = 0; i < n_in; ++i) {
            in_copy.push_back(*in[i]);
            in_ids.push_back(in_values && in_values[i] >= 0 ? ids[in_values[i]] : 0);
        }
        for (int i = 0; i < n_out; ++i) out_copy.push_back(*out[i]);
        Tensor node = tape_record_prepared(op, attrs, in_copy.data(), in_ids.data(), n_in, out_copy.data(), n_out, s.phase,
                                           s.where);
        join_group(node.node.get(), s);
        {
            ReplayStepScope scope({&plan, &called, node.node.get(), step_index, s.recorded_id, s.recorded_group});
            exec_node(node.node.get());
        }
        for (int i = 0; i < n_out; ++i) {
            *out[i] = node.node->outputs[i].value;   // a view's kernel set the node's layout: the slot takes it
            if (out_values && out_values[i] >= 0) {
                ids[out_values[i]] = node.id();
                made[out_values[i]] = Tensor(node.node.get(), i);
            }
        }
    }

    // This call's node for a recorded node (null when the call made none, or has not yet).
    Node* replayed_node(int64_t recorded_id) {
        auto found = e.value_of_recorded.find(recorded_id);
        if (found == e.value_of_recorded.end() || !made[found->second].defined()) return nullptr;
        return made[found->second].node.get();
    }

    // A backward step's node belongs to the group of its forward node, as in eager: this call's
    // forward node when it made one (its backward_nodes keep the group's nodes, as backward does),
    // else the recorded id (the node may still be alive on the tape). Adding into a .grad belongs
    // to the leaf's visit: the leaf of this call.
    void join_group(Node* node, const PlanStep& s) {
        if (s.kind == STEP_GRAD_ACCUMULATE) {
            node->group = target_node(plan, s.target, inputs)->id;
            return;
        }
        if (s.phase != PHASE_BACKWARD || !s.recorded_group) return;
        node->group = s.recorded_group;
        if (Node* forward = replayed_node(s.recorded_group)) {
            node->group = forward->id;
            forward->group_records_made().backward_nodes.push_back(Ref<Node>(node));
        }
    }

    // STEP_GROUP_DONE: eager's HOOK_GROUP_DONE for this call's forward node, with the gradients
    // the group received and produced in this call, while engine_backward_pass() says so. Not when
    // the call runs inside a backward pass (typed at a stop in one): that pass is the running one.
    void announce_group(const PlanStep& s) {
        const PlanGroup& group = plan.groups[s.target];
        Node* forward = replayed_node(group.recorded_id);
        if (!forward || engine_backward_pass()) return;
        groups_visited.push_back(forward);
        std::vector<Tensor> grad_outputs, grad_inputs;
        for (int v : group.grad_outputs) grad_outputs.push_back(v >= 0 ? made[v] : Tensor());
        for (int v : group.grad_inputs) grad_inputs.push_back(v >= 0 ? made[v] : Tensor());
        BackwardPass pass;
        Node* root = group.root_value >= 0 && made[group.root_value].defined() ? made[group.root_value].node.get() : forward;
        pass.root = root;
        pass.order = &groups_visited;
        pass.position = groups_visited.size() - 1;
        pass.group = BackwardGroup{forward, grad_outputs.data(), grad_inputs.data()};
        ReplayStepScope scope({&plan, &called, forward, step_index, group.recorded_id, group.recorded_id});
        ReplayPassScope replay_pass(&pass);
        engine_notify(forward, HOOK_GROUP_DONE);
    }

    // A view of a contiguous value that is itself contiguous (a transpose of a [1,n] row, an
    // unsqueeze, a view): its layout is known from the last run, so it is bound without the kernel.
    bool bind_known_view(const StepCall& x) {
        if (!x.exec.view || !x.exec.contiguous_view_seen || observed || !x.inputs[0]->is_contiguous()) return false;
        Value& out = *x.outputs[0];
        out.storage = x.inputs[0]->storage;
        out.offset = x.inputs[0]->offset + x.exec.contiguous_view_offset;
        out.layout.reset();
        return true;
    }

    void learn_view(const StepCall& x) {
        const Value &in = *x.inputs[0], &out = *x.outputs[0];
        if (!x.exec.view || !in.is_contiguous() || !out.is_contiguous()) return;
        x.exec.contiguous_view_seen = true;
        x.exec.contiguous_view_offset = out.offset - in.offset;
    }

    void run_kernel(const PlanStep& s, const StepCall& x) {
        if (bind_known_view(x)) return;
        for (int i = 0; i < x.n_outputs; ++i)
            if (x.is_fresh(i)) give_fresh_bytes(*x.outputs[i], plan.values[s.outputs[i]].device);
        if (x.exec.rebind) value_share_layout(*x.outputs[0], *x.inputs[0]);   // a view's kernel then sets its own
        const OpAttrs* attrs = &plan_step_attrs(plan, s);
        OpAttrs accumulate_attrs;   // into_grad when the .grad exists: Y += A B
        Output* grad_target = nullptr;
        if (s.into_grad >= 0) {
            grad_target = &target(s.into_grad);
            if (grad_target->grad.defined()) {
                x.outputs[0]->storage = grad_target->grad.value().storage;
                accumulate_attrs = *attrs;
                accumulate_attrs.accumulate = true;
                attrs = &accumulate_attrs;
            } else if (!take_recycled(s.into_grad, *x.outputs[0])) {
                give_fresh_bytes(*x.outputs[0], plan.values[s.outputs[0]].device);
            }
        }
        run_op(s.op, *attrs, x.inputs, s.inputs.data(), x.n_inputs, x.outputs, s.outputs.data(), x.n_outputs, s);
        if (x.exec.view) learn_view(x);
        if (grad_target) {
            if (attrs == &accumulate_attrs) ++x.outputs[0]->storage->version;
            else set_grad_after_write(s.into_grad, *x.outputs[0], s);
            bind_grad(s.into_grad);
        }
    }

    void set_new_grad(Output& target, const Value& value, const PlanStep& s) {
        target.grad = leaf_tensor(value, PHASE_BACKWARD, s.where);
        target.grad.value().storage->grad_owned = true;
    }

    // `.grad = nil` then a new .grad, call after call (a training step that clears its gradients):
    // when nothing but the leaf holds the old .grad (no Lua value, no view, no viewer history), the
    // new one is that tensor again, overwritten -- nobody can tell it from a new tensor, and the
    // call makes no tape record and no allocation. Observed runs make new tensors, as eager does.
    void clear_grad(int t) {
        Tensor& grad = target(t).grad;
        Value& slot = e.slot(plan.grad_targets[t].grad_value);
        slot.storage.reset();
        if (!observed && grad.defined() && grad.node->refcount == 1 && grad.node->outputs.size() == 1 &&
            grad.value().storage->refcount == 1 && !grad.node->outputs[0].grad.defined())
            e.recycled[t] = std::move(grad);
        grad = Tensor();
        bind_grad(t);
    }

    // The bytes of the cleared .grad of target t when they fit `v`, taken for its new .grad; else false.
    bool take_recycled(int t, Value& v) {
        Tensor& old = e.recycled[t];
        if (!old.defined() || old.value().shape != v.shape || old.value().dtype != v.dtype) return false;
        if (!old.value().is_contiguous() || old.value().offset != 0) return false;   // v is written row-major
        v.storage = old.value().storage;
        return true;
    }

    // The new .grad of target t holds `value`: the recycled tensor when its bytes were taken.
    void set_grad_after_write(int t, const Value& value, const PlanStep& s) {
        Tensor& old = e.recycled[t];
        if (old.defined() && old.value().storage.get() == value.storage.get()) {
            ++value.storage->version;
            target(t).grad = std::move(old);
            old = Tensor();
        } else {
            set_new_grad(target(t), value, s);
        }
    }

    void run_accumulate(const PlanStep& s, const StepCall& x) {
        Output& t = target(s.target);
        int grad_value = plan.grad_targets[s.target].grad_value;
        if (t.grad.defined()) {
            Value grad = t.grad.value();
            const Value* in[2] = {&grad, x.inputs[0]};
            Value* out[1] = {&grad};
            int in_values[2] = {grad_value, s.inputs[0]};
            OpAttrs alpha;
            alpha.scalar = 1;
            run_op(OP_add_, alpha, in, in_values, 2, out, &grad_value, 1, s);
        } else {
            // The new .grad is contiguous, whatever the gradient's layout (a transpose's view, as
            // mm(x, w:t())'s gradient of w is, must not lend its strides or offset to the .grad).
            Value fresh;
            fresh.shape = x.inputs[0]->shape;
            fresh.dtype = x.inputs[0]->dtype;
            if (!take_recycled(s.target, fresh)) give_fresh_bytes(fresh, x.inputs[0]->device());
            Value* out[1] = {&fresh};
            run_op(OP_clone, OpAttrs(), x.inputs, s.inputs.data(), 1, out, nullptr, 1, s);
            set_grad_after_write(s.target, fresh, s);
        }
        bind_grad(s.target);
    }

    // Observed: each op of the group as its own node, with new bytes for the values between them.
    void run_fused_observed(const PlanStep& s, const StepCall& x) {
        int n_inputs = static_cast<int>(s.inputs.size());
        std::vector<Value> results(s.fused.size());
        for (size_t j = 0; j < s.fused.size(); ++j) {
            const FusedOp& op = s.fused[j];
            int arity = x.math[j]->arity;
            const Value* in[2];
            int in_values[2] = {-1, -1};
            for (int a = 0; a < arity; ++a) {
                int k = op.operands[a];
                in[a] = k < n_inputs ? x.inputs[k] : &results[k - n_inputs];
                if (k < n_inputs) in_values[a] = s.inputs[k];
            }
            bool last = j + 1 == s.fused.size();
            if (!last) {
                results[j].shape = x.outputs[0]->shape;
                results[j].dtype = x.outputs[0]->dtype;
                give_fresh_bytes(results[j], plan.values[s.outputs[0]].device);
            }
            Value* out[1] = {last ? x.outputs[0] : &results[j]};
            PlanStep member = s;
            member.where = op.where;
            run_op(op.op, plan.attrs[op.attrs], in, in_values, arity, out, last ? s.outputs.data() : nullptr, 1, member);
        }
    }

    void run_step(const PlanStep& s, const StepCall& x) {
        switch (s.kind) {
            case STEP_KERNEL: run_kernel(s, x); break;
            case STEP_FUSED:
                if (x.is_fresh(0)) give_fresh_bytes(*x.outputs[0], plan.values[s.outputs[0]].device);
                if (!observed) engine_notify_before_write(nullptr, x.outputs[0]->storage.get());   // as exec_node
                if (observed) run_fused_observed(s, x);
                else if (x.outputs[0]->dtype == DTYPE_F32) run_fused<float>(plan, s, x, e);
                else run_fused<double>(plan, s, x, e);
                break;
            case STEP_GRAD_ACCUMULATE: run_accumulate(s, x); break;
            case STEP_GRAD_CLEAR: clear_grad(s.target); break;
            case STEP_GUARD: break;   // checked by the loop
            case STEP_GROUP_DONE:
                if (observed) announce_group(s);
                break;
        }
    }

    // GraphSegment g (a GPU plan's run of steps, starting at step k): a launch of its graph when
    // the addresses it was captured with still hold; the second unobserved call captures it; else
    // (the first call, a refused capture) step by step. Leaves k at the segment's last step (or at
    // the step that failed).
    void run_segment(GraphSegment& g, size_t& k) {
        if (g.graph && segment_addresses_hold(g)) {
            cuda_graph_launch(g.graph);
            for (Storage* written : g.written_in_place) ++written->version;
            k = g.end - 1;
            return;
        }
        if (g.graph) {   // a captured tensor's bytes moved: capture again on a later call
            cuda_graph_free(g.graph);
            g.graph = nullptr;
            g.calls = 0;
        }
        if (!g.refused && g.calls > 0 && capture_segment(g)) {
            k = g.end - 1;
            return;
        }
        ++g.calls;
        run_steps(g.begin, g.end, k);
    }

    void run_steps(size_t from, size_t to, size_t& k) {
        for (k = from; k < to; ++k) {
            step_index = static_cast<int>(k);
            run_step(plan.steps[k], e.step_call(k));
        }
        k = to - 1;
    }

    bool segment_addresses_hold(const GraphSegment& g) const {
        for (const auto& [slot, address] : g.addresses)
            if (!slot->storage || slot->raw() != address) return false;
        return true;
    }

    // Records g's steps as a CUDA graph, then launches it (capturing runs nothing). False, and g
    // refused for good, when the device cannot capture or a step could not be captured.
    bool capture_segment(GraphSegment& g) {
        if (!cuda_capture_begin()) {
            g.refused = true;
            return false;
        }
        size_t k = g.begin;
        bool recorded = true;
        try {
            run_steps(g.begin, g.end, k);
        } catch (const std::exception&) {   // e.g. a host synchronisation inside: run it step by step
            recorded = false;
        }
        DeviceGraph* graph = cuda_capture_end();
        if (!recorded || !graph) {
            cuda_graph_free(graph);
            g.refused = true;
            return false;
        }
        g.graph = graph;
        g.addresses.clear();
        g.written_in_place.clear();
        for (size_t j = g.begin; j < g.end; ++j) {
            StepCall x = e.step_call(j);
            for (int i = 0; i < x.n_inputs; ++i)
                if (x.inputs[i]->storage) g.addresses.emplace_back(x.inputs[i], x.inputs[i]->raw());
            for (int i = 0; i < x.n_outputs; ++i)
                if (x.outputs[i]->storage) g.addresses.emplace_back(x.outputs[i], x.outputs[i]->raw());
            if (op_info(plan.steps[j].op).flags & OPF_INPLACE) g.written_in_place.push_back(x.outputs[0]->storage.get());
        }
        cuda_graph_launch(graph);
        return true;
    }

    Tensor output_tensor(const PlanOutput& o) {
        const PlanValue& pv = plan.values[o.value];
        Tensor t;
        if (pv.kind == VALUE_INPUT) t = inputs[pv.index];
        else if (pv.kind == VALUE_CAPTURED) t = plan.captured[pv.index].tensor;
        else if (pv.kind == VALUE_GRAD) t = target(pv.index).grad;
        else if (pv.kind == VALUE_CONSTANT) {   // a copy: the caller may change it in place
            Value copy = plan.constants[pv.index];
            give_fresh_bytes(copy, copy.device());
            value_copy_elements(copy, plan.constants[pv.index]);
            t = leaf_tensor(copy, PHASE_FORWARD, plan.where);
        } else {
            t = leaf_tensor(e.slot(o.value), PHASE_FORWARD, plan.where);
        }
        if (t.defined() && o.grad_value >= 0) t.node->outputs[t.output].grad = leaf_tensor(e.slot(o.grad_value), PHASE_BACKWARD, plan.where);
        return t;
    }
};

}  // namespace

std::string plan_check_inputs(const Plan& plan, const std::vector<Tensor>& inputs) {
    char buffer[512];
    if (inputs.size() != plan.inputs.size()) {
        std::string names;
        for (const PlanInput& in : plan.inputs) names += (names.empty() ? "" : ", ") + in.name;
        snprintf(buffer, sizeof buffer, "expects %zu tensor argument%s (%s), got %zu", plan.inputs.size(),
                 plan.inputs.size() == 1 ? "" : "s", names.c_str(), inputs.size());
        return buffer;
    }
    for (size_t k = 0; k < inputs.size(); ++k) {
        const PlanInput& want = plan.inputs[k];
        const Tensor& t = inputs[k];
        const char* name = want.name.c_str();
        if (!t.defined()) {
            snprintf(buffer, sizeof buffer, "input %zu (%s) is not a tensor", k + 1, name);
            return buffer;
        }
        if (t.shape() != want.shape) {
            snprintf(buffer, sizeof buffer, "input %zu (%s) has shape %s; the plan expects %s", k + 1, name,
                     t.shape().str().c_str(), want.shape.str().c_str());
            return buffer;
        }
        if (t.dtype() != want.dtype) {
            snprintf(buffer, sizeof buffer, "input %zu (%s) is %s; the plan expects %s", k + 1, name, dtype_name(t.dtype()),
                     dtype_name(want.dtype));
            return buffer;
        }
        if (t.value().device() != want.device) {
            snprintf(buffer, sizeof buffer, "input %zu (%s) is on %s; the plan expects %s", k + 1, name,
                     device_name(t.value().device()), device_name(want.device));
            return buffer;
        }
        if (t.value().is_contiguous() != want.contiguous) {   // a reshape recorded as a view may need a copy now
            snprintf(buffer, sizeof buffer, "input %zu (%s) is %s; the plan was recorded with %s", k + 1, name,
                     want.contiguous ? "a strided view" : "contiguous",
                     want.contiguous ? "a contiguous tensor" : "a strided view (call contiguous() on it, or freeze again)");
            return buffer;
        }
        if (t.requires_grad() != want.requires_grad) {
            snprintf(buffer, sizeof buffer, "input %zu (%s) %s grad; the plan was recorded with one that %s", k + 1, name,
                     t.requires_grad() ? "requires" : "does not require", want.requires_grad ? "does" : "does not");
            return buffer;
        }
        if (t.requires_grad() && !t.node->is_leaf()) {
            snprintf(buffer, sizeof buffer, "input %zu (%s) is part of a graph (requires grad, not a leaf); detach it", k + 1,
                     name);
            return buffer;
        }
    }
    if (grad_enabled() != plan.grad_mode)
        return plan.grad_mode ? "autograd is off (torch.no_grad); the plan was recorded with it on"
                              : "autograd is on; the plan was recorded under torch.no_grad";
    for (size_t t = 0; t < plan.grad_targets.size(); ++t) {
        const GradTarget& target = plan.grad_targets[t];
        const Node* node = target.kind == VALUE_INPUT ? inputs[target.index].node.get()
                                                      : plan.captured[target.index].tensor.node.get();
        if (!node->outputs[target.output].requires_grad && target.kind == VALUE_CAPTURED) {
            snprintf(buffer, sizeof buffer, "%s no longer requires grad; the plan accumulates its gradient",
                     plan_value_name(plan, target.grad_value).c_str());
            return buffer;
        }
    }
    for (size_t g = 0; g < plan.guards.size(); ++g) {
        const PlanGuard& guard = plan.guards[g];
        if (guard.kind != GUARD_GRAD_STATE) continue;
        const GradTarget& target = plan.grad_targets[guard.target];
        const Node* node = target.kind == VALUE_INPUT ? inputs[target.index].node.get()
                                                      : plan.captured[target.index].tensor.node.get();
        if (node->outputs[target.output].grad.defined() != guard.defined)
            return plan_guard_describe(plan, static_cast<int>(g)) + (guard.defined ? ", now it is nil" : ", now it is a tensor");
    }
    return "";
}

const PlanReplayStep* plan_replay_current() { return g_replay_current; }

std::vector<int> plan_steps_replaying(const Plan& plan, int64_t recorded_id, bool group) {
    std::vector<int> found;
    auto matches = [&](int64_t id, int64_t of_group) { return group ? of_group == recorded_id : id == recorded_id; };
    for (size_t k = 0; k < plan.steps.size(); ++k) {
        const PlanStep& s = plan.steps[k];
        if (s.kind == STEP_GROUP_DONE || s.kind == STEP_GUARD) continue;
        bool runs = matches(s.recorded_id, s.recorded_group);
        for (const FusedOp& op : s.fused) runs = runs || matches(op.recorded_id, op.recorded_group);
        if (runs) found.push_back(static_cast<int>(k) + 1);
    }
    return found;
}

int64_t plan_replay_recorded_id(const Node* node) {
    return g_replay_current && node && g_replay_current->node == node ? g_replay_current->recorded_id : 0;
}

namespace {

// What an observed call runs: the plan's debug replay, compiled the first time it is needed.
Plan& debug_replay_of(Plan& plan) {
    if (!plan.debug_replay && plan.recording)
        plan.debug_replay = compile_with(*plan.recording, PlanPasses{false, false, false, false, false, false}, true);
    return plan.debug_replay ? *plan.debug_replay : plan;
}

}  // namespace

PlanRunResult plan_run(Plan& plan_called, const std::vector<Tensor>& inputs, bool inputs_checked) {
    if (!plan_called.compiled) engine_fail("%s: the plan is not compiled", plan_called.name.c_str());
    // Watched (a breakpoint, the viewer): the recording as recorded, so stops are eager's.
    Plan& plan = engine_observed() ? debug_replay_of(plan_called) : plan_called;
    if (!inputs_checked) {
        std::string mismatch = plan_check_inputs(plan, inputs);
        if (!mismatch.empty()) engine_fail("%s: %s", plan.name.c_str(), mismatch.c_str());
    }
    if (!plan.exec) plan.exec = exec_build(plan);
    if (plan.exec->running)
        engine_fail("%s: already running (called again from inside its own run, e.g. at a breakpoint)", plan.name.c_str());
    PlanRunResult result;
    PlanCall call(plan, plan_called, inputs);
    size_t k = 0;
    try {
        for (; k < plan.steps.size(); ++k) {
            const PlanStep& s = plan.steps[k];
            if (s.kind == STEP_GUARD) {
                if (guard_holds(plan, call.e, plan.guards[s.target])) continue;
                result.failed_guard = s.target;
                result.reason = plan_guard_describe(plan, s.target) + ", not this time";
                if (plan.first_effect_step >= 0 && static_cast<int>(k) > plan.first_effect_step)
                    engine_fail("%s: %s; the plan had already changed tensors outside it (step %d), so it cannot start "
                                "over: read values before updating them in place, or call the function eagerly",
                                plan.name.c_str(), result.reason.c_str(), plan.first_effect_step + 1);
                return result;
            }
            if (!call.observed && !call.e.segment_at.empty() && call.e.segment_at[k] >= 0) {
                call.run_segment(call.e.segments[static_cast<size_t>(call.e.segment_at[k])], k);
                continue;
            }
            call.step_index = static_cast<int>(k);
            call.run_step(s, call.e.step_call(k));
        }
    } catch (const EngineError& error) {
        if (k >= plan.steps.size()) throw;
        const PlanStep& s = plan.steps[k];
        std::string what = error.what();
        if (what.rfind(plan.name + ":", 0) == 0) throw;
        engine_fail("%s: step %zu (%s, recorded at %s): %s", plan.name.c_str(), k + 1,
                    s.kind == STEP_FUSED ? "fused" : op_info(s.op).name, source_loc_str(s.where).c_str(), what.c_str());
    }
    for (const PlanOutput& o : plan.outputs) result.outputs.push_back(call.output_tensor(o));
    result.completed = true;
    return result;
}

// ============================================================================================
// [SECTION] describe

std::string plan_bytes_text(size_t bytes) {
    char buffer[32];
    if (bytes < 1024) snprintf(buffer, sizeof buffer, "%zu B", bytes);
    else if (bytes < (1u << 20)) snprintf(buffer, sizeof buffer, "%.1f KiB", bytes / 1024.0);
    else snprintf(buffer, sizeof buffer, "%.2f MiB", bytes / (1024.0 * 1024.0));
    return buffer;
}

namespace {

std::string number_str(double x) {
    char buffer[32];
    snprintf(buffer, sizeof buffer, "%.6g", x);
    return buffer;
}

std::string target_name(const Plan& plan, int t) {
    const GradTarget& target = plan.grad_targets[t];
    if (target.kind == VALUE_INPUT) return plan.inputs[target.index].name;
    const PlanCaptured& c = plan.captured[target.index];
    return c.name.empty() ? "#" + std::to_string(c.tensor.id()) : c.name;
}

std::string op_with_attrs(OpId op, const OpAttrs& attrs) {
    std::string a = op_describe_attrs(op, attrs);
    return std::string(op_info(op).name) + (a.empty() ? "" : "(" + a + ")");
}

std::string value_list(const Plan& plan, const ValueIds& values) {
    std::string s;
    for (int v : values) s += (s.empty() ? "" : ", ") + plan_value_name(plan, v);
    return s;
}

}  // namespace

std::string plan_value_name(const Plan& plan, int v) {
    const PlanValue& pv = plan.values[v];
    switch (pv.kind) {
        case VALUE_INPUT: return plan.inputs[pv.index].name;
        case VALUE_CAPTURED: {
            const PlanCaptured& c = plan.captured[pv.index];
            return c.name.empty() ? "#" + std::to_string(c.tensor.id()) : c.name;
        }
        case VALUE_GRAD: return target_name(plan, pv.index) + ".grad";
        case VALUE_CONSTANT: return "const#" + std::to_string(pv.recorded_id);
        case VALUE_STEP: break;
    }
    int output = 0;   // a second output of the same node is "#12.2"
    for (int u = v - 1; u >= 0 && plan.values[u].recorded_id == pv.recorded_id && plan.values[u].kind == VALUE_STEP; --u)
        ++output;
    return "#" + std::to_string(pv.recorded_id) + (output ? "." + std::to_string(output + 1) : "");
}

std::string plan_guard_describe(const Plan& plan, int guard) {
    const PlanGuard& g = plan.guards[guard];
    std::string where = " (" + source_loc_str(g.where) + ")";
    switch (g.kind) {
        case GUARD_VALUES: {
            std::string values;
            for (size_t i = 0; i < g.expected.size() && i < 4; ++i) values += (i ? ", " : "") + number_str(g.expected[i]);
            if (g.expected.size() > 4) values += ", ...";
            return g.text + " read " + (g.expected.size() == 1 ? values : "{" + values + "}") + " from " +
                   plan_value_name(plan, g.value) + where;
        }
        case GUARD_COMPARE: return g.text + " was " + (g.truth ? "true" : "false") + where;
        case GUARD_GRAD_STATE:
            return target_name(plan, g.target) + ".grad was " + (g.defined ? "a tensor" : "nil") + " when recorded" + where;
    }
    return "?";
}

bool plan_guard_reads_value(const Plan& plan, int guard) {
    GuardKind kind = plan.guards[guard].kind;
    return kind == GUARD_VALUES || kind == GUARD_COMPARE;
}

std::string plan_guard_advice(const Plan& plan, int guard) {
    const PlanGuard& g = plan.guards[guard];
    if (g.kind == GUARD_VALUES) return "return the tensor, or read " + g.text + " outside the frozen function";
    if (g.kind == GUARD_COMPARE)
        return "compare outside the frozen function, or keep the computation in tensors (no Lua `if` on a tensor's value)";
    return "";
}

PlanGraphStats plan_graph_stats(const Plan& plan) {
    PlanGraphStats st;
    if (!plan.exec) return st;
    for (const GraphSegment& g : plan.exec->segments) {
        ++st.segments;
        st.steps += static_cast<int>(g.end - g.begin);
        st.captured += g.graph != nullptr;
        st.refused += g.refused;
    }
    return st;
}

std::string plan_describe(const Plan& plan) {
    std::vector<int> roots = value_roots(plan);
    std::string s;
    char line[512];
    snprintf(line, sizeof line, "plan %s: frozen at %s; %d nodes recorded, autograd %s\n", plan.name.c_str(),
             source_loc_str(plan.where).c_str(), plan.stats.recorded_nodes, plan.grad_mode ? "on" : "off");
    s += line;
    s += "  inputs:  ";
    if (plan.inputs.empty()) s += "(none)";
    for (const PlanInput& in : plan.inputs)
        s += in.name + " " + dtype_name(in.dtype) + " " + in.shape.str() + (in.requires_grad ? " requires_grad" : "") + "   ";
    s += "\n  captured:";
    if (plan.captured.empty()) s += " (none)";
    for (size_t c = 0; c < plan.captured.size(); ++c) {
        const Value& v = plan_captured_value(plan.captured[c]);
        std::string name = plan.captured[c].name.empty() ? "#" + std::to_string(plan.captured[c].tensor.id()) : plan.captured[c].name;
        s += " " + name + " " + dtype_name(v.dtype) + " " + v.shape.str() + "  ";
    }
    s += "\n";
    if (!plan.compiled) return s + "  (recorded, not compiled)\n";
    const PlanPasses& p = plan.passes;
    const PlanStats& st = plan.stats;
    auto onoff = [](bool on) { return on ? "on " : "off"; };
    snprintf(line, sizeof line,
             "  passes:  dce %s (%d dead)   cse %s (%d common)   fold %s (%d folded)   fuse %s (%d ops in %d groups)\n"
             "           inplace %s (%d gradients, %d buffers)   reuse %s\n",
             onoff(p.dce), st.dead, onoff(p.cse), st.common, onoff(p.fold), st.folded, onoff(p.fuse), st.fused_ops,
             st.fused_groups, onoff(p.inplace), st.grads_in_place, st.inplace, onoff(p.reuse));
    s += line;
    snprintf(line, sizeof line, "  steps (%zu):\n", plan.steps.size());
    s += line;
    for (size_t k = 0; k < plan.steps.size(); ++k) {
        const PlanStep& st_ = plan.steps[k];
        std::string what, shape, buffer;
        switch (st_.kind) {
            case STEP_KERNEL: {
                OpAttrs attrs = plan_step_attrs(plan, st_);
                what = value_list(plan, st_.outputs) + " = " + op_with_attrs(st_.op, attrs) + "(" + value_list(plan, st_.inputs) + ")";
                if (st_.into_grad >= 0) what += "  -> " + target_name(plan, st_.into_grad) + ".grad (+= when it exists)";
                break;
            }
            case STEP_FUSED: {
                what = value_list(plan, st_.outputs) + " = fused(" + value_list(plan, st_.inputs) + "):";
                int n_in = static_cast<int>(st_.inputs.size());
                for (size_t j = 0; j < st_.fused.size(); ++j) {
                    const FusedOp& op = st_.fused[j];
                    int arity = elementwise_math(op.op) ? elementwise_math(op.op)->arity : 1;
                    std::string args;
                    for (int a = 0; a < arity; ++a) {
                        int r = op.operands[a];
                        args += (a ? ", " : "") + (r < n_in ? plan_value_name(plan, st_.inputs[r]) : "t" + std::to_string(r - n_in + 1));
                    }
                    what += (j ? "; " : " ") + std::string(j + 1 == st_.fused.size() ? "" : "t" + std::to_string(j + 1) + "=") +
                            op_with_attrs(op.op, plan.attrs[op.attrs]) + "(" + args + ")";
                }
                break;
            }
            case STEP_GRAD_ACCUMULATE:
                what = target_name(plan, st_.target) + ".grad += " + plan_value_name(plan, st_.inputs[0]) + "  (a copy when nil)";
                break;
            case STEP_GRAD_CLEAR: what = target_name(plan, st_.target) + ".grad = nil"; break;
            case STEP_GUARD: what = "guard " + std::to_string(st_.target + 1) + ": " + plan_guard_describe(plan, st_.target); break;
            case STEP_GROUP_DONE: what = "backward group of #" + std::to_string(st_.recorded_group) + " done"; break;
        }
        if (!st_.outputs.empty()) {
            int v = st_.outputs[0];
            shape = plan.values[v].shape.str();
            if (plan.value_buffer[v] >= 0) buffer = "buf" + std::to_string(plan.value_buffer[v]);
            else if (plan.value_per_call[roots[v]]) buffer = "new";
            else if (st_.into_grad >= 0) buffer = "grad";
            else if (plan.values[v].alias_of >= 0) buffer = "view";
        }
        snprintf(line, sizeof line, "  %4zu  %-9s %-6s %-14s %s\n", k + 1,
                 st_.phase == PHASE_BACKWARD ? "backward" : "forward", buffer.c_str(), shape.c_str(),
                 (what + "   " + source_loc_str(st_.where)).c_str());
        s += line;
    }
    int entry_guards = 0;
    for (const PlanGuard& g : plan.guards) entry_guards += g.kind == GUARD_GRAD_STATE;
    snprintf(line, sizeof line, "  guards:  input shapes, dtypes, devices, requires_grad, autograd mode; %zu recorded:\n",
             plan.guards.size());
    s += line;
    for (size_t g = 0; g < plan.guards.size(); ++g)
        s += "    " + std::to_string(g + 1) + ". " + plan_guard_describe(plan, static_cast<int>(g)) + "\n";
    s += "  outputs: ";
    if (plan.outputs.empty()) s += "(none)";
    for (const PlanOutput& o : plan.outputs) s += plan_value_name(plan, o.value) + " " + plan.values[o.value].shape.str() + "  ";
    s += "\n";
    snprintf(line, sizeof line,
             "  memory:  %d buffers, %s (%s with one per value); up to %s new per call; eager peak %s\n", st.buffers,
             plan_bytes_text(st.buffer_bytes).c_str(), plan_bytes_text(st.unshared_bytes).c_str(), plan_bytes_text(st.per_call_bytes).c_str(),
             plan_bytes_text(st.eager_peak_bytes).c_str());
    s += line;
    if (plan.device != DEVICE_CPU) {   // the steps run on the GPU (no fusion there: docs/cuda.md)
        s += std::string("  device:  ") + device_name(plan.device) + " (its buffers are there; no fused loops)";
        PlanGraphStats graphs = plan_graph_stats(plan);
        if (plan.exec)
            s += "; CUDA graphs: " + std::to_string(graphs.segments) + " runs of " + std::to_string(graphs.steps) +
                 " steps, " + std::to_string(graphs.captured) + " captured, " + std::to_string(graphs.refused) +
                 " step by step";
        s += "\n";
    }
    (void)entry_guards;
    return s;
}

}  // namespace td

