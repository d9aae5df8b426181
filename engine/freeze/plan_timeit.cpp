// plan_timeit.cpp: eager against frozen (plan_timeit.h): the state a call changes, saved and put
// back; the results of both compared; calls timed in samples; one call's peak memory.
#include "plan_timeit.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "device.h"

namespace td {

namespace {

// The state a call can change: captured tensors' bytes, and the .grad of each grad target.
struct Snapshot {
    std::vector<std::pair<Value, Value>> bytes;   // (a tensor, a copy of its elements)
    std::vector<std::pair<Output*, Tensor>> grads;
    std::vector<Value> grad_bytes;

    static Value copy_of(const Value& v) {   // any layout (a captured view too), on its device
        Value copy = value_new(v.shape, v.dtype, v.device());
        value_copy_elements(copy, v);
        return copy;
    }
    void take(const Plan& plan, const std::vector<Tensor>& inputs) {
        for (const PlanCaptured& c : plan.captured) bytes.emplace_back(plan_captured_value(c), copy_of(plan_captured_value(c)));
        for (const GradTarget& t : plan.grad_targets) {
            Node* node = t.kind == VALUE_INPUT ? inputs[t.index].node.get() : plan.captured[t.index].tensor.node.get();
            Output* out = &node->outputs[t.output];
            grads.emplace_back(out, out->grad);
            grad_bytes.push_back(out->grad.defined() ? copy_of(out->grad.value()) : Value());
        }
    }
    void restore() {
        for (auto& b : bytes) value_copy_elements(b.first, b.second);
        for (size_t i = 0; i < grads.size(); ++i) {
            grads[i].first->grad = grads[i].second;
            if (grads[i].second.defined()) value_copy_elements(grads[i].second.value(), grad_bytes[i]);
        }
    }
};

// Everything a call produced that eager and frozen must agree on: the tensors it returned, the
// gradients of the targets and the captured tensors (updated in place or not).
std::vector<Value> call_results(const PlanTimeitCall& call, const Plan& plan, const std::vector<Tensor>& inputs) {
    std::vector<Value> values;
    call(&values);
    for (const GradTarget& t : plan.grad_targets) {
        Node* node = t.kind == VALUE_INPUT ? inputs[t.index].node.get() : plan.captured[t.index].tensor.node.get();
        // a copy: the next call from the restored state writes into this same .grad tensor
        if (node->outputs[t.output].grad.defined()) values.push_back(Snapshot::copy_of(node->outputs[t.output].grad.value()));
    }
    for (const PlanCaptured& c : plan.captured) {
        const Value& v = plan_captured_value(c);
        values.push_back(Snapshot::copy_of(v));
    }
    return values;
}

// The largest |a - b| element by element (infinite when the lists differ in number or size).
double max_difference(const std::vector<Value>& eager, const std::vector<Value>& frozen) {
    double max_diff = 0;
    bool same_count = eager.size() == frozen.size();
    for (size_t i = 0; same_count && i < eager.size(); ++i) {
        if (eager[i].numel() != frozen[i].numel()) {
            same_count = false;
            break;
        }
        Value eager_host = value_to_host(eager[i]), frozen_host = value_to_host(frozen[i]);
        for (int64_t k = 0; k < eager[i].numel(); ++k) {
            double d = std::fabs(value_get(eager_host, k) - value_get(frozen_host, k));
            if (std::isnan(d)) d = INFINITY;
            max_diff = std::max(max_diff, d);
        }
    }
    return same_count ? max_diff : INFINITY;
}

double now_seconds() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Times `iterations` calls in samples; the state is restored before each sample. Each sample waits
// for the GPU's queued work before and after (no-op without a GPU), so GPU time is counted.
PlanTiming time_calls(const PlanTimeitCall& call, int64_t iterations, Snapshot& snapshot) {
    PlanTiming t;
    std::vector<double> samples;
    int64_t per_sample = std::max<int64_t>(1, iterations / 10);
    for (int64_t done = 0; done < iterations; done += per_sample) {
        snapshot.restore();
        cuda_synchronize();
        double t0 = now_seconds();
        for (int64_t i = 0; i < per_sample; ++i) call(nullptr);
        cuda_synchronize();
        samples.push_back((now_seconds() - t0) / static_cast<double>(per_sample) * 1e6);
    }
    std::sort(samples.begin(), samples.end());
    t.min_us = samples.front();
    t.median_us = samples[samples.size() / 2];
    return t;
}

// Peak bytes of one call above what was live before it, plus `fixed_bytes`. Before it: a full
// collection (garbage of earlier calls must not be freed in the middle of it) and the captured
// leaves let go of their latest backward group (eager keeps that history alive between calls,
// e.g. a gradient's add_ holding the gradient it added; the call re-makes it).
size_t peak_of_one_call(const PlanTimeitCalls& calls, const PlanTimeitCall& call, Snapshot& snapshot,
                        size_t fixed_bytes, size_t* gpu_peak_bytes) {
    snapshot.restore();
    for (const PlanCaptured& c : calls.latest_plan()->captured)
        if (c.tensor.node->group_records) c.tensor.node->group_records->backward_nodes.clear();
    calls.collect_garbage();
    calls.collect_garbage();
    size_t live = storage_bytes_live();
    storage_peak_reset();
    size_t gpu_live = cuda_memory_allocated();
    cuda_reset_peak_memory();
    call(nullptr);
    size_t peak = storage_bytes_peak() - live + fixed_bytes;
    *gpu_peak_bytes = cuda_max_memory_allocated() - gpu_live;
    calls.collect_garbage();
    return peak;
}

}  // namespace

PlanTimeit plan_timeit(const Plan& plan, const std::vector<Tensor>& inputs, int64_t iterations,
                       const PlanTimeitCalls& calls) {
    Snapshot snapshot;
    snapshot.take(plan, inputs);
    PlanTimeit result;
    // max |diff|: one eager and one frozen call from the same state.
    std::vector<Value> eager = call_results(calls.eager, plan, inputs);
    result.has_native = static_cast<bool>(calls.set_native);
    if (result.has_native) {   // native first, then the interpreted plan for the frozen column
        snapshot.restore();
        calls.set_native(true);
        result.native_max_diff = max_difference(eager, call_results(calls.frozen, plan, inputs));
        result.native = time_calls(calls.frozen, iterations, snapshot);
        calls.set_native(false);
    }
    snapshot.restore();
    std::vector<Value> frozen = call_results(calls.frozen, plan, inputs);
    result.max_diff = max_difference(eager, frozen);

    result.eager = time_calls(calls.eager, iterations, snapshot);
    result.frozen = time_calls(calls.frozen, iterations, snapshot);
    std::shared_ptr<Plan> compiled = calls.latest_plan();
    bool gpu_plan = compiled->device != DEVICE_CPU;
    result.eager.peak_bytes = peak_of_one_call(calls, calls.eager, snapshot, 0, &result.eager.gpu_peak_bytes);
    result.frozen.peak_bytes = peak_of_one_call(calls, calls.frozen, snapshot, gpu_plan ? 0 : compiled->stats.buffer_bytes,
                                                &result.frozen.gpu_peak_bytes);
    if (gpu_plan) result.frozen.gpu_peak_bytes += compiled->stats.buffer_bytes;   // its buffers, allocated once, on the GPU
    if (result.has_native) {
        calls.set_native(true);
        result.native.peak_bytes = peak_of_one_call(calls, calls.frozen, snapshot, compiled->stats.buffer_bytes,
                                                    &result.native.gpu_peak_bytes);
    }
    snapshot.restore();
    return result;
}

}  // namespace td
