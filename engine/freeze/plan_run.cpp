// plan_run.cpp: freeze, the replay layer — plan_run checks the guards and runs the steps with the
// op table's kernels: a tight loop over prepared calls (a native plan's segments, plan_native.h, in
// one call of their compiled code each), or through exec_node when an observer is attached
// (plan.h says the contract; plan_internal.h holds the run-time state, PlanExec).
//
// [SECTION] build       slots, CUDA graph segments, native segments, exec_build
// [SECTION] steps       guards, fused loops, the observed step in progress
// [SECTION] call        PlanCall: one call's binding, steps, native segments and outputs
// [SECTION] run         plan_check_inputs, plan_run
#include "plan.h"
#include "plan_internal.h"
#include "plan_native.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <unordered_map>

namespace td {

// ============================================================================================
// [SECTION] build

namespace {

// The node whose .grad a target is, for this call's inputs.
Node* target_node(Plan& plan, int t, const std::vector<Tensor>& inputs) {
    const GradTarget& target = plan.grad_targets[t];
    return target.kind == VALUE_INPUT ? inputs[target.index].node.get() : plan.captured[target.index].tensor.node.get();
}

Output& target_output(Plan& plan, int t, const std::vector<Tensor>& inputs) {
    return target_node(plan, t, inputs)->outputs[plan.grad_targets[t].output];
}

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

// A native plan's segments, by the step each starts at.
void index_native_segments(const PlanNative& native, PlanExec& e) {
    e.native_at.assign(e.steps.size(), -1);
    size_t pointers = 0;
    for (size_t i = 0; i < native.segments.size(); ++i) {
        const NativeSegment& seg = native.segments[i];
        if (seg.begin < e.native_at.size()) e.native_at[seg.begin] = static_cast<int>(i);
        pointers = std::max(pointers, seg.values.size());
        e.native_slots.emplace_back();
        for (int v : seg.values) e.native_slots.back().push_back(&e.slot(v));
    }
    e.native_pointers.assign(pointers, nullptr);
}

std::shared_ptr<PlanExec> exec_build(Plan& plan) {
    auto e = std::make_shared<PlanExec>();
    size_t n = plan.values.size();
    std::vector<int> roots = plan_value_roots(plan);
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
    if (plan.native) index_native_segments(*plan.native, *e);
    return e;
}

// ============================================================================================
// [SECTION] steps

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

// Sets FreezeState::replay_current for the extent of one observed node or group event (a frozen call run at
// a stop of another restores the outer one).
struct ReplayStepScope {
    PlanReplayStep step;
    PlanReplayStep* saved = freeze_state().replay_current;
    explicit ReplayStepScope(const PlanReplayStep& s) : step(s) { freeze_state().replay_current = &step; }
    ~ReplayStepScope() { freeze_state().replay_current = saved; }
};

// engine_backward_pass() is `pass` while a replayed group is announced.
struct ReplayPassScope {
    explicit ReplayPassScope(BackwardPass* pass) { engine_backward_pass_replay(pass); }
    ~ReplayPassScope() { engine_backward_pass_replay(nullptr); }
};

// ============================================================================================
// [SECTION] call

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

    // A native segment (plan_native.h) starting at step k: its function on the values' bytes, the
    // values a returned result needs given new bytes first, as run_kernel gives them, its views
    // bound, and the .grad tensors it writes given their bytes. When a value it reads is strided or
    // missing this call (an argument's view, a .grad that is nil), or a .grad is not as the code
    // expects, its steps run one by one instead. Leaves k at the segment's last step.
    void run_native(PlanNative& native, NativeSegment& seg, const std::vector<Value*>& slots, size_t& k) {
        for (const NativeSegment::GradWrite& w : seg.grad_writes) {
            const Tensor& grad = target(grad_target_of(plan.steps[w.step])).grad;
            if (w.first && (grad.defined() != w.exists || (w.exists && (grad.value().strided() || grad.value().offset != 0))))
                return run_native_step_by_step(native, seg, k);
        }
        for (int v : seg.fresh) give_fresh_bytes(e.slot(v), DEVICE_CPU);
        for (size_t j : seg.views) run_kernel(plan.steps[j], e.step_call(j));   // layouts only: no data is read
        void** pointers = e.native_pointers.data();
        for (size_t i = 0; i < seg.values.size(); ++i) {
            const Value& value = *slots[i];
            if (seg.after_grad_writes[i]) continue;
            if (!value.storage || value.strided()) return run_native_step_by_step(native, seg, k);
            pointers[i] = value.offset == 0 ? value.storage->data : value.raw();   // (raw() looks up the dtype's size)
        }
        for (const NativeSegment::GradWrite& w : seg.grad_writes) prepare_grad_write(plan.steps[w.step], e.step_call(w.step));
        for (size_t i = 0; i < seg.values.size(); ++i)
            if (seg.after_grad_writes[i]) pointers[i] = slots[i]->raw();
        if (engine_wants_before_write())   // as exec_node: observers hear of a storage before it is written
            for (size_t j = seg.begin; j < seg.end; ++j) {
                const PlanStep& s = plan.steps[j];
                int written = s.kind == STEP_GRAD_ACCUMULATE ? plan.grad_targets[s.target].grad_value : s.outputs[0];
                engine_notify_before_write(nullptr, e.slot(written).storage.get());
            }
        seg.run(pointers);
        ++native.segment_calls;
        k = seg.end - 1;
    }

    void run_native_step_by_step(PlanNative& native, const NativeSegment& seg, size_t& k) {
        ++native.fallbacks;
        run_steps(seg.begin, seg.end, k);
    }

    static int grad_target_of(const PlanStep& s) { return s.kind == STEP_GRAD_ACCUMULATE ? s.target : s.into_grad; }

    // A .grad native code writes (a product into it, or an accumulation): its bytes, as run_kernel
    // and run_accumulate give them (the .grad's when it exists, else recycled or new bytes, made
    // the .grad now).
    void prepare_grad_write(const PlanStep& s, const StepCall& x) {
        int t = grad_target_of(s);
        Output& grad_target = target(t);
        Value fresh;
        Value& out = s.kind == STEP_GRAD_ACCUMULATE ? fresh : *x.outputs[0];
        if (s.kind == STEP_GRAD_ACCUMULATE) {
            fresh.shape = x.inputs[0]->shape;
            fresh.dtype = x.inputs[0]->dtype;
        }
        if (grad_target.grad.defined()) {
            out.storage = grad_target.grad.value().storage;
            ++out.storage->version;
        } else {
            if (!take_recycled(t, out)) give_fresh_bytes(out, DEVICE_CPU);
            set_grad_after_write(t, out, s);
        }
        bind_grad(t);
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

// ============================================================================================
// [SECTION] run

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

const PlanReplayStep* plan_replay_current() { return freeze_state().replay_current; }

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
    const PlanReplayStep* current = freeze_state().replay_current;
    return current && node && current->node == node ? current->recorded_id : 0;
}

namespace {

// What an observed call runs: the plan's debug replay, compiled the first time it is needed.
Plan& debug_replay_of(Plan& plan) {
    if (!plan.debug_replay && plan.recording)
        plan.debug_replay = plan_compile_with(*plan.recording, PlanPasses{false, false, false, false, false, false}, true);
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
            if (!call.observed && !call.e.native_at.empty() && call.e.native_at[k] >= 0 && plan.native->enabled) {
                size_t segment = static_cast<size_t>(call.e.native_at[k]);
                call.run_native(*plan.native, plan.native->segments[segment], call.e.native_slots[segment], k);
                continue;
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

}  // namespace td
