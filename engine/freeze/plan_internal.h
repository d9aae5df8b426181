// plan_internal.h: what the freeze room's files share (plan.cpp, plan_record.cpp, plan_compile.cpp,
// plan_run.cpp, plan_describe.cpp) and no one else includes: value roots, the compile the debug
// replay needs, and the run-time state of a compiled plan (PlanExec). plan.h is the contract.
#pragma once

#include <chrono>
#include <utility>
#include <vector>

#include "backend.h"
#include "device.h"
#include "elementwise.h"
#include "plan.h"

namespace td {

struct PlanPassLog;

// The root of every value: the value whose bytes it shares, following alias_of to the end of the
// chain. O(values) for all of them: a loop of in-place ops makes a chain as long as the loop, and
// walking it per lookup made freeze quadratic (x:add_(w) 20,000 times took 11 s to compile).
std::vector<int> plan_value_roots(const Plan& plan);

double plan_seconds_since(std::chrono::steady_clock::time_point start);

// The most ops, and inputs, of one fused step (pass_fusion makes them, run_fused runs them).
constexpr int MAX_FUSED_OPS = 16;
constexpr int MAX_FUSED_INPUTS = 8;

// `recorded` with `passes` applied; with keep_groups (the debug replay), a STEP_GROUP_DONE step
// where each backward group ended (plan_compile.cpp).
std::unique_ptr<Plan> plan_compile_with(const Plan& recorded, const PlanPasses& passes, bool keep_groups,
                                        PlanPassLog* log = nullptr);

// The freeze room's mutable state, one for the process (the Lua thread's): the recording in
// progress (plan_record.cpp: one at a time) and the observed step in progress (plan_run.cpp,
// plan_replay_current). Null when there is none.
struct Recorder;
struct FreezeState {
    Recorder* recorder = nullptr;
    PlanReplayStep* replay_current = nullptr;
};
FreezeState& freeze_state();

// A plan file's payload (what plan_save_bytes writes after the header), and a reader of it that
// runs no check of the plan (check_plan): only for tests of the field lists (plan.h), which change
// fields to values no loaded plan may have. Everything else loads with plan_load_bytes.
std::string plan_payload_bytes(const Plan& recorded, const PlanPasses& passes);
std::unique_ptr<Plan> plan_payload_read(const std::string& payload, PlanPasses* passes);

// `recorded` without its steps (plan_compile_with copies those it keeps): the fields PLAN_FIELDS
// says are copied; `groups` too with keep_groups (only the debug replay's steps announce groups),
// unpacked (plan_compile.cpp).
std::unique_ptr<Plan> plan_copy_without_steps(const Plan& recorded, bool keep_groups);

// What a step does, as :plan's step list says it ("#57 = fused(#54, #55): t1=add(#54, #55); tanh(t1)").
std::string plan_step_text(const Plan& plan, const PlanStep& s);

// ---------------------------------------------------------------------------------------------
// The run-time state of a compiled plan (plan_run.cpp builds and runs it; plan_graph_stats reads it).
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
    // A native plan's segments (plan_native.h): native_at[k] is the one that starts at step k, or -1;
    // native_pointers the pointer table a segment's function is given (sized for the largest).
    std::vector<int> native_at;
    std::vector<void*> native_pointers;
    std::vector<std::vector<Value*>> native_slots;   // per segment: the slot of each of its values

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

}  // namespace td
