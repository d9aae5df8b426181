// viewer_lua_plan.cpp: the pass-by-pass mode in the `viewer` Lua table (window_plan.cpp):
//
//   viewer.show_plan(f [, pass]) -> true | nil, message   f's recorded graph, at stage `pass`
//                                                         ("recorded" by default); opens the window
//   viewer.show_plan(false)          back to the tape
//   viewer.plan_pass([pass]) -> the stage shown ("recorded", "dce", ... "reuse"), after setting it
//
// and, in viewer.model() while a plan is shown, each node box's marks at the stage shown.
#include <lua.hpp>

#include <memory>
#include <stdexcept>
#include <string>

#include "plan.h"
#include "plan_log.h"
#include "tapedeck_lua.h"
#include "viewer_internal.h"

namespace td {

namespace {

std::string stage_names() {
    std::string names;
    for (int s = 0; s < PLAN_STAGES; ++s) names += std::string(s ? ", " : "") + plan_stage_name(s);
    return names;
}

// The stage at idx: a name or a number 0-6; raises a Lua error naming `function` otherwise.
int check_stage(lua_State* L, int idx, const char* function) {
    if (lua_type(L, idx) == LUA_TNUMBER) {
        lua_Integer n = lua_tointeger(L, idx);
        if (n < 0 || n >= PLAN_STAGES) luaL_error(L, "%s: stage %d is not one of 0-%d (%s)", function, static_cast<int>(n), PLAN_STAGES - 1, stage_names().c_str());
        return static_cast<int>(n);
    }
    const char* name = lua_tostring(L, idx);
    int stage = name ? plan_stage_find(name) : -1;
    if (stage < 0)
        luaL_error(L, "%s: no pass is called '%s'; the stages are %s", function, name ? name : luaL_typename(L, idx),
                   stage_names().c_str());
    return stage;
}

}  // namespace

int viewer_lua_show_plan(lua_State* L) {
    if (lua_isboolean(L, 1) && !lua_toboolean(L, 1)) {
        viewer_show_plan(nullptr, 0);
        lua_pushboolean(L, 1);
        return 1;
    }
    if (!tapedeck_is_frozen(L, 1))
        return luaL_error(L, "viewer.show_plan: expected a frozen function (from torch.freeze), got %s", luaL_typename(L, 1));
    int stage = lua_isnoneornil(L, 2) ? 0 : check_stage(L, 2, "viewer.show_plan");
    std::shared_ptr<PlanModel> model;
    std::string error;
    try {
        std::shared_ptr<const Plan> plan = tapedeck_frozen_plan(L, 1);
        size_t steps = plan_step_count(*plan->recording);
        if (steps > PLAN_VIEW_MAX_STEPS)   // 7 stages of marks per record: bounded
            throw std::runtime_error(plan->name + "'s recording has " + std::to_string(steps) + " steps; the view draws at most " +
                                     std::to_string(PLAN_VIEW_MAX_STEPS) + " (:plan f --passes prints every pass's decisions)");
        PlanPassLog log;
        std::unique_ptr<Plan> compiled = plan_compile(plan->recording, plan->passes, &log);
        model = plan_model_build(*compiled, log);
    } catch (const std::exception& e) {
        error = e.what();
    }
    if (!model) return luaL_error(L, "viewer.show_plan: %s", error.c_str());
    if (!viewer_is_open() && !viewer_open(&error, false)) {
        lua_pushnil(L);
        lua_pushstring(L, error.c_str());
        return 2;
    }
    viewer_show_plan(model, stage);
    lua_pushboolean(L, 1);
    return 1;
}

int viewer_lua_plan_pass(lua_State* L) {
    ViewerState& s = viewer_state();
    if (!s.plan.model) {
        if (lua_isnoneornil(L, 1)) return 0;
        return luaL_error(L, "viewer.plan_pass: no plan is shown (viewer.show_plan(f) or :plan f --passes --view first)");
    }
    if (!lua_isnoneornil(L, 1)) viewer_plan_stage(check_stage(L, 1, "viewer.plan_pass"));
    lua_pushstring(L, plan_stage_name(s.plan.stage));
    return 1;
}

void viewer_lua_plan_fields(lua_State* L, const ViewBox& box) {
    const ViewerState& s = viewer_state();
    if (!s.plan.model || box.kind != BOX_NODE) return;
    const PlanBoxMark* mark = plan_mark_of(*s.plan.model, s.plan.stage, box.node_id);
    if (!mark) return;
    static const char* const STATES[] = {"kept", "dropped", "merged", "folded"};
    lua_pushstring(L, STATES[mark->state]);
    lua_setfield(L, -2, "plan_state");
    lua_pushstring(L, mark->note.c_str());
    lua_setfield(L, -2, "plan_note");
    if (mark->merged_into) {
        lua_pushinteger(L, mark->merged_into);
        lua_setfield(L, -2, "merged_into");
    }
    if (mark->fused >= 0) {
        lua_pushinteger(L, mark->fused + 1);
        lua_setfield(L, -2, "fused");
    }
    if (mark->buffer >= 0) {
        lua_pushstring(L, ("buf" + std::to_string(mark->buffer)).c_str());
        lua_setfield(L, -2, "buffer");
        lua_pushinteger(L, static_cast<lua_Integer>(plan_buffer_colour(mark->buffer)));
        lua_setfield(L, -2, "buffer_colour");
    }
    lua_pushboolean(L, mark->in_place);
    lua_setfield(L, -2, "in_place");
}

}  // namespace td
