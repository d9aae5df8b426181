// plan_compile.cpp: freeze, the compile layer — plan_compile runs the passes over a recording:
// dead nodes, common subexpressions, constant folding, elementwise fusion, gradients in place,
// guard hoisting, liveness-based buffers (plan.h says the contract).
//
// [SECTION] passes      PassState, each pass in the order plan_compile runs them
// [SECTION] compile     plan_copy_without_steps, plan_compile_with, plan_compile
#include "plan.h"
#include "plan_internal.h"
#include "plan_log.h"

#include <algorithm>
#include <chrono>
#include <map>

namespace td {

// ============================================================================================
// [SECTION] passes
//
// Steps stay in record order (a valid order, with every in-place write where the function made
// it); the passes remove steps, replace values, merge elementwise steps into the last of them and
// move guards up. What a root's bytes hold at a step is tracked as a version: the number of
// in-place writes to that root so far, so no pass reads a value across a write to it.

namespace {

size_t value_bytes(const PlanValue& v) { return static_cast<size_t>(v.shape.numel()) * dtype_size(v.dtype); }

bool is_random(OpId op) { return op == OP_rand || op == OP_randn; }

// The root a step writes in place, or -1 (its own outputs are made, not written). `roots`: plan_value_roots.
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
    std::vector<int> roots = plan_value_roots(plan);
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
    std::vector<int> roots = plan_value_roots(plan);
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

// The candidate steps CSE has seen so far, by a hash of (op, attributes, inputs, their versions):
// a step is compared with the steps that may match it, not with every step before it (that made
// freeze quadratic on long loops). A table of buckets, each a chain through `Seen::next`, all in
// flat lists (no allocation per step); the versions of a seen step's inputs are in one flat list.
class SeenSteps {
public:
    explicit SeenSteps(size_t n_steps) {
        while (n_buckets_ < n_steps) n_buckets_ *= 2;
        bucket_first_.assign(n_buckets_, -1);
    }

    static size_t hash_of(const PlanStep& step, const std::vector<uint32_t>& versions) {
        size_t h = std::hash<int>()(static_cast<int>(step.op));
        h = h * 1000003u ^ std::hash<int>()(step.attrs);   // equal attributes share their entry
        for (int v : step.inputs) h = h * 1000003u ^ std::hash<int>()(v);
        for (uint32_t v : versions) h = h * 1000003u ^ std::hash<uint32_t>()(v);
        return h;
    }

    // The earliest seen step that computes what s does, its inputs at `versions`; -1 for none.
    int find(const Plan& plan, const PlanStep& s, const std::vector<uint32_t>& versions, size_t hash) const {
        int match = -1;
        for (int at = bucket_first_[hash & (n_buckets_ - 1)]; at >= 0; at = seen_[at].next) {
            const Seen& e = seen_[at];
            const PlanStep& o = plan.steps[e.step];
            if (o.op == s.op && o.inputs == s.inputs && o.outputs.size() == s.outputs.size() && o.attrs == s.attrs &&
                std::equal(versions.begin(), versions.end(), seen_versions_.begin() + static_cast<long>(e.versions_at)) &&
                (match < 0 || e.step < match))
                match = e.step;
        }
        return match;
    }

    void add(int step, const std::vector<uint32_t>& versions, size_t hash) {
        size_t bucket = hash & (n_buckets_ - 1);
        seen_.push_back({step, seen_versions_.size(), bucket_first_[bucket]});
        bucket_first_[bucket] = static_cast<int>(seen_.size()) - 1;
        seen_versions_.insert(seen_versions_.end(), versions.begin(), versions.end());
    }

private:
    struct Seen {
        int step;
        size_t versions_at;   // its inputs' versions: seen_versions_[versions_at ..], one per input
        int next;             // the next seen step in the same bucket, -1 at the end
    };
    std::vector<Seen> seen_;
    std::vector<uint32_t> seen_versions_;
    size_t n_buckets_ = 1024;
    std::vector<int> bucket_first_;   // hash & (n_buckets_ - 1) -> a seen index, -1 none
};

// Every read of value v outside the steps (aliases, outputs, guards) reads replace[v] instead.
void replace_values_read(Plan& plan, const std::vector<int>& replace) {
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
    SeenSteps seen(plan.steps.size());
    std::vector<uint32_t> versions;
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
            size_t hash = SeenSteps::hash_of(s, versions);
            int match = seen.find(plan, s, versions, hash);
            if (match >= 0) {
                const PlanStep& o = plan.steps[match];
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
            seen.add(static_cast<int>(k), versions, hash);
        }
        int written_root = p.written_root(s);
        if (written_root >= 0) ++version[written_root];
    }
    replace_values_read(plan, replace);
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

// What pass_fusion knows of the plan as it groups steps.
struct FusionState {
    Plan& plan;
    PassState p;
    std::vector<int> uses;                    // PassState::use_counts
    std::vector<bool> guarded;                // a guard reads the value
    std::vector<int> made_by;                 // PassState::producers
    std::vector<int> group_of;                // step -> its group (the index of the group's last step), -1
    std::vector<std::vector<int>> members;    // group id -> its steps, ascending
    // write_steps[r]: the steps that write root r in place, ascending; writes_before(r, k) counts
    // those before step k (a table of counts per step would cost steps x values: a long unrolled
    // loop made freeze quadratic in time and memory).
    std::vector<std::vector<int>> write_steps;

    explicit FusionState(Plan& pl)
        : plan(pl), p(pl), uses(p.use_counts()), guarded(pl.values.size(), false), made_by(p.producers()),
          group_of(pl.steps.size(), -1), members(pl.steps.size()), write_steps(pl.values.size()) {
        for (const PlanGuard& g : plan.guards) {
            if (g.value >= 0) guarded[g.value] = true;
            if (g.other_value >= 0) guarded[g.other_value] = true;
        }
        for (size_t k = 0; k < plan.steps.size(); ++k) {
            int w = p.written_root(plan.steps[k]);
            if (w >= 0) write_steps[w].push_back(static_cast<int>(k));
        }
    }

    long writes_before(int r, int k) const {
        const std::vector<int>& at = write_steps[r];
        return std::lower_bound(at.begin(), at.end(), k) - at.begin();
    }

    // The values a group's steps read that no step of the group makes, in order, once each.
    std::vector<int> group_inputs(const std::vector<int>& group) const {
        std::vector<int> inputs;
        for (int k : group)
            for (int v : plan.steps[k].inputs) {
                int maker = made_by[v];
                bool internal = maker >= 0 && std::find(group.begin(), group.end(), maker) != group.end();
                if (!internal && std::find(inputs.begin(), inputs.end(), v) == inputs.end()) inputs.push_back(v);
            }
        return inputs;
    }
};

// Step k's group: itself, joined by the group of each input's maker that may join (see
// pass_fusion), within MAX_FUSED_OPS and MAX_FUSED_INPUTS. Sets group_of and members.
void fuse_with_makers(FusionState& f, size_t k) {
    const Plan& plan = f.plan;
    const PlanStep& s = plan.steps[k];
    std::vector<int> group{static_cast<int>(k)};
    for (int v : s.inputs) {
        int maker = f.made_by[v];
        if (maker < 0 || f.group_of[maker] < 0 || f.uses[v] != 1 || f.guarded[v]) continue;
        const PlanValue& value = plan.values[v];
        if (value.shape != plan.values[s.outputs[0]].shape || value.dtype != plan.values[s.outputs[0]].dtype) continue;
        std::vector<int>& other = f.members[f.group_of[maker]];
        if (std::find(group.begin(), group.end(), other.front()) != group.end()) continue;   // already joined
        std::vector<int> merged = group;
        merged.insert(merged.end(), other.begin(), other.end());
        if (static_cast<int>(merged.size()) > MAX_FUSED_OPS) continue;
        std::vector<int> inputs = f.group_inputs(merged);
        if (static_cast<int>(inputs.size()) > MAX_FUSED_INPUTS) continue;
        bool unchanged = true;   // the moved ops' inputs are not written between them and here
        for (int in : inputs) {
            int r = f.p.root(in);
            for (int m : other) unchanged = unchanged && f.writes_before(r, m) == f.writes_before(r, static_cast<int>(k));
        }
        if (!unchanged) continue;
        group = merged;
    }
    std::sort(group.begin(), group.end());
    for (int m : group) f.group_of[m] = static_cast<int>(k);
    f.members[k] = group;
}

// The STEP_FUSED of group k (its steps, ascending), where its last step k was.
PlanStep fused_step(const FusionState& f, size_t k) {
    const Plan& plan = f.plan;
    const std::vector<int>& group = f.members[k];
    PlanStep fused;
    fused.kind = STEP_FUSED;
    fused.op = plan.steps[k].op;
    fused.phase = plan.steps[k].phase;
    fused.where = plan.steps[k].where;
    fused.recorded_id = plan.steps[k].recorded_id;
    fused.recorded_group = plan.steps[k].recorded_group;
    fused.inputs = f.group_inputs(group);
    fused.outputs = plan.steps[k].outputs;
    const PlanValue& result = plan.values[fused.outputs[0]];
    for (int v : fused.inputs) fused.fused.add_input_mode(static_cast<FusedInputMode>(fused_input_mode(plan.values[v], result)));
    int n_inputs = static_cast<int>(fused.inputs.size());
    for (int member : group) {
        const PlanStep& m = plan.steps[member];
        FusedOp op;
        op.op = m.op;
        op.attrs = m.attrs;
        op.recorded_id = m.recorded_id;
        op.recorded_group = m.recorded_group;
        op.where = m.where;
        for (size_t j = 0; j < m.inputs.size(); ++j) {
            int v = m.inputs[j];
            int maker = f.made_by[v];
            auto at = std::find(group.begin(), group.end(), maker);
            if (maker >= 0 && at != group.end()) op.operands[j] = n_inputs + static_cast<int>(at - group.begin());
            else op.operands[j] = static_cast<int>(std::find(fused.inputs.begin(), fused.inputs.end(), v) - fused.inputs.begin());
        }
        fused.fused.push_back(op);
    }
    return fused;
}

// Elementwise fusion: a fusable step joins the group of an input's maker when that input is the
// maker's full-shape result, read by nothing else, and nothing writes the group's inputs in
// between. A group of two or more ops becomes one STEP_FUSED where its last op was.
void pass_fusion(Plan& plan, PlanPassLog* log) {
    FusionState f(plan);
    for (size_t k = 0; k < plan.steps.size(); ++k)
        if (fusable(plan, plan.steps[k])) fuse_with_makers(f, k);
    std::vector<bool> drop(plan.steps.size(), false);
    for (size_t k = 0; k < plan.steps.size(); ++k) {
        const std::vector<int>& group = f.members[k];
        if (group.size() < 2 || f.group_of[k] != static_cast<int>(k)) continue;
        PlanStep fused = fused_step(f, k);
        for (int m : group)
            if (m != static_cast<int>(k)) drop[m] = true;
        plan.stats.fused_ops += static_cast<int>(group.size());
        ++plan.stats.fused_groups;
        if (log) {
            PlanLogEntry e;
            e.step = plan_log_step(plan.steps[k]);
            for (int m : group) e.ops.push_back(plan_log_step(plan.steps[m]));
            log->passes[LOG_FUSE].push_back(std::move(e));
        }
        plan.steps[k] = std::move(fused);
    }
    f.p.remove_steps(drop);
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

// What pass_buffers knows as it hands out buffers, step by step.
struct BufferState {
    Plan& plan;
    PassState p;
    std::vector<bool> into_grad_output;   // a kernel's output written straight into a .grad
    std::vector<int> last_use;            // root -> the last step that reads or makes it, -1 for none
    // The roots each step reads or writes last: dying[dying_at[k] .. dying_at[k + 1]) for step k
    // (one flat list, not a list per step).
    std::vector<int> dying_at, dying;
    std::multimap<size_t, int> free_buffers;   // bytes -> buffer, in the order they were freed
    std::vector<bool> handed_on;               // root whose buffer an in-place step took over

    explicit BufferState(Plan& pl) : plan(pl), p(pl) {}

    bool owns_buffer(int r) const {
        return plan.values[r].kind == VALUE_STEP && plan.values[r].alias_of < 0 && !plan.value_per_call[r] &&
               !into_grad_output[r];
    }
};

// The values whose bytes are new each call: step values off the plan's device (on their own
// device) and returned ones; and the outputs written straight into a .grad.
void mark_per_call_values(BufferState& b) {
    Plan& plan = b.plan;
    size_t n = plan.values.size();
    b.into_grad_output.assign(n, false);
    for (const PlanStep& s : plan.steps)
        if (s.kind == STEP_KERNEL && s.into_grad >= 0) b.into_grad_output[s.outputs[0]] = true;
    for (size_t v = 0; v < n; ++v)   // off the plan's device: new bytes each call, on its own device
        if (plan.values[v].kind == VALUE_STEP && plan.values[v].alias_of < 0 && plan.values[v].device != plan.device)
            plan.value_per_call[v] = true;
    for (const PlanOutput& o : plan.outputs) {
        int r = b.p.root(o.value);
        if (plan.values[r].kind == VALUE_STEP) plan.value_per_call[r] = true;
        if (o.grad_value >= 0 && plan.values[b.p.root(o.grad_value)].kind == VALUE_STEP)
            plan.value_per_call[b.p.root(o.grad_value)] = true;
    }
}

// Each root's last use, and the roots dying at each step (BufferState::dying).
void find_dying_roots(BufferState& b) {
    const Plan& plan = b.plan;
    size_t n = plan.values.size();
    b.last_use.assign(n, -1);
    for (size_t k = 0; k < plan.steps.size(); ++k) {
        const PlanStep& s = plan.steps[k];
        for (int v : s.inputs) b.last_use[b.p.root(v)] = static_cast<int>(k);
        for (int v : s.outputs) b.last_use[b.p.root(v)] = std::max(b.last_use[b.p.root(v)], static_cast<int>(k));
    }
    b.dying_at.assign(plan.steps.size() + 1, 0);
    for (size_t r = 0; r < n; ++r)
        if (b.last_use[r] >= 0) ++b.dying_at[static_cast<size_t>(b.last_use[r]) + 1];
    for (size_t k = 0; k < plan.steps.size(); ++k) b.dying_at[k + 1] += b.dying_at[k];
    b.dying.resize(static_cast<size_t>(b.dying_at.back()));
    std::vector<int> filled(b.dying_at.begin(), b.dying_at.end() - 1);
    for (size_t r = 0; r < n; ++r)
        if (b.last_use[r] >= 0)
            b.dying[static_cast<size_t>(filled[static_cast<size_t>(b.last_use[r])]++)] = static_cast<int>(r);
}

// In place: the buffer of an input of step k that dies there, has `bytes` and is read as is by an
// elementwise step (it takes the buffer over); else -1.
int buffer_of_dying_input(BufferState& b, size_t k, size_t bytes, PlanPassLog* log) {
    Plan& plan = b.plan;
    const PlanStep& s = plan.steps[k];
    if (s.outputs.size() != 1) return -1;
    for (size_t i = 0; i < s.inputs.size(); ++i) {
        int r = b.p.root(s.inputs[i]);
        bool read_as_is = true;   // no input reads r through a view (a transpose would see the writes)
        for (int other : s.inputs) read_as_is = read_as_is && (b.p.root(other) != r || other == r);
        if (!read_as_is || !b.owns_buffer(r) || b.last_use[r] != static_cast<int>(k) || b.handed_on[r] ||
            value_bytes(plan.values[r]) != bytes || !step_is_elementwise_over(plan, s, i))
            continue;
        b.handed_on[r] = true;
        ++plan.stats.inplace;
        if (log) {
            PlanLogEntry e;
            e.step = plan_log_step(s);
            e.reason = LOG_OVER_INPUT;
            e.value = s.inputs[i];
            log->passes[LOG_INPLACE].push_back(std::move(e));
        }
        return plan.value_buffer[r];
    }
    return -1;
}

// Reuse: the best fit among the free buffers, the smallest that holds `bytes`, else the largest
// (grown); among buffers of one size, the one freed first. -1 when none is free.
int take_free_buffer(BufferState& b, size_t bytes) {
    if (b.free_buffers.empty()) return -1;
    auto best = b.free_buffers.lower_bound(bytes);
    if (best == b.free_buffers.end()) best = b.free_buffers.lower_bound(std::prev(b.free_buffers.end())->first);
    int chosen = best->second;
    b.free_buffers.erase(best);
    b.plan.buffer_bytes[chosen] = std::max(b.plan.buffer_bytes[chosen], bytes);
    return chosen;
}

// The buffers' sizes and the bytes new each call (returned values, gradients created when .grad
// is nil), in plan.stats; each value takes its root's buffer.
void count_buffer_bytes(BufferState& b) {
    Plan& plan = b.plan;
    for (size_t v = 0; v < plan.values.size(); ++v) {
        int r = b.p.root(static_cast<int>(v));
        if (plan.value_buffer[r] >= 0) plan.value_buffer[v] = plan.value_buffer[r];
        if (plan.value_per_call[r] && plan.values[v].alias_of < 0) plan.stats.per_call_bytes += value_bytes(plan.values[v]);
    }
    for (const PlanStep& s : plan.steps)   // gradients created when .grad is nil
        if (s.into_grad >= 0 || s.kind == STEP_GRAD_ACCUMULATE) {
            int target = s.into_grad >= 0 ? s.into_grad : s.target;
            plan.stats.per_call_bytes += value_bytes(plan.values[plan.grad_targets[target].grad_value]);
        }
    plan.stats.buffers = static_cast<int>(plan.buffer_bytes.size());
    plan.stats.buffer_bytes = 0;
    for (size_t bytes : plan.buffer_bytes) plan.stats.buffer_bytes += bytes;
}

// The log: each buffer and the values that own it in turn, in the order they got it.
void log_buffers(const BufferState& b, PlanPassLog& log) {
    const Plan& plan = b.plan;
    std::vector<PlanLogEntry>& entries = log.passes[LOG_REUSE];
    entries.assign(plan.buffer_bytes.size(), PlanLogEntry());
    for (size_t i = 0; i < entries.size(); ++i) {
        entries[i].buffer = static_cast<int>(i);
        entries[i].bytes = plan.buffer_bytes[i];
    }
    for (const PlanStep& s : plan.steps)
        for (int out : s.outputs)
            if (b.owns_buffer(out) && plan.value_buffer[out] >= 0) {
                std::vector<int>& values = entries[static_cast<size_t>(plan.value_buffer[out])].values;
                if (values.empty() || values.back() != out) values.push_back(out);
            }
    log.buffers = plan.stats.buffers;
    log.unshared_bytes = plan.stats.unshared_bytes;
    log.buffer_bytes = plan.stats.buffer_bytes;
}

// Buffers: each value made by a step gets bytes, shared with its views and in-place outputs.
// Returned values get new bytes every call; gradients written in place use the .grad's. With
// reuse, a buffer whose values are all dead is given to the next value that fits (best fit);
// with in-place, an elementwise step may write over an input that dies at that step.
void pass_buffers(Plan& plan, bool reuse, bool inplace, PlanPassLog* log) {
    BufferState b(plan);
    size_t n = plan.values.size();
    plan.value_buffer.assign(n, -1);
    plan.value_per_call.assign(n, false);
    plan.buffer_bytes.clear();
    mark_per_call_values(b);
    find_dying_roots(b);
    b.handed_on.assign(n, false);
    for (size_t k = 0; k < plan.steps.size(); ++k) {
        for (int out : plan.steps[k].outputs) {
            if (!b.owns_buffer(out) || plan.value_buffer[out] >= 0) continue;
            size_t bytes = value_bytes(plan.values[out]);
            plan.stats.unshared_bytes += bytes;
            int chosen = inplace ? buffer_of_dying_input(b, k, bytes, log) : -1;
            if (chosen < 0 && reuse) chosen = take_free_buffer(b, bytes);
            if (chosen < 0) {
                chosen = static_cast<int>(plan.buffer_bytes.size());
                plan.buffer_bytes.push_back(bytes);
            }
            plan.value_buffer[out] = chosen;
        }
        for (int at = b.dying_at[k]; at < b.dying_at[k + 1]; ++at) {
            int r = b.dying[static_cast<size_t>(at)];
            if (plan.value_buffer[r] >= 0 && b.owns_buffer(r) && !b.handed_on[r])
                b.free_buffers.emplace(plan.buffer_bytes[plan.value_buffer[r]], plan.value_buffer[r]);
        }
    }
    count_buffer_bytes(b);
    if (log) log_buffers(b, *log);
}

}  // namespace

// ============================================================================================
// [SECTION] compile

namespace {

// How PLAN_FIELDS' `copy` column copies a field.
template <class T>
void copy_field_copied(T& to, const T& from) {
    to = from;
}
template <class T>
void copy_field_made(T&, const T&) {}

}  // namespace

std::unique_ptr<Plan> plan_copy_without_steps(const Plan& recorded, bool keep_groups) {
    auto plan = std::make_unique<Plan>();
#define COPY_FIELD(name, file, since, copy) copy_field_##copy(plan->name, recorded.name);
    PLAN_FIELDS(COPY_FIELD)
#undef COPY_FIELD
    if (keep_groups) plan->groups = plan_unpacked_groups(recorded);
    return plan;
}

namespace {

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

}  // namespace

// The first dead-node elimination runs on the recording, so dropped steps are not copied.
std::unique_ptr<Plan> plan_compile_with(const Plan& recorded, const PlanPasses& passes, bool keep_groups,
                                        PlanPassLog* log) {
    auto began = std::chrono::steady_clock::now();
    std::unique_ptr<Plan> plan = plan_copy_without_steps(recorded, keep_groups);
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
    std::vector<int> roots = plan_value_roots(*plan);
    for (size_t k = 0; k < plan->steps.size() && plan->first_effect_step < 0; ++k) {
        const PlanStep& s = plan->steps[k];
        if (s.kind != STEP_GUARD && step_is_effect(*plan, roots, s)) plan->first_effect_step = static_cast<int>(k);
    }
    plan->compiled = true;
    st.compile_seconds = plan_seconds_since(began);
    return plan;
}

// The plan; its debug replay (the recording compiled with no pass, its group steps kept: plan.h)
// is compiled when an observed call first needs it, and its buffers allocated then.
std::unique_ptr<Plan> plan_compile(std::shared_ptr<const Plan> recorded, const PlanPasses& passes, PlanPassLog* log) {
    if (!recorded || recorded->compiled) engine_fail("freeze: plan_compile needs a recorded plan, not a compiled one");
    std::unique_ptr<Plan> plan = plan_compile_with(*recorded, passes, false, log);
    plan->recording = std::move(recorded);
    return plan;
}

}  // namespace td
