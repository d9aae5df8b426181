// plan_record.cpp: freeze, the record layer — while the function runs eagerly, observers on the
// one hook (exec_node) and on gradient accumulation write every node down as a step over numbered
// values; plan_record_* (plan.h says the contract).
//
// [SECTION] tables      the recording's value and storage tables, the Recorder
// [SECTION] observers   record_node, record_grad, the grad targets
// [SECTION] notes       plan_record_begin, the notes the Lua bindings make, plan_record_end
#include "plan.h"
#include "plan_internal.h"

#include <algorithm>
#include <chrono>
#include <unordered_map>

namespace td {

// ============================================================================================
// [SECTION] tables

namespace {

uint64_t value_key(int64_t node_id, int output) { return static_cast<uint64_t>(node_id) * 1024u + static_cast<uint64_t>(output); }

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

}  // namespace

// The recording in progress (FreezeState::recorder).
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


namespace {

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

// ============================================================================================
// [SECTION] observers

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
    Recorder& r = *freeze_state().recorder;
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
    Recorder& r = *freeze_state().recorder;
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

// ============================================================================================
// [SECTION] notes

void plan_record_begin(const std::string& name, const std::vector<Tensor>& inputs,
                       const std::vector<std::string>& input_names, SourceLoc where) {
    if (freeze_state().recorder) engine_fail("freeze: already recording a function (one at a time)");
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
    freeze_state().recorder = r.release();
    freeze_state().recorder->observer = engine_observe(
        record_node, nullptr, hook_bit(HOOK_AFTER) | hook_bit(HOOK_GROUP_DONE) | hook_bit(HOOK_GRAD_STORED), OBSERVER_RECORDS);
}

bool plan_recording() { return freeze_state().recorder != nullptr; }

void plan_record_note_values(const Tensor& t, SourceLoc where, const std::string& text) {
    Recorder* r = freeze_state().recorder;
    if (!r || !t.defined()) return;
    PlanGuard g;
    g.kind = GUARD_VALUES;
    g.value = value_for_tensor(*r, t);
    Value host = value_to_host(t.value());
    for (int64_t i = 0; i < host.numel(); ++i) g.expected.push_back(value_get(host, i));
    g.where = where;
    g.text = text;
    add_guard_step(*r->plan, g);
}

void plan_record_note_compare(const Tensor& t, CompareOp op, bool swapped, const Tensor* other, double other_number,
                              bool truth, SourceLoc where, const std::string& text) {
    Recorder* r = freeze_state().recorder;
    if (!r || !t.defined()) return;
    PlanGuard g;
    g.kind = GUARD_COMPARE;
    g.value = value_for_tensor(*r, t);
    g.compare = op;
    g.swapped = swapped;
    if (other && other->defined()) g.other_value = value_for_tensor(*r, *other);
    g.other_number = other_number;
    g.truth = truth;
    g.where = where;
    g.text = text;
    add_guard_step(*r->plan, g);
}

void plan_record_note_grad_read(const Tensor& leaf, const Tensor& grad, SourceLoc where) {
    if (!freeze_state().recorder || !leaf.defined()) return;
    Recorder& r = *freeze_state().recorder;
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
    if (!freeze_state().recorder || !leaf.defined()) return;
    Recorder& r = *freeze_state().recorder;
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
    if (Recorder* r = freeze_state().recorder) refuse(*r, why);
}

namespace {

void record_stop() {
    engine_unobserve(freeze_state().recorder->observer);
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
    if (!freeze_state().recorder) engine_fail("freeze: not recording");
    std::unique_ptr<Recorder> r(freeze_state().recorder);
    for (const Tensor& t : outputs) {
        PlanOutput o;
        o.value = value_for_tensor(*r, t);
        const Tensor& grad = t.node->outputs[t.output].grad;
        if (grad.defined() && made_by_recording(*r, t.node.get())) o.grad_value = value_for_tensor(*r, grad);
        r->plan->outputs.push_back(o);
    }
    record_stop();
    freeze_state().recorder = nullptr;
    if (!r->refusal.empty()) engine_fail("freeze: %s", r->refusal.c_str());
    Plan& plan = *r->plan;
    size_t peak = storage_bytes_peak();
    plan.stats.eager_peak_bytes = peak > r->live_at_begin ? peak - r->live_at_begin : 0;
    plan.stats.record_seconds = plan_seconds_since(r->began);
    prune_captured(plan);
    std::unique_ptr<Plan> recorded = std::move(r->plan);
    r.reset();   // the recorder's tables go now, not when the caller is done with the recording
    return recorded;
}

void plan_record_abort() {
    Recorder*& r = freeze_state().recorder;
    if (!r) return;
    record_stop();
    delete r;
    r = nullptr;
}

}  // namespace td
