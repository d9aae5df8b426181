// plan_passes.cpp: the options of `:plan` (plan_passes.h): `:plan f --passes [PASS] [--view]`, the
// compiler pass by pass (the text is f:passes()'s, lua_bindings/lua_plan_log.cpp; the view is
// viewer.show_plan's, viewer/window/window_plan.cpp), and `:plan f --source`, the plan's native
// code (f:source()'s, lua_bindings/lua_plan_native.cpp).
#include "plan_passes.h"

#include <cstdio>
#include <cstring>
#include <lua.hpp>
#include <sstream>
#include <vector>

#include "lua_util.h"
#include "plan_log.h"
#include "repl.h"
#include "tapedeck_lua.h"

namespace {

const char PLAN_USAGE[] = ":plan f  or  :plan f --passes [PASS] [--view]  or  :plan f --source";

// The frozen function `expression` names, set as the global _tapedeck_frozen; false (one line
// naming `command` printed) when it is missing or not a frozen function.
bool plan_frozen_global(lua_State* L, const std::string& expression, const char* command) {
    if (expression.empty()) {
        fprintf(stderr, "%s needs a frozen function, as in  %s\n", command,
                (std::string(":plan f ") + (command + strlen(":plan "))).c_str());
        return false;
    }
    if (!repl_eval(L, expression)) return false;
    if (!tapedeck_is_frozen(L, -1)) {
        fprintf(stderr, "%s: '%s' is a %s, not a frozen function (make one with :freeze or torch.freeze)\n", command,
                expression.c_str(), tdlua::type_name_of(L, -1));
        lua_pop(L, 1);
        return false;
    }
    lua_setglobal(L, "_tapedeck_frozen");
    return true;
}

void plan_frozen_global_clear(lua_State* L) {
    lua_pushnil(L);
    lua_setglobal(L, "_tapedeck_frozen");
}

// :plan f --source: the generated C++ of f's latest plan, as f:source() gives it. No compiler is
// needed: a plan not yet native has its source generated now. f:source()'s error (never called,
// nothing native code runs) is printed as :plan's, without a traceback.
void plan_source_print(lua_State* L, const std::string& expression) {
    if (!plan_frozen_global(L, expression, ":plan --source")) return;
    lua_getglobal(L, "_tapedeck_frozen");
    lua_getfield(L, -1, "source");
    lua_insert(L, -2);   // f.source, f
    if (lua_pcall(L, 1, 1, 0) == LUA_OK) {
        fputs(lua_tostring(L, -1), stdout);
    } else {
        std::string why = lua_tostring(L, -1) ? lua_tostring(L, -1) : "f:source() failed";
        if (why.rfind("source: ", 0) == 0) why = why.substr(strlen("source: "));   // the method's own prefix
        fprintf(stderr, ":plan --source: %s\n", why.c_str());
    }
    lua_pop(L, 1);
    plan_frozen_global_clear(L);
}

}  // namespace

void plan_passes_command(lua_State* L, const std::string& expression, const std::string& options) {
    std::istringstream words(options);
    std::string word, pass;
    bool passes = false, view = false, source = false;
    while (words >> word) {
        if (word == "--source") {
            source = true;
        } else if (word == "--passes") {
            passes = true;
        } else if (word == "--view") {
            view = true;
        } else if (passes && pass.empty() && word.rfind("--", 0) != 0) {
            if (td::plan_log_pass_find(word) < 0) {
                fprintf(stderr, ":plan --passes: no pass is called '%s'; the passes are %s\n", word.c_str(),
                        td::plan_log_pass_names().c_str());
                return;
            }
            pass = word;
        } else {
            fprintf(stderr, ":plan: unknown option '%s'; use  %s\n", word.c_str(), PLAN_USAGE);
            return;
        }
    }
    if (source && (passes || view)) {
        fprintf(stderr, ":plan: --source goes alone; use  %s\n", PLAN_USAGE);
        return;
    }
    if (source) {
        plan_source_print(L, expression);
        return;
    }
    if (!passes) {
        fprintf(stderr, ":plan: %s needs --passes, as in  :plan f --passes --view\n", view ? "--view" : "these options");
        return;
    }
    if (!plan_frozen_global(L, expression, ":plan --passes")) return;
    std::string quoted = pass.empty() ? "" : "\"" + pass + "\"";
    bool ok = repl_eval(L, "_tapedeck_frozen:passes(" + quoted + ").text");
    if (ok) {
        fputs(lua_tostring(L, -1), stdout);
        lua_pop(L, 1);
        // viewer.show_plan gives nil and a message when no window can open (no display, no viewer)
        std::string show = "(function(f, pass) local ok, why = viewer.show_plan(f, pass) "
                           "if not ok then error(':plan --view: ' .. tostring(why), 0) end return ok end)"
                           "(_tapedeck_frozen" + (quoted.empty() ? "" : ", " + quoted) + ")";
        if (view && repl_eval(L, show)) {
            printf("viewer: %s's recorded graph, pass by pass (the buttons, keys 0-6, or viewer.plan_pass(\"cse\"))\n",
                   expression.c_str());
            lua_pop(L, 1);
        }
    }
    plan_frozen_global_clear(L);
}
