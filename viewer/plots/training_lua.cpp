// training_lua.cpp: the training log in Lua and at the prompt, in every build (with or
// without the viewer window):
//
//   viewer.log(name, value [, step])   a number or 1-element tensor: a point of scalar series `name`;
//                                      a tensor: a histogram of its values (series `name`) and its
//                                      norm (scalar series `name/norm`). step: the optimizer steps so far
//   viewer.plot(name, "out.png" [, {width=, height=}])   write a plot (plot_render.h) as a PNG
//   viewer.series() -> {scalars = {...}, histograms = {...}, parameters = {...}, step = n}
//   viewer.series(name) -> {steps = {...}, values = {...}, per_point, logged}      a scalar series
//                       -> {steps = {...}, lo = {...}, hi = {...}, counts = {{...}...}, keep_every}
//   viewer.step() -> the optimizer steps so far
//   viewer.log_options{automatic = true|false|"watched"} -> {automatic = ..., logging = bool}
//                                      whether optimizers log at every step() (TrainingLog::automatic)
//   viewer.log_clear()                 forget every series, the step counter back to 0
//   viewer.png_stats(path) -> width, height, colours    a PNG read back (tests)
//   viewer._step_begin(params) / viewer._step_end(params, grads, names) / viewer._param_names(params)
//                                      optim.lua's step()
//
// and the REPL's `:plot` (training_plot_command).
//
// [SECTION] logging     viewer.log, viewer.plot, viewer.series, viewer.step, viewer.log_options
// [SECTION] optimizers  what optim.lua's step() calls: _step_begin, _step_end, _param_names, ...
// [SECTION] register    the functions into `viewer`, and :plot
#include <lua.hpp>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <stdexcept>

#include "lua_util.h"
#include "node_names.h"
#include "plot_render.h"
#include "tapedeck_lua.h"
#include "training_log.h"
#include "training_view.h"

using namespace td;

namespace {

// ============================================================================================
// [SECTION] logging

td::Tensor* check_tensor(lua_State* L, int idx, const char* function) {
    td::Tensor* t = tapedeck_test_tensor(L, idx);
    if (!t) luaL_error(L, "%s: argument %d must be a tensor, got %s", function, idx, luaL_typename(L, idx));
    return t;
}

double optional_step(lua_State* L, int idx, const char* function) {
    if (lua_isnoneornil(L, idx)) return -1;
    if (!lua_isnumber(L, idx) || lua_tonumber(L, idx) < 0)
        luaL_error(L, "%s: step must be a number >= 0, got %s", function, luaL_tolstring(L, idx, nullptr));
    return lua_tonumber(L, idx);
}

int l_log(lua_State* L) {
    const char* name = luaL_checkstring(L, 1);
    if (!*name) return luaL_error(L, "viewer.log: the name is empty");
    training_log().script_logged = true;   // a script that logs looks: the optimizers log too
    double step = optional_step(L, 3, "viewer.log");
    if (lua_type(L, 2) == LUA_TNUMBER) {
        if (strcmp(name, "loss") == 0) training_note_script_loss();
        training_log_scalar(name, lua_tonumber(L, 2), step);
        return 0;
    }
    td::Tensor* t = tapedeck_test_tensor(L, 2);
    if (!t)
        return luaL_error(L, "viewer.log: the value of '%s' must be a number or a tensor, got %s", name, luaL_typename(L, 2));
    const td::Value& v = t->value();
    if (value_freed(v)) return luaL_error(L, "viewer.log: the tensor of '%s' has no values (%s)", name, VALUE_FREED_TEXT);
    if (v.numel() == 1 && strcmp(name, "loss") == 0) training_note_script_loss();
    if (v.numel() == 1) training_log_scalar(name, value_get(value_to_host(v), 0), step);
    else if (v.numel() == 0) return luaL_error(L, "viewer.log: the tensor of '%s' is empty (shape %s)", name, v.shape.str().c_str());
    else training_log_tensor(name, v, step);
    return 0;
}

// viewer.plot(name, path [, {width =, height =}]), run guarded (l_plot): its errors name the call
// and the user's line.
int plot_checked(lua_State* L) {
    std::string what = tdlua::check_string(L, 1, "name");
    const char* path = tdlua::check_string(L, 2, "path");
    int width = PLOT_DEFAULT_WIDTH, height = PLOT_DEFAULT_HEIGHT;
    if (!lua_isnoneornil(L, 3)) {
        if (!lua_istable(L, 3)) tdlua::arg_fail(3, "options must be a table like {width = 800, height = 450}, got %s", tdlua::type_name_of(L, 3));
        tapedeck_check_options(L, 3, "viewer.plot", "width height");
        for (const char* key : {"width", "height"}) {
            lua_getfield(L, 3, key);
            if (!lua_isnil(L, -1) && !lua_isinteger(L, -1)) tdlua::arg_fail(3, "%s must be an integer, got %s", key, tdlua::type_name_of(L, -1));
            if (!lua_isnil(L, -1)) (strcmp(key, "width") == 0 ? width : height) = static_cast<int>(lua_tointeger(L, -1));
            lua_pop(L, 1);
        }
    }
    std::string error;
    if (!plot_write_png(what, path, width, height, &error)) throw std::runtime_error("viewer." + error);
    lua_pushboolean(L, 1);
    return 1;
}

int l_plot(lua_State* L) { return tdlua::run_guarded(L, plot_checked, "viewer.plot"); }

// values as Lua numbers; `steps`: whole ones as integers (step 3, not 3.0; a folded point's mean
// step may be 2.5).
void push_numbers(lua_State* L, const std::vector<double>& values, bool steps = false) {
    lua_createtable(L, static_cast<int>(values.size()), 0);
    for (size_t i = 0; i < values.size(); ++i) {
        if (steps && values[i] == std::floor(values[i]) && std::fabs(values[i]) < 9e15) lua_pushinteger(L, static_cast<lua_Integer>(values[i]));
        else lua_pushnumber(L, values[i]);
        lua_rawseti(L, -2, static_cast<lua_Integer>(i + 1));
    }
}

void push_strings(lua_State* L, const std::vector<std::string>& values) {
    lua_createtable(L, static_cast<int>(values.size()), 0);
    for (size_t i = 0; i < values.size(); ++i) {
        lua_pushstring(L, values[i].c_str());
        lua_rawseti(L, -2, static_cast<lua_Integer>(i + 1));
    }
}

int l_series(lua_State* L) {
    const TrainingLog& log = training_log();
    if (lua_isnoneornil(L, 1)) {
        std::vector<std::string> scalars, histograms;
        for (const auto& entry : log.scalars) scalars.push_back(entry.first);
        for (const auto& entry : log.histograms) histograms.push_back(entry.first);
        lua_createtable(L, 0, 4);
        push_strings(L, scalars);
        lua_setfield(L, -2, "scalars");
        push_strings(L, histograms);
        lua_setfield(L, -2, "histograms");
        push_strings(L, log.parameters);
        lua_setfield(L, -2, "parameters");
        lua_pushinteger(L, log.optimizer_steps);
        lua_setfield(L, -2, "step");
        return 1;
    }
    std::string name = luaL_checkstring(L, 1);
    auto scalar = log.scalars.find(name);
    if (scalar != log.scalars.end()) {
        lua_createtable(L, 0, 4);
        push_numbers(L, scalar->second.steps, true);
        lua_setfield(L, -2, "steps");
        push_numbers(L, scalar->second.values);
        lua_setfield(L, -2, "values");
        lua_pushinteger(L, scalar->second.per_point);
        lua_setfield(L, -2, "per_point");
        lua_pushinteger(L, scalar->second.logged);
        lua_setfield(L, -2, "logged");
        return 1;
    }
    auto hist = log.histograms.find(name);
    if (hist != log.histograms.end()) {
        std::vector<double> steps, lo, hi;
        for (const HistogramStep& e : hist->second.steps) steps.push_back(e.step), lo.push_back(e.lo), hi.push_back(e.hi);
        lua_createtable(L, 0, 5);
        push_numbers(L, steps, true);
        lua_setfield(L, -2, "steps");
        push_numbers(L, lo);
        lua_setfield(L, -2, "lo");
        push_numbers(L, hi);
        lua_setfield(L, -2, "hi");
        lua_createtable(L, static_cast<int>(steps.size()), 0);
        for (size_t i = 0; i < hist->second.steps.size(); ++i) {
            const std::vector<float>& c = hist->second.steps[i].counts;
            push_numbers(L, std::vector<double>(c.begin(), c.end()));
            lua_rawseti(L, -2, static_cast<lua_Integer>(i + 1));
        }
        lua_setfield(L, -2, "counts");
        lua_pushinteger(L, hist->second.keep_every);
        lua_setfield(L, -2, "keep_every");
        return 1;
    }
    std::string listing = training_series_listing();
    return luaL_error(L, "viewer.series: no series '%s' (there are: %s)", name.c_str(),
                      listing.empty() ? "none yet" : listing.c_str());
}

int l_step(lua_State* L) {
    lua_pushinteger(L, training_log().optimizer_steps);
    return 1;
}

int l_log_options(lua_State* L) {
    if (!lua_isnoneornil(L, 1)) {
        luaL_checktype(L, 1, LUA_TTABLE);
        tapedeck_check_options(L, 1, "viewer.log_options", "automatic");
        lua_pushnil(L);
        while (lua_next(L, 1)) {   // only automatic, after the check
            if (lua_isboolean(L, -1))
                training_log().automatic = lua_toboolean(L, -1) ? TrainingLog::AUTOMATIC_ALWAYS : TrainingLog::AUTOMATIC_NEVER;
            else if (lua_type(L, -1) == LUA_TSTRING && std::string(lua_tostring(L, -1)) == "watched")
                training_log().automatic = TrainingLog::AUTOMATIC_WHEN_WATCHED;
            else
                return luaL_error(L, "viewer.log_options: automatic must be true, false or \"watched\"");
            lua_pop(L, 1);
        }
    }
    lua_createtable(L, 0, 2);
    TrainingLog::Automatic automatic = training_log().automatic;
    if (automatic == TrainingLog::AUTOMATIC_WHEN_WATCHED) lua_pushstring(L, "watched");
    else lua_pushboolean(L, automatic == TrainingLog::AUTOMATIC_ALWAYS);
    lua_setfield(L, -2, "automatic");
    lua_pushboolean(L, training_logs_steps());
    lua_setfield(L, -2, "logging");
    return 1;
}

int l_log_clear(lua_State*) {
    training_log_clear();
    return 0;
}

// ============================================================================================
// [SECTION] optimizers

// The tensors of the list at idx (optim.lua passes the parameters that have a gradient).
std::vector<Value> tensor_values(lua_State* L, int idx, const char* function) {
    luaL_checktype(L, idx, LUA_TTABLE);
    std::vector<Value> values;
    lua_Integer n = luaL_len(L, idx);
    for (lua_Integer i = 1; i <= n; ++i) {
        lua_rawgeti(L, idx, i);
        values.push_back(check_tensor(L, lua_gettop(L), function)->value());
        lua_pop(L, 1);
    }
    return values;
}

int l_step_begin(lua_State* L) {
    training_step_begin(tensor_values(L, 1, "viewer._step_begin"));
    return 0;
}

int l_step_end(lua_State* L) {
    std::vector<Value> params = tensor_values(L, 1, "viewer._step_end");
    std::vector<Value> grads = tensor_values(L, 2, "viewer._step_end");
    luaL_checktype(L, 3, LUA_TTABLE);
    std::vector<std::string> names;
    for (lua_Integer i = 1, n = luaL_len(L, 3); i <= n; ++i) {
        lua_rawgeti(L, 3, i);
        names.push_back(luaL_checkstring(L, -1));
        lua_pop(L, 1);
    }
    training_step_end(params, grads, names);
    return 0;
}

// viewer._param_names(params) -> names: the script's names for the parameters (the debugger's:
// "model.fc1.weight"), looked up now in the globals and the running frames; "param<i>" for one
// nobody names. optim.lua asks once per optimizer.
int l_param_names(lua_State* L) {
    std::vector<Value> values = tensor_values(L, 1, "viewer._param_names");
    tapedeck_name_tensors(L, 0);
    lua_createtable(L, static_cast<int>(values.size()), 0);
    for (lua_Integer i = 1; i <= static_cast<lua_Integer>(values.size()); ++i) {
        lua_rawgeti(L, 1, i);
        td::Tensor* t = tapedeck_test_tensor(L, -1);
        std::string name = node_bound_name(t->node.get(), t->output);
        lua_pop(L, 1);
        if (name.empty()) name = "param" + std::to_string(i);
        lua_pushstring(L, name.c_str());
        lua_rawseti(L, -2, i);
    }
    return 1;
}

// viewer._logs_steps(): whether optim.lua's step() logs now (training_logs_steps).
int l_logs_steps(lua_State* L) {
    lua_pushboolean(L, training_logs_steps());
    return 1;
}

// viewer._step_counted(): a step() that logged nothing (automatic logging off) still counts.
int l_step_counted(lua_State*) {
    ++training_log().optimizer_steps;
    return 0;
}

// viewer.png_stats(path) -> width, height, colours: a PNG read back (cairo's libpng reader), the
// number of distinct colours in it (tests: a plot is not blank). nil, message when it cannot.
int l_png_stats(lua_State* L) {
    int width = 0, height = 0;
    size_t colours = 0;
    std::string error;
    if (!png_stats(luaL_checkstring(L, 1), &width, &height, &colours, &error)) {
        lua_pushnil(L);
        lua_pushstring(L, ("viewer.png_stats: " + error).c_str());
        return 2;
    }
    lua_pushinteger(L, width);
    lua_pushinteger(L, height);
    lua_pushinteger(L, static_cast<lua_Integer>(colours));
    return 3;
}

const luaL_Reg training_functions[] = {
    {"log", l_log},
    {"plot", l_plot},
    {"series", l_series},
    {"step", l_step},
    {"log_options", l_log_options},
    {"log_clear", l_log_clear},
    {"_step_begin", l_step_begin},
    {"_step_end", l_step_end},
    {"_param_names", l_param_names},
    {"_step_counted", l_step_counted}, {"_logs_steps", l_logs_steps},
    {"png_stats", l_png_stats},
    {nullptr, nullptr},
};

// ============================================================================================
// [SECTION] register

// One line about scalar series `name`: "loss: 100 points, steps 0..99, last 0.0412 (min 0.0398, max 1.12)".
std::string scalar_summary(const std::string& name) {
    const ScalarSeries& s = training_log().scalars.at(name);
    double lo = NAN, hi = NAN;
    for (double v : s.values)
        if (std::isfinite(v)) lo = std::isnan(lo) ? v : std::min(lo, v), hi = std::isnan(hi) ? v : std::max(hi, v);
    char buf[256];
    snprintf(buf, sizeof buf, "%s: %zu points, steps %g..%g, last %.4g (min %.4g, max %.4g)%s", name.c_str(),
             s.values.size(), s.steps.empty() ? 0.0 : s.steps.front(), s.steps.empty() ? 0.0 : s.steps.back(), s.last,
             lo, hi, s.per_point > 1 ? (" (each point the mean of " + std::to_string(s.per_point) + ")").c_str() : "");
    return buf;
}

}  // namespace

void training_open_lua(lua_State* L) {
    lua_getglobal(L, "viewer");
    if (!lua_istable(L, -1)) {
        lua_pop(L, 1);
        lua_newtable(L);
        lua_pushvalue(L, -1);
        lua_setglobal(L, "viewer");
    }
    luaL_setfuncs(L, training_functions, 0);
    lua_pop(L, 1);
    tapedeck_declare_options(L, "viewer.plot", "width height");
    tapedeck_declare_options(L, "viewer.log_options", "automatic");
    training_follow_losses();
}

void training_plot_command(lua_State*, const std::string& args) {
    std::istringstream in(args);
    std::vector<std::string> words;
    for (std::string w; in >> w;) words.push_back(w);
    if (words.empty()) {
        std::string listing = training_series_listing();
        if (listing.empty()) {
            printf("nothing logged yet: viewer.log(name, value) in a script, or an optimizer's step() (gradient norms, update ratios, the loss)\n");
            return;
        }
        printf("step %lld; series: %s, flow\n", static_cast<long long>(training_log().optimizer_steps), listing.c_str());
        return;
    }
    std::string what = words[0];
    size_t next = 1;
    if (what == "hist") {
        if (words.size() < 2) {
            fprintf(stderr, ":plot hist needs a histogram series, as in  :plot hist h out.png\n");
            return;
        }
        what += " " + words[1];
        next = 2;
    }
    std::string path;
    int width = PLOT_DEFAULT_WIDTH, height = PLOT_DEFAULT_HEIGHT;
    for (; next < words.size(); ++next) {
        int w = 0, h = 0;
        char extra = 0;
        if (sscanf(words[next].c_str(), "%dx%d%c", &w, &h, &extra) == 2) width = w, height = h;
        else if (path.empty()) path = words[next];
        else {
            fprintf(stderr, ":plot: unexpected '%s' (usage: :plot NAME [out.png] [WIDTHxHEIGHT])\n", words[next].c_str());
            return;
        }
    }
    std::string error;
    if (!plot_known(what, &error)) {
        fprintf(stderr, ":%s\n", error.c_str());
        return;
    }
    if (path.empty()) {   // no file: say what the series holds, and show it in the Training window
        if (training_is_scalar(what)) printf("%s\n", scalar_summary(what).c_str());
        else if (what.rfind("hist ", 0) == 0)
            printf("hist %s: %zu histograms\n", what.substr(5).c_str(), training_log().histograms.at(what.substr(5)).steps.size());
        else if (what == "flow") printf("flow: %zu parameters\n", training_log().parameters.size());
        else
            for (const std::string& member : training_family(what)) printf("%s\n", scalar_summary(member).c_str());
        training_view_show(what);
        return;
    }
    if (!plot_write_png(what, path, width, height, &error)) {
        fprintf(stderr, ":%s\n", error.c_str());
        return;
    }
    printf("wrote %s (%dx%d, %s)\n", path.c_str(), width, height, what.c_str());
}
