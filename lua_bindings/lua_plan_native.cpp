// lua_plan_native.cpp: freeze to native code from Lua (lua_plan_native.h).
#include "lua_plan_native.h"

#include <cstdio>

#include "lua_util.h"
#include "plan_native.h"

namespace tdlua {

std::string plan_make_native(const std::string& function_name, td::Plan& plan, std::string& told) {
    if (plan.native) return "";
    td::NativeBuildResult built = td::plan_native_build(plan);
    if (built.ok) return "";
    if (built.message != told) {
        fprintf(stderr, "%s: no native code, the interpreted plan runs: %s\n", function_name.c_str(), built.message.c_str());
        fflush(stderr);
        told = built.message;
    }
    return built.message;
}

void push_native_stats(lua_State* L, const td::Plan& plan) {
    const td::PlanNative* native = plan.native.get();
    set_boolean(L, "native", native != nullptr);
    if (!native) return;
    set_integer(L, "native_steps", native->native_steps);
    set_integer(L, "native_segments", static_cast<lua_Integer>(native->segments.size()));
    set_number(L, "native_compile_seconds", native->compile_seconds);
    set_number(L, "native_load_seconds", native->load_seconds);
    set_boolean(L, "native_cache_hit", native->cache_hit);
    set_integer(L, "native_calls", native->segment_calls);
    set_integer(L, "native_fallbacks", native->fallbacks);
    set_string(L, "native_object", native->object_path);
}

std::string plan_source_text(const std::string& function_name, const td::Plan& plan) {
    if (plan.native) return plan.native->source;
    std::unique_ptr<td::PlanNative> generated = td::plan_native_generate(plan);
    if (!generated->why_not.empty()) td::engine_fail("source: %s has no native code: %s", function_name.c_str(), generated->why_not.c_str());
    return generated->source;
}

void push_native_timing(lua_State* L, const td::PlanTimeit& timed) {
    if (!timed.has_native) return;
    set_number(L, "native_min_us", timed.native.min_us);
    set_number(L, "native_median_us", timed.native.median_us);
    set_number(L, "native_peak_bytes", static_cast<double>(timed.native.peak_bytes));
    set_number(L, "native_max_diff", timed.native_max_diff);
}

void NativeSwitch::set(bool on) const {
    if (plan && plan->native) plan->native->enabled = on;
}

}  // namespace tdlua
