// plan_timeit.h: eager against frozen, for f:timeit(n) (lua_plan.cpp). Both run on the same
// arguments from the same state, which is put back before each run and at the end: one call of
// each to compare what they produced, then `iterations` calls of each, timed in samples, then one
// call of each for its peak memory. The caller runs the calls (the Lua function, the frozen one).
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "plan.h"

namespace td {

// Runs the function once on its last arguments (raising on an error). With `returned`, the
// values of the tensors the call returned are put there.
using PlanTimeitCall = std::function<void(std::vector<Value>* returned)>;

struct PlanTimeitCalls {
    PlanTimeitCall eager, frozen;
    std::function<void()> collect_garbage;               // frees what earlier calls left (Lua's GC)
    std::function<std::shared_ptr<Plan>()> latest_plan;   // the frozen function's plan now (a call may record anew)
    // Null, or (a native plan) switches its native code on or off: the frozen column is then the
    // interpreted plan, and a third column times the native one (plan_native.h).
    std::function<void(bool on)> set_native;
};

struct PlanTiming {
    double min_us = 0, median_us = 0;   // per call, over the samples
    size_t peak_bytes = 0;              // one call's peak above what was live before it (a plan's buffers counted)
    size_t gpu_peak_bytes = 0;          // GPU memory above what was allocated before the call
};

struct PlanTimeit {
    PlanTiming eager, frozen, native;
    // The largest |eager - frozen| over the returned tensors, the targets' gradients and the
    // captured tensors; infinite when they differ in number or size, or one is NaN.
    double max_diff = 0;
    bool has_native = false;     // native was timed (calls.set_native given)
    double native_max_diff = 0;  // the same, |eager - native|
};

// `plan`: the frozen function's latest plan; `inputs`: the tensor arguments of its last call,
// which fit the plan (plan_check_inputs gave "").
PlanTimeit plan_timeit(const Plan& plan, const std::vector<Tensor>& inputs, int64_t iterations,
                       const PlanTimeitCalls& calls);

}  // namespace td
