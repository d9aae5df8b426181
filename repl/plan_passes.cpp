// plan_passes.cpp: `:plan f --passes [PASS] [--view]` (plan_passes.h). The text is f:passes()'s
// (lua_bindings/lua_plan_log.cpp); the view is viewer.show_plan's (viewer/window/window_plan.cpp).
#include "plan_passes.h"

#include <cstdio>
#include <lua.hpp>
#include <sstream>
#include <vector>

#include "lua_util.h"
#include "plan_log.h"
#include "repl.h"
#include "tapedeck_lua.h"

void plan_passes_command(lua_State* L, const std::string& expression, const std::string& options) {
    std::istringstream words(options);
    std::string word, pass;
    bool passes = false, view = false;
    while (words >> word) {
        if (word == "--passes") {
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
            fprintf(stderr, ":plan: unknown option '%s'; use  :plan f  or  :plan f --passes [PASS] [--view]\n", word.c_str());
            return;
        }
    }
    if (!passes) {
        fprintf(stderr, ":plan: %s needs --passes, as in  :plan f --passes --view\n", view ? "--view" : "these options");
        return;
    }
    if (expression.empty()) {
        fprintf(stderr, ":plan --passes needs a frozen function, as in  :plan f --passes\n");
        return;
    }
    if (!repl_eval(L, expression)) return;
    if (!tapedeck_is_frozen(L, -1)) {
        fprintf(stderr, ":plan --passes: '%s' is a %s, not a frozen function (make one with :freeze or torch.freeze)\n",
                expression.c_str(), tdlua::type_name_of(L, -1));
        lua_pop(L, 1);
        return;
    }
    lua_setglobal(L, "_tapedeck_frozen");
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
    lua_pushnil(L);
    lua_setglobal(L, "_tapedeck_frozen");
}
