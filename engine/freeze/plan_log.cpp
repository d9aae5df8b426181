// plan_log.cpp: the freeze compiler's per-pass log said for people (plan_log.h). The passes
// themselves (plan_compile.cpp) fill the log; this file names passes and steps and writes the text
// of `:plan f --passes`.
#include "plan_log.h"

#include <cstdio>

namespace td {

namespace {

const char* const PASS_NAMES[LOG_PASS_COUNT] = {"dce", "cse", "fold", "fuse", "inplace", "reuse"};

std::string plural(size_t n, const char* one, const char* many) {
    return std::to_string(n) + " " + (n == 1 ? one : many);
}

// What one decision of `pass` says.
std::string entry_text_of(const Plan& plan, int pass, const PlanLogEntry& e) {
    switch (pass) {
        case LOG_DCE:
            return plan_log_step_text(plan, e.step) +
                   (e.reason == LOG_DEAD_AFTER ? ": what read it was merged or folded away" : ": nothing reads it");
        case LOG_CSE:
            return plan_log_step_text(plan, e.step) + " reuses " + plan_log_step_text(plan, e.other, false) + "'s result" +
                   (e.other.where.line && e.other.where.line != e.step.where.line
                        ? " (" + source_loc_str(e.other.where) + ")" : "");
        case LOG_FOLD: return plan_log_step_text(plan, e.step) + ": run once, now, its result kept as a constant";
        case LOG_FUSE: {
            std::string ops, lines;
            for (size_t i = 0; i < e.ops.size(); ++i) {
                ops += (i ? ", " : "") + plan_log_step_text(plan, e.ops[i], false);
                std::string line = e.ops[i].where.line ? source_loc_str(e.ops[i].where) : "";
                if (!line.empty() && lines.find(line) == std::string::npos) lines += (lines.empty() ? "" : ", ") + line;
            }
            return std::to_string(e.ops.size()) + " ops in one loop: " + ops + (lines.empty() ? "" : "  (" + lines + ")");
        }
        case LOG_INPLACE: {
            std::string writer = plan_log_step_text(plan, e.step);
            if (e.reason == LOG_INTO_GRAD)
                return writer + " writes straight into " + plan_value_name(plan, e.value) + " (no buffer, no separate +=)";
            if (e.reason == LOG_INTO_SUM)
                return writer + " adds into " + plan_value_name(plan, e.value) + "'s buffer (no separate " +
                       plan_log_step_text(plan, e.other, false) + ")";
            return writer + " writes over its input " + plan_value_name(plan, e.value) + ", which dies there";
        }
        case LOG_REUSE: {
            std::string values;
            for (size_t i = 0; i < e.values.size(); ++i) values += (i ? ", " : "") + plan_value_name(plan, e.values[i]);
            return "buf" + std::to_string(e.buffer) + " (" + plan_bytes_text(e.bytes) + "): " + values;
        }
    }
    return "";
}

// The pass's heading: what it did, counted.
std::string heading_of(const PlanPassLog& log, int pass) {
    const std::vector<PlanLogEntry>& entries = log.passes[pass];
    size_t n = entries.size();
    static const char* const NOTHING[LOG_PASS_COUNT] = {"nothing dropped", "nothing merged", "nothing folded",
                                                        "nothing fused", "nothing written in place", "no buffers"};
    if (n == 0) return NOTHING[pass];
    switch (pass) {
        case LOG_DCE: return plural(n, "step", "steps") + " dropped";
        case LOG_CSE: return plural(n, "step reuses", "steps reuse") + " an earlier step's result";
        case LOG_FOLD: return plural(n, "step", "steps") + " run at compile time";
        case LOG_FUSE: {
            size_t ops = 0;
            for (const PlanLogEntry& e : entries) ops += e.ops.size();
            return plural(n, "group", "groups") + " of " + plural(ops, "elementwise op", "elementwise ops") + ", each one loop";
        }
        case LOG_INPLACE: return plural(n, "step writes", "steps write") + " into memory that is there already";
        case LOG_REUSE: {
            size_t values = 0, shared = 0;
            for (const PlanLogEntry& e : entries) {
                values += e.values.size();
                shared += e.values.size() > 1;
            }
            return plural(values, "value", "values") + " in " + plural(entries.size(), "buffer", "buffers") + " (" +
                   std::to_string(shared) + " shared): " + plan_bytes_text(log.unshared_bytes) + " with one per value -> " +
                   plan_bytes_text(log.buffer_bytes);
        }
    }
    return "";
}

}  // namespace

std::string plan_log_heading(const PlanPassLog& log, int pass) { return heading_of(log, pass); }

std::string plan_log_describe_entry(const Plan& plan, int pass, const PlanLogEntry& entry) {
    return entry_text_of(plan, pass, entry);
}

const char* plan_log_pass_name(int pass) { return pass >= 0 && pass < LOG_PASS_COUNT ? PASS_NAMES[pass] : "?"; }

int plan_log_pass_find(const std::string& name) {
    for (int p = 0; p < LOG_PASS_COUNT; ++p)
        if (name == PASS_NAMES[p]) return p;
    return -1;
}

std::string plan_log_pass_names() {
    std::string names;
    for (int p = 0; p < LOG_PASS_COUNT; ++p) names += std::string(p ? ", " : "") + PASS_NAMES[p];
    return names;
}

PlanLogStep plan_log_step(const PlanStep& step) {
    PlanLogStep s;
    s.node = step.recorded_id;
    s.kind = step.kind;
    s.op = step.kind == STEP_FUSED && !step.fused.empty() ? step.fused[step.fused.size() - 1].op : step.op;
    s.target = step.target;
    s.phase = step.phase;
    s.where = step.where;
    return s;
}

std::string plan_log_step_text(const Plan& plan, const PlanLogStep& step, bool with_line) {
    std::string text;
    auto grad_name = [&](int target) {
        return target >= 0 && target < static_cast<int>(plan.grad_targets.size())
                   ? plan_value_name(plan, plan.grad_targets[target].grad_value) : std::string("a .grad");
    };
    switch (step.kind) {
        case STEP_KERNEL: text = "#" + std::to_string(step.node) + " " + op_info(step.op).name; break;
        case STEP_FUSED: text = "the fused loop ending at #" + std::to_string(step.node) + " " + op_info(step.op).name; break;
        case STEP_GRAD_ACCUMULATE: text = grad_name(step.target) + " += #" + std::to_string(step.node); break;
        case STEP_GRAD_CLEAR: text = grad_name(step.target) + " = nil"; break;
        case STEP_GUARD: text = "guard " + std::to_string(step.target + 1); break;
        case STEP_GROUP_DONE: text = "backward group of #" + std::to_string(step.node); break;
    }
    if (with_line && step.where.line) text += " (" + source_loc_str(step.where) + ")";
    return text;
}

std::string plan_log_describe(const Plan& plan, const PlanPassLog& log, int pass, size_t max_lines) {
    std::string s = plan.name + ": " + plural(log.recorded_steps, "step", "steps") + " recorded\n";
    for (int p = 0; p < LOG_PASS_COUNT; ++p) {
        if (pass >= 0 && p != pass) continue;
        char name[16];
        snprintf(name, sizeof name, "%-8s ", PASS_NAMES[p]);
        if (!log.ran[p]) {
            bool gpu = p == LOG_FUSE && log.on_gpu && plan.passes.fuse;
            s += std::string(name) + (gpu ? "not run: the plan runs on the GPU (fused loops are CPU code)" : "off") + "\n";
            continue;
        }
        s += name + heading_of(log, p) + "\n";
        const std::vector<PlanLogEntry>& entries = log.passes[p];
        size_t shown = 0, left = 0;
        for (const PlanLogEntry& e : entries) {
            if (p == LOG_REUSE && e.values.size() < 2) continue;   // a buffer of its own: nothing shared
            if (shown == max_lines) {
                ++left;
                continue;
            }
            s += "  " + entry_text_of(plan, p, e) + "\n";
            ++shown;
        }
        if (left) s += "  ... and " + std::to_string(left) + " more\n";
    }
    s += plan.name + ": " + plural(log.steps, "step", "steps") + " after the passes\n";
    return s;
}

}  // namespace td
