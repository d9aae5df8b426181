// lua_plan_native.h: freeze to native code from Lua (lua_plan.cpp's frozen functions call these):
// making a plan native and saying why not, and what f:stats() and f:source() show of it.
#pragma once

#include <memory>
#include <string>

#include "plan.h"
#include "plan_timeit.h"
#include "tapedeck_lua.h"

namespace tdlua {

// Makes `plan` native (plan_native_build). When it cannot be, the interpreted plan runs and the
// reason is written to stderr once per frozen function and reason (`told` keeps the last one
// said). Returns "" on success, else the reason.
std::string plan_make_native(const std::string& function_name, td::Plan& plan, std::string& told);

// The native fields of f:stats() into the table on top of the stack: native (whether the plan
// runs native code), native_steps, native_segments, native_compile_seconds, native_load_seconds,
// native_cache_hit, native_calls, native_fallbacks, native_object.
void push_native_stats(lua_State* L, const td::Plan& plan);

// The plan's generated C++ (f:source(), :plan f --source): the loaded one, else generated now
// (no compiler needed). Raises when the plan has none, saying why.
std::string plan_source_text(const std::string& function_name, const td::Plan& plan);

// f:timeit's native fields (native_min_us, native_median_us, native_peak_bytes, native_max_diff)
// into the table on top of the stack, when native code was timed.
void push_native_timing(lua_State* L, const td::PlanTimeit& timed);

// Switches a plan's native code on or off (f:timeit), and back on when it goes out of scope.
struct NativeSwitch {
    std::shared_ptr<td::Plan> plan;
    ~NativeSwitch() { set(true); }
    void set(bool on) const;
};

}  // namespace tdlua
