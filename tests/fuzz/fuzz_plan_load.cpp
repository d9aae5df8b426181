// fuzz_plan_load.cpp: libFuzzer harness for the plan file loader.
//
// Any bytes are a plan file, made checksum-valid as any editor or attacker can make one (the
// header's payload size and FNV-1a checksum are rewritten to fit, so mutations reach the payload
// parser instead of stopping at the checksum): load it (plan_load_bytes), compile the plan with
// the passes the file names, and run it twice on ones of its input shapes and dtypes (the second
// run finds the .grad tensors the first one made), all under a 64 MB memory bound. An EngineError
// is the right answer to a bad file; a crash, a hang, a sanitizer report or a leak is a bug.
//
//   fuzz_plan_load -dict=tests/fuzz/plan_load.dict corpus_dir    (see tests/fuzz/CMakeLists.txt)
#include <cstdint>
#include <cstring>
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
    std::unique_ptr<Plan> plan = plan_compile(*recorded, passes);
    std::vector<Tensor> inputs;
    for (const PlanInput& in : plan->inputs) inputs.push_back(input_like(in));
    set_grad_enabled(plan->grad_mode);
    for (int run = 0; run < 2; ++run) {
        PlanRunResult result = plan_run(*plan, inputs);
        if (!result.completed) break;
    }
}

}  // namespace

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
