// fuzz_plan_load.cpp: libFuzzer harness for the plan file loader.
//
// Any bytes are a plan file, made checksum-valid as any editor or attacker can make one (the
// header's payload size and FNV-1a checksum are rewritten to fit, so mutations reach the payload
// parser instead of stopping at the checksum): load it (plan_load_bytes), compile the plan with
// the passes the file names, and run it twice on ones of its input shapes and dtypes (the second
// run finds the .grad tensors the first one made), all under a 64 MB memory bound. An EngineError
// is the right answer to a bad file; a crash, a hang, a sanitizer report or a leak is a bug.
//
// Half the mutations are libFuzzer's own, on the bytes; the other half decode a plan that loads
// and change it as a plan (LLVMFuzzerCustomMutator): an op swapped for another of the same shape
// of call, an attribute set to an extreme, an input rewired to another value of its shape, a
// guard's expectation flipped, the passes switched. Those reach past the parser into the passes
// and kernels far more often than byte changes, which rarely keep a 15 KB plan consistent.
//
//   fuzz_plan_load -dict=tests/fuzz/plan_load.dict corpus_dir    (see tests/fuzz/CMakeLists.txt)
#include <cstdint>
#include <cmath>
#include <cstring>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "plan.h"

using namespace td;

namespace {

constexpr size_t FUZZ_MAX_BYTES = size_t(64) << 20;

// An input of ones: a valid class label and index (they are 1-based) as well as a number, so that
// runs get past the losses and gathers into backward and the optimizer steps.
Tensor input_like(const PlanInput& in) {
    Tensor t = ops::create(OP_ones, in.shape, in.dtype);
    t.node->outputs[t.output].requires_grad = in.requires_grad;
    return t;
}

constexpr size_t HEADER_BYTES = 32;   // magic, version, flags, payload size (u64 at 16), checksum (u64 at 24)

// The payload size and checksum the header should hold, written into it (plan_file.cpp's format).
void make_checksum_valid(std::string& bytes) {
    if (bytes.size() < HEADER_BYTES || bytes.compare(0, 6, "TDPLAN") != 0) return;
    uint64_t payload = bytes.size() - HEADER_BYTES, hash = 1469598103934665603ull;
    for (size_t i = HEADER_BYTES; i < bytes.size(); ++i) {
        hash ^= static_cast<unsigned char>(bytes[i]);
        hash *= 1099511628211ull;
    }
    std::memcpy(&bytes[16], &payload, 8);
    std::memcpy(&bytes[24], &hash, 8);
}

void load_compile_run(const std::string& bytes) {
    PlanPasses passes;
    PlanLoadOptions options;
    options.max_bytes = FUZZ_MAX_BYTES;
    std::unique_ptr<Plan> recorded = plan_load_bytes(bytes, "fuzz.tdp", &passes, options);
    std::unique_ptr<Plan> plan = plan_compile(std::move(recorded), passes);
    std::vector<Tensor> inputs;
    for (const PlanInput& in : plan->inputs) inputs.push_back(input_like(in));
    set_grad_enabled(plan->grad_mode);
    for (int run = 0; run < 2; ++run) {
        PlanRunResult result = plan_run(*plan, inputs);
        if (!result.completed) break;
    }
}

}  // namespace

// ============================================================================================
// The plan-level mutator.

namespace {

int64_t pick(std::mt19937_64& rng, int64_t n) { return n > 0 ? static_cast<int64_t>(rng() % static_cast<uint64_t>(n)) : 0; }

int64_t extreme_int(std::mt19937_64& rng) {
    const int64_t values[] = {0, 1, 2, 3, -1, -2, 5, 6, 7, 1 << 30, INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN};
    return rng() % 3 == 0 ? pick(rng, 9) - 2 : values[pick(rng, std::size(values))];
}

double extreme_number(std::mt19937_64& rng) {
    const double values[] = {0, 1, -1, 0.5, 2, 1e300, -1e300, INFINITY, -INFINITY, NAN, 0x1p63, 1e-310};
    return values[pick(rng, std::size(values))];
}

void mutate_attrs(OpAttrs& a, std::mt19937_64& rng) {
    switch (pick(rng, 12)) {
        case 0: a.dim = static_cast<int>(extreme_int(rng)); break;
        case 1: a.dim2 = static_cast<int>(extreme_int(rng)); break;
        case 2: (rng() % 2 ? a.kernel_h : a.kernel_w) = static_cast<int>(extreme_int(rng)); break;
        case 3:
            if (rng() % 4 == 0) a.ceil_mode = !a.ceil_mode;
            else (rng() % 2 ? a.stride_h : a.stride_w) = static_cast<int>(extreme_int(rng));
            break;
        case 4:
            switch (pick(rng, 5)) {
                case 0: a.padding_h = static_cast<int>(extreme_int(rng)); break;
                case 1: a.padding_w = static_cast<int>(extreme_int(rng)); break;
                case 2: a.dilation_h = static_cast<int>(extreme_int(rng)); break;
                case 3: a.dilation_w = static_cast<int>(extreme_int(rng)); break;
                default: a.groups = static_cast<int>(extreme_int(rng)); break;
            }
            break;
        case 5: (rng() % 2 ? a.start : a.length) = extreme_int(rng); break;
        case 6: (rng() % 3 == 0 ? a.lo : rng() % 2 ? a.hi : a.scalar) = extreme_number(rng); break;
        case 7: a.all = !a.all; break;
        case 8: a.keepdim = !a.keepdim; break;
        case 9: (rng() % 2 ? a.trans_a : a.trans_b) ^= true; break;
        case 10: a.dtype = static_cast<DType>(pick(rng, 3)); break;
        default:
            if (a.shape.ndim > 0) a.shape.dims[pick(rng, a.shape.ndim)] = pick(rng, 6) - 1;
            else a.reduction = a.reduction == REDUCTION_SUM ? REDUCTION_MEAN : REDUCTION_SUM;
            break;
    }
}

// One change to a plan that loaded; false when there was nothing to change.
bool mutate_plan(Plan& plan, PlanPasses& passes, std::mt19937_64& rng) {
    std::vector<size_t> kernels;
    for (size_t k = 0; k < plan.steps.size(); ++k)
        if (plan.steps[k].kind == STEP_KERNEL) kernels.push_back(k);
    int what = static_cast<int>(pick(rng, 8));
    if (kernels.empty() && what < 5) what = 5;
    PlanStep* step = kernels.empty() ? nullptr : &plan.steps[kernels[pick(rng, kernels.size())]];
    switch (what) {
        case 0: case 1: {   // another op with the same number of inputs
            std::vector<OpId> same;
            for (int op = 0; op < OP_COUNT; ++op)
                if (op_table[op].n_inputs == op_info(step->op).n_inputs && !(op_table[op].flags & OPF_CUSTOM))
                    same.push_back(static_cast<OpId>(op));
            step->op = same[pick(rng, same.size())];
            return true;
        }
        case 2: case 3: mutate_attrs(plan_step_own_attrs(plan, *step), rng); return true;
        case 4: {   // an input rewired to an earlier value of the same shape and dtype
            if (step->inputs.empty()) return false;
            int& in = step->inputs[pick(rng, step->inputs.size())];
            std::vector<int> like;
            for (int v = 0; v < static_cast<int>(plan.values.size()); ++v)
                if (v != in && plan.values[v].shape == plan.values[in].shape && plan.values[v].dtype == plan.values[in].dtype)
                    like.push_back(v);
            if (like.empty()) return false;
            in = like[pick(rng, like.size())];
            return true;
        }
        case 5: {   // a guard's expectation
            if (plan.guards.empty()) return false;
            PlanGuard& g = plan.guards[pick(rng, plan.guards.size())];
            if (g.kind == GUARD_GRAD_STATE) g.defined = !g.defined;
            else if (g.kind == GUARD_COMPARE) (rng() % 2 ? g.truth : g.swapped) ^= true;
            else if (!g.expected.empty()) g.expected[pick(rng, g.expected.size())] = extreme_number(rng);
            return true;
        }
        case 6: {   // the passes
            bool* switches[] = {&passes.dce, &passes.cse, &passes.fold, &passes.fuse, &passes.inplace, &passes.reuse};
            *switches[pick(rng, 6)] ^= true;
            return true;
        }
        default: {   // a step dropped
            if (plan.steps.empty()) return false;
            plan.steps.erase(plan.steps.begin() + pick(rng, plan.steps.size()));
            return true;
        }
    }
}

}  // namespace

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned int seed) {
    std::mt19937_64 rng(seed);
    if (rng() % 2 == 0) return LLVMFuzzerMutate(data, size, max_size);
    try {
        std::string bytes(reinterpret_cast<const char*>(data), size);
        make_checksum_valid(bytes);
        PlanPasses passes;
        PlanLoadOptions options;
        options.max_bytes = FUZZ_MAX_BYTES;
        std::unique_ptr<Plan> plan = plan_load_bytes(bytes, "fuzz.tdp", &passes, options);
        int changes = 1 + static_cast<int>(rng() % 3);
        bool changed = false;
        for (int i = 0; i < changes; ++i) changed = mutate_plan(*plan, passes, rng) || changed;
        std::string mutated = plan_save_bytes(*plan, passes);
        if (changed && mutated.size() <= max_size) {
            std::memcpy(data, mutated.data(), mutated.size());
            return mutated.size();
        }
    } catch (const EngineError&) {
    }
    return LLVMFuzzerMutate(data, size, max_size);
}

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    memory_set_limit_bytes(4 * FUZZ_MAX_BYTES);   // a second fence: storage beyond the plan's bound is refused
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    try {
        std::string bytes(reinterpret_cast<const char*>(data), size);
        make_checksum_valid(bytes);
        load_compile_run(bytes);
    } catch (const EngineError&) {
    }
    set_grad_enabled(true);
    return 0;
}
