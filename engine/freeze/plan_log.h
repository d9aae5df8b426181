// plan_log.h: what each pass of the freeze compiler decided, for people (`:plan f --passes`,
// f:passes(), the viewer's pass-by-pass mode; docs/freeze.md, "Pass by pass").
//
// plan_compile(recorded, passes, &log) fills a PlanPassLog as the passes run: only what they
// decide anyway (a step dropped, a result reused, a group fused, a buffer shared), one entry per
// decision, so the log is O(steps) and costs nothing when no one asks for it (log == nullptr, the
// default: a frozen function does not keep one; :plan --passes compiles the recording again with
// a log). Steps are named as the user knows them: the recorded node id, its op and its line.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "plan.h"

namespace td {

// The passes in the order they are taught (and shown). The compiler runs dce first and again
// after cse and fold, gradients in place before fusion, and elementwise in place with reuse.
enum PlanLogPass : uint8_t { LOG_DCE, LOG_CSE, LOG_FOLD, LOG_FUSE, LOG_INPLACE, LOG_REUSE, LOG_PASS_COUNT };

const char* plan_log_pass_name(int pass);            // "dce", ... "reuse"
int plan_log_pass_find(const std::string& name);     // LOG_* for a name, -1 when none has it
std::string plan_log_pass_names();                   // "dce, cse, fold, fuse, inplace, reuse"

// A step as the user knows it: the node it was recorded from and its line.
struct PlanLogStep {
    int64_t node = 0;             // recorded node id (0: a guard)
    StepKind kind = STEP_KERNEL;
    OpId op = OP_clone;
    int target = -1;              // GRAD_*: the grad target (its .grad)
    Phase phase = PHASE_FORWARD;
    SourceLoc where;
};
PlanLogStep plan_log_step(const PlanStep& step);

enum PlanLogReason : uint8_t {
    LOG_DEAD_UNREAD,       // dce: nothing reads what it makes (first sweep, on the recording)
    LOG_DEAD_AFTER,        // dce: its readers went (merged by cse, run by fold)
    LOG_INTO_GRAD,         // inplace: an mm/bmm writes straight into a .grad (`other`: the accumulation dropped)
    LOG_INTO_SUM,          // inplace: an mm/bmm adds into the sum another step holds (`value`: the sum)
    LOG_OVER_INPUT,        // inplace: an elementwise step writes over its input `value`, which dies there
};

struct PlanLogEntry {
    PlanLogStep step;                // dce, fold: the step; cse: the dropped step; inplace: the writer;
                                     // fuse: the group's last op (where the group runs)
    PlanLogStep other;               // cse: the step whose result it reuses; LOG_INTO_*: the add it replaces
    PlanLogReason reason = LOG_DEAD_UNREAD;
    int value = -1;                  // LOG_INTO_SUM, LOG_OVER_INPUT: the value written into (plan value id)
    std::vector<PlanLogStep> ops;    // fuse: the group's ops, in order
    int buffer = -1;                 // reuse: the buffer
    size_t bytes = 0;                // reuse: its size
    std::vector<int> values;         // reuse: the values that share it, in the order they get it
};

struct PlanPassLog {
    size_t recorded_steps = 0;       // the recording's steps
    size_t steps = 0;                // the compiled plan's
    std::vector<PlanLogEntry> passes[LOG_PASS_COUNT];
    bool ran[LOG_PASS_COUNT] = {};   // the pass was on (fuse also needs a CPU plan)
    bool on_gpu = false;             // the plan runs on the GPU: fuse was on but did not run
    int buffers = 0;                 // after reuse
    size_t unshared_bytes = 0;       // the buffers with one per value ...
    size_t buffer_bytes = 0;         // ... and as shared
};

// The log said for people: the recorded graph's steps, then per pass (all, or only `pass`) what it
// did, in node ids, ops and lines, with counts; lists longer than `max_lines` end with a count of
// the rest. `plan` is the compiled plan the log was made with (for value names).
std::string plan_log_describe(const Plan& plan, const PlanPassLog& log, int pass = -1, size_t max_lines = 12);

// What a pass did, counted: "2 steps dropped", "2 groups of 6 elementwise ops, each one loop".
std::string plan_log_heading(const PlanPassLog& log, int pass);

// One decision said for people: "#9 tanh (step.lua:3) reuses #7 tanh's result".
std::string plan_log_describe_entry(const Plan& plan, int pass, const PlanLogEntry& entry);

// "#12 mm (step.lua:4)", "w1.grad += (step.lua:5)", "guard (step.lua:6)".
std::string plan_log_step_text(const Plan& plan, const PlanLogStep& step, bool with_line = true);

}  // namespace td
