// lua_plan_log.cpp: f:passes([pass]), what each pass of a frozen function's plan decided
// (engine/freeze/plan_log.h), as a table for scripts and tests; its `text` is what `:plan f --passes`
// prints. The recording is compiled again with a log (the plan keeps none): O(steps).
#include <memory>
#include <string>

#include "lua_util.h"
#include "plan.h"
#include "plan_log.h"
#include "tapedeck_lua.h"

using namespace td;

namespace {
using tdlua::set_string;
using tdlua::set_boolean;
using tdlua::set_integer;

// The fields of a step (node, op, line, phase) into the table on top of the stack, with `prefix`.
void set_step(lua_State* L, const Plan& plan, const PlanLogStep& step, const std::string& prefix = "") {
    set_integer(L, (prefix + "node").c_str(), step.node);
    set_string(L, (prefix + "op").c_str(), op_info(step.op).name);
    set_string(L, (prefix + "step").c_str(), plan_log_step_text(plan, step, false));
    set_string(L, (prefix + "line").c_str(), step.where.line ? source_loc_str(step.where) : "");
    if (prefix.empty()) set_string(L, "phase", step.phase == PHASE_BACKWARD ? "backward" : "forward");
}

void push_decision(lua_State* L, const Plan& plan, int pass, const PlanLogEntry& e) {
    lua_createtable(L, 0, 8);
    if (pass != LOG_REUSE) set_step(L, plan, e.step);
    switch (pass) {
        case LOG_DCE: set_string(L, "why", e.reason == LOG_DEAD_AFTER ? "its readers were merged or folded" : "nothing reads it"); break;
        case LOG_CSE: set_step(L, plan, e.other, "reuses_"); break;
        case LOG_FUSE: {
            lua_createtable(L, static_cast<int>(e.ops.size()), 0);
            for (size_t i = 0; i < e.ops.size(); ++i) {
                lua_pushinteger(L, e.ops[i].node);
                lua_rawseti(L, -2, static_cast<lua_Integer>(i + 1));
            }
            lua_setfield(L, -2, "nodes");
            lua_createtable(L, static_cast<int>(e.ops.size()), 0);
            for (size_t i = 0; i < e.ops.size(); ++i) {
                lua_pushstring(L, op_info(e.ops[i].op).name);
                lua_rawseti(L, -2, static_cast<lua_Integer>(i + 1));
            }
            lua_setfield(L, -2, "ops");
            break;
        }
        case LOG_INPLACE:
            set_string(L, "how", e.reason == LOG_INTO_GRAD ? "grad" : e.reason == LOG_INTO_SUM ? "sum" : "input");
            set_string(L, "into", plan_value_name(plan, e.value));
            break;
        case LOG_REUSE: {
            set_string(L, "buffer", "buf" + std::to_string(e.buffer));   // as :plan names it
            set_integer(L, "bytes", static_cast<lua_Integer>(e.bytes));
            lua_createtable(L, static_cast<int>(e.values.size()), 0);
            for (size_t i = 0; i < e.values.size(); ++i) {
                lua_pushstring(L, plan_value_name(plan, e.values[i]).c_str());
                lua_rawseti(L, -2, static_cast<lua_Integer>(i + 1));
            }
            lua_setfield(L, -2, "values");
            lua_createtable(L, static_cast<int>(e.values.size()), 0);
            for (size_t i = 0; i < e.values.size(); ++i) {
                lua_pushinteger(L, plan.values[e.values[i]].recorded_id);
                lua_rawseti(L, -2, static_cast<lua_Integer>(i + 1));
            }
            lua_setfield(L, -2, "nodes");
            break;
        }
        default: break;
    }
    set_string(L, "text", plan_log_describe_entry(plan, pass, e));
}

}  // namespace

int tapedeck_frozen_passes(lua_State* L) {
    std::shared_ptr<const Plan> current = tapedeck_frozen_plan(L, 1);
    int only = -1;
    if (!lua_isnoneornil(L, 2)) {
        std::string name = tdlua::check_string(L, 2, "pass");
        only = plan_log_pass_find(name);
        if (only < 0)
            tdlua::arg_fail(2, "passes: no pass is called '%s'; the passes are %s", name.c_str(), plan_log_pass_names().c_str());
    }
    PlanPassLog log;
    std::unique_ptr<Plan> plan = plan_compile(current->recording, current->passes, &log);
    lua_createtable(L, LOG_PASS_COUNT, 6);
    set_string(L, "name", plan->name);
    set_integer(L, "recorded_steps", static_cast<lua_Integer>(log.recorded_steps));
    set_integer(L, "steps", static_cast<lua_Integer>(log.steps));
    set_integer(L, "buffers", log.buffers);
    set_integer(L, "unshared_bytes", static_cast<lua_Integer>(log.unshared_bytes));
    set_integer(L, "buffer_bytes", static_cast<lua_Integer>(log.buffer_bytes));
    set_string(L, "text", plan_log_describe(*plan, log, only));
    int n = 0;
    for (int p = 0; p < LOG_PASS_COUNT; ++p) {
        if (only >= 0 && p != only) continue;
        lua_createtable(L, 0, 4);
        set_string(L, "name", plan_log_pass_name(p));
        set_boolean(L, "on", log.ran[p]);
        const std::vector<PlanLogEntry>& entries = log.passes[p];
        set_integer(L, "count", static_cast<lua_Integer>(entries.size()));
        lua_createtable(L, static_cast<int>(entries.size()), 0);
        for (size_t i = 0; i < entries.size(); ++i) {
            push_decision(L, *plan, p, entries[i]);
            lua_rawseti(L, -2, static_cast<lua_Integer>(i + 1));
        }
        lua_setfield(L, -2, "decisions");
        lua_rawseti(L, -2, ++n);
    }
    return 1;
}
