// lua_plan.cpp: freeze from Lua — torch.freeze, the frozen function, plan files.
//
//   f = torch.freeze(step, x, y)          -- runs step(x, y) once, recording it; compiles the plan
//   f = torch.freeze{step, x, y, strict = true, cache = 4, passes = {fuse = false}, native = true}
//   f:native(); f:source()                 -- its plans as native code (lua_plan_native.h)
//   f(x2, y2)                              -- replays the plan (re-records when a guard fails)
//   torch.save_plan(f, "step.tdp"); g = torch.load_plan("step.tdp" [, {max_bytes = N, fuse = false}])
//
// The frozen function keeps a small cache of plans, most recently used first, each with the
// non-tensor arguments it was recorded with (compared by value, tables by identity) and the shape
// of what the function returned. A call tries them in turn; when none fits, it re-records (saying
// which guard failed and where) or, in strict mode, refuses with that message.
//
// [SECTION] frozen        the userdata, its cache, recording one call, calling it
// [SECTION] timeit        f:timeit: the two calls, for plan_timeit (plan_timeit.h: runs, restores, compares)
// [SECTION] bindings      torch.freeze, methods and fields, save/load; the guard notes
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <malloc.h>
#include <memory>
#include <string>
#include <vector>

#include "bindings_state.h"
#include "device.h"
#include "plan.h"
#include "plan_timeit.h"
#include "lua_plan_native.h"
#include "lua_plan_values.h"
#include "lua_util.h"
#include "tapedeck_lua.h"

using namespace td;
using tdlua::set_boolean;
using tdlua::set_integer;
using tdlua::set_number;
using tdlua::set_string;

namespace {

// ============================================================================================
// [SECTION] frozen

const char* const FROZEN_TYPE = "tapedeck.Frozen";

struct CacheEntry {
    std::shared_ptr<Plan> recorded;   // as recorded (the passes run again on it for with_passes)
    std::shared_ptr<Plan> plan;       // compiled
    int args_ref = LUA_NOREF;         // {n = N, ...}: the non-tensor arguments (tensors: the marker)
    int results_ref = LUA_NOREF;      // {n = N, ...}: what fn returned, tensors as {[marker] = k}
    tdlua::LuaValueGuards lua_values; // the Lua values fn read, as recorded (lua_plan_values.h)
};

struct Frozen {
    std::string name;
    lua_State* main = nullptr;
    int fn_ref = LUA_NOREF;           // the Lua function; none for a plan loaded from a file
    int last_args_ref = LUA_NOREF;    // the latest successful call's arguments (for :timeit): {n = count, ...}
    int last_args_n = 0;              // its n (kept here too, so a call reads no field)
    std::vector<Tensor> spare_inputs; // empty; lent to each call for its capacity (no allocation per call)
    std::vector<CacheEntry> cache;    // most recently used first
    PlanPasses passes;
    bool strict = false;
    bool verbose = true;
    bool native = false;              // its plans are made native as they are compiled (f:native())
    std::string native_told;          // the last reason a plan could not be, said on stderr
    int cache_size = 8;
    SourceLoc where;
    int calls = 0, replays = 0, records = 0;
    std::string last_reason;
    // A guard on a value read out of a tensor that fails call after call (loss:item() returned
    // from the function) makes every call a recording: after EAGER_AFTER_FAILURES in a row the
    // function runs eagerly, until `f.eager = false` (or a new torch.freeze).
    std::string failing_guard;        // "item() at file:line": the value guard that failed last call, "" none
    int failures_in_row = 0;
    std::vector<std::string> told;    // the Lua values whose change has been said (once each)
    bool eager = false;
    int eager_calls = 0;

    void unref(int& ref) {
        if (ref != LUA_NOREF && main) luaL_unref(main, LUA_REGISTRYINDEX, ref);
        ref = LUA_NOREF;
    }
    void drop_entry(CacheEntry& e) {
        unref(e.args_ref);
        unref(e.results_ref);
        tdlua::lua_values_release(main, e.lua_values);
    }
    ~Frozen() {
        for (CacheEntry& e : cache) drop_entry(e);
        unref(fn_ref);
        unref(last_args_ref);
    }
};

Frozen* test_frozen(lua_State* L, int idx) {
    Frozen** p = static_cast<Frozen**>(tapedeck_test_udata(L, idx, tdlua::bindings_state.frozen_metatable));
    return p ? *p : nullptr;
}

Frozen& check_frozen(lua_State* L, int idx) {
    Frozen* f = test_frozen(L, idx);
    if (!f) tdlua::arg_fail(idx, "expected a frozen function (from torch.freeze), got %s", tdlua::type_name_of(L, idx));
    return *f;
}

Frozen& push_frozen(lua_State* L) {
    Frozen** p = static_cast<Frozen**>(lua_newuserdatauv(L, sizeof(Frozen*), 0));
    *p = new Frozen();
    (*p)->main = tdlua::main_thread(L);
    luaL_setmetatable(L, FROZEN_TYPE);
    return **p;
}

SourceLoc lua_loc(lua_State* L, int level) {
    lua_Debug ar;
    SourceLoc loc;
    if (!tdlua::find_user_frame(L, level, &ar)) return loc;
    loc.file = source_file_intern(ar.short_src);
    loc.line = ar.currentline;
    return loc;
}

// Raises `message` as a Lua error, with the user's file:line appended as the guarded bindings do.
[[noreturn]] void raise(lua_State* L, const std::string& message) {
    std::string where = tdlua::where_at(L, 1);
    lua_pushstring(L, (where.empty() ? message : message + " (" + where + ")").c_str());
    lua_error(L);
    throw 0;   // not reached: lua_error does not return
}

// The arguments at [first, first + n): tensors in order, and a table {n = n, ...} with the
// non-tensor ones (a tensor's place holds the marker).
std::vector<Tensor> split_args(lua_State* L, int first, int n, int* args_ref) {
    std::vector<Tensor> tensors;
    lua_createtable(L, n, 1);
    for (int i = 0; i < n; ++i) {
        if (Tensor* t = tapedeck_test_tensor(L, first + i)) {
            tensors.push_back(*t);
            lua_pushlightuserdata(L, &tdlua::bindings_state.tensor_marker);
        } else {
            lua_pushvalue(L, first + i);
        }
        lua_rawseti(L, -2, i + 1);
    }
    set_integer(L, "n", n);
    *args_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    return tensors;
}

// "" when the arguments at [first, first + n) match the entry's, else what differs.
std::string args_mismatch(lua_State* L, const CacheEntry& e, int first, int n) {
    lua_rawgeti(L, LUA_REGISTRYINDEX, e.args_ref);
    int t = lua_gettop(L);
    lua_getfield(L, t, "n");
    int want = static_cast<int>(lua_tointeger(L, -1));
    lua_pop(L, 1);
    std::string why;
    if (want != n) {
        why = "it was recorded with " + std::to_string(want) + " argument" + (want == 1 ? "" : "s") + ", now " +
              std::to_string(n);
    }
    for (int i = 1; i <= n && why.empty(); ++i) {
        lua_rawgeti(L, t, i);
        bool was_tensor = lua_touserdata(L, -1) == &tdlua::bindings_state.tensor_marker;
        bool is_tensor = tapedeck_test_tensor(L, first + i - 1) != nullptr;
        if (was_tensor != is_tensor) {
            why = "argument " + std::to_string(i) + (is_tensor ? " is a tensor now" : " is not a tensor now");
        } else if (!was_tensor && !lua_rawequal(L, -1, first + i - 1)) {
            const char* then = luaL_tolstring(L, -1, nullptr);
            std::string then_s = then;
            lua_pop(L, 1);
            const char* now = luaL_tolstring(L, first + i - 1, nullptr);
            why = "argument " + std::to_string(i) + " was " + then_s + " when recorded, now " + now;
            lua_pop(L, 1);
        }
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
    return why;
}

// Builds the template of what the function returned ([first, first + n) on the stack): tensors
// replaced by {[marker] = k} (k counts them), plain tables copied, other values kept.
void template_of(lua_State* L, int idx, std::vector<Tensor>& tensors, int depth) {
    idx = lua_absindex(L, idx);
    if (Tensor* t = tapedeck_test_tensor(L, idx)) {
        tensors.push_back(*t);
        lua_createtable(L, 0, 1);
        lua_pushlightuserdata(L, &tdlua::bindings_state.tensor_marker);
        lua_pushinteger(L, static_cast<lua_Integer>(tensors.size()));
        lua_rawset(L, -3);
        return;
    }
    if (!lua_istable(L, idx)) {
        lua_pushvalue(L, idx);
        return;
    }
    if (depth > 8) throw std::runtime_error("freeze: the function returned tables nested deeper than 8 levels");
    if (lua_getmetatable(L, idx)) {
        lua_pop(L, 1);
        throw std::runtime_error("freeze: the function returned a table with a metatable (a module?); return tensors, "
                                 "numbers or plain tables of them");
    }
    lua_newtable(L);
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        lua_pushvalue(L, -2);
        template_of(L, -2, tensors, depth + 1);
        lua_rawset(L, -5);
        lua_pop(L, 1);
    }
}

// Pushes the value a template stands for, with `outputs` in the tensors' places.
void push_from_template(lua_State* L, int idx, const std::vector<Tensor>& outputs) {
    idx = lua_absindex(L, idx);
    if (!lua_istable(L, idx)) {
        lua_pushvalue(L, idx);
        return;
    }
    lua_pushlightuserdata(L, &tdlua::bindings_state.tensor_marker);
    if (lua_rawget(L, idx) == LUA_TNUMBER) {
        size_t k = static_cast<size_t>(lua_tointeger(L, -1));
        lua_pop(L, 1);
        if (k >= 1 && k <= outputs.size() && outputs[k - 1].defined()) tapedeck_push_tensor(L, outputs[k - 1]);
        else lua_pushnil(L);
        return;
    }
    lua_pop(L, 1);
    lua_newtable(L);
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        lua_pushvalue(L, -2);
        push_from_template(L, -2, outputs);
        lua_rawset(L, -5);
        lua_pop(L, 1);
    }
}

int push_results(lua_State* L, const CacheEntry& e, const std::vector<Tensor>& outputs) {
    lua_rawgeti(L, LUA_REGISTRYINDEX, e.results_ref);
    int t = lua_gettop(L);
    lua_getfield(L, t, "n");
    int n = static_cast<int>(lua_tointeger(L, -1));
    lua_pop(L, 1);
    luaL_checkstack(L, n + 4, "too many results");
    for (int i = 1; i <= n; ++i) {
        lua_rawgeti(L, t, i);
        push_from_template(L, -1, outputs);
        lua_remove(L, -2);
    }
    lua_remove(L, t);
    return n;
}

// Names for captured tensors: the paths by which the function reaches them (its upvalues, the
// upvalues of functions it calls, fields of tables), or globals; the shortest path wins, except
// that a module's parameters and buffers take the module's own names (model.fc1.weight, however
// deep) and an optimizer's state is named after its parameter (optimizer.state.model.fc1.weight.exp_avg).
// Written in Lua; data only. Tables are walked raw (no __pairs runs); an error a metamethod raises
// is taken as "no such field", but Ctrl-C's "interrupted!" goes on up: an interrupt interrupts.
const char* const NAME_CAPTURED_LUA = R"(
local fn, ids = ...
local names, want, seen = {}, {}, {}
local by_module, optimizers = {}, {}
for i, id in ipairs(ids) do want[id] = i end
local queue = {}
local function push(value, path, depth) queue[#queue + 1] = {value, path, depth} end
local function checked(ok, v)   -- pcall's answer: v, or nil when it raised (an interrupt raises again)
  if not ok and type(v) == "string" and v:find("interrupted!", 1, true) then error(v, 0) end
  return ok and v or nil
end
local function field(t, key)   -- t[key] through its metatable, nil when that raises
  return checked(pcall(function() return t[key] end))
end
-- A module's parameters and buffers by their names in it (named_parameters, named_buffers).
local function name_module(module, path)
  for _, getter in ipairs({"named_parameters", "named_buffers"}) do
    local list = checked(pcall(module[getter], module))
    if type(list) == "table" then
      for _, pair in ipairs(list) do
        local at = torch.is_tensor(pair[2]) and want[pair[2].node]
        if at and not by_module[at] then names[at], by_module[at] = path .. "." .. pair[1], true end
      end
    end
  end
end
local n = 1
while true do
  local name, value = debug.getupvalue(fn, n)
  if not name then break end
  if name ~= "_ENV" then push(value, name, 0) end
  n = n + 1
end
for k, v in next, _G do if type(k) == "string" then push(v, k, 1) end end
local i = 1
while i <= #queue do
  local value, path, depth = queue[i][1], queue[i][2], queue[i][3]
  i = i + 1
  if torch.is_tensor(value) then
    local at = want[value.node]
    if at and not names[at] then names[at] = path end
  elseif (type(value) == "table" or type(value) == "function") and not seen[value] and depth < 4 then
    seen[value] = true
    if type(value) == "table" and value ~= _G and value ~= package.loaded then
      if type(field(value, "named_parameters")) == "function" and type(field(value, "named_buffers")) == "function" then
        name_module(value, path)
      end
      if type(rawget(value, "state")) == "table" and type(rawget(value, "param_groups")) == "table" then
        optimizers[#optimizers + 1] = {value, path}
      end
      for k, v in next, value do
        if type(k) == "string" or math.type(k) == "integer" then push(v, path .. "." .. tostring(k), depth + 1) end
      end
    elseif type(value) == "function" then
      local n = 1
      while true do
        local name, v = debug.getupvalue(value, n)
        if not name then break end
        if name ~= "_ENV" then push(v, name, depth + 1) end
        n = n + 1
      end
    end
  end
end
for _, o in ipairs(optimizers) do   -- state[p] = {exp_avg = ..., ...}: named after p
  local optimizer, path = o[1], o[2]
  for p, state in next, optimizer.state do
    local p_at = torch.is_tensor(p) and want[p.node]
    if p_at and names[p_at] and type(state) == "table" then
      for key, v in next, state do
        local at = torch.is_tensor(v) and want[v.node]
        if at and not by_module[at] then names[at] = path .. ".state." .. names[p_at] .. "." .. tostring(key) end
      end
    end
  end
end
return names
)";

// Names plan's captured tensors (NAME_CAPTURED_LUA). Returns "" or the error that stopped it
// (Ctrl-C's "interrupted!", memory): the caller raises it once its own state is put back.
std::string name_captured(lua_State* L, Frozen& f, Plan& plan) {
    if (plan.captured.empty() || f.fn_ref == LUA_NOREF) return "";
    int top = lua_gettop(L);
    if (luaL_loadstring(L, NAME_CAPTURED_LUA) != LUA_OK) {
        std::string error = lua_tostring(L, -1);
        lua_settop(L, top);
        return error;
    }
    lua_rawgeti(L, LUA_REGISTRYINDEX, f.fn_ref);
    lua_createtable(L, static_cast<int>(plan.captured.size()), 0);
    for (size_t i = 0; i < plan.captured.size(); ++i) {
        lua_pushinteger(L, plan.captured[i].tensor.id());
        lua_rawseti(L, -2, static_cast<lua_Integer>(i + 1));
    }
    if (lua_pcall(L, 2, 1, 0) != LUA_OK) {
        std::string error = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : "error naming the captured tensors";
        lua_settop(L, top);
        return error;
    }
    if (lua_istable(L, -1)) {
        for (size_t i = 0; i < plan.captured.size(); ++i) {
            if (lua_rawgeti(L, -1, static_cast<lua_Integer>(i + 1)) == LUA_TSTRING) plan.captured[i].name = lua_tostring(L, -1);
            lua_pop(L, 1);
        }
    }
    lua_settop(L, top);
    return "";
}

// The parameter names of the function for its n arguments ("argument 3" past its parameters).
std::vector<std::string> argument_names(lua_State* L, Frozen& f, int n) {
    std::vector<std::string> names;
    for (int i = 0; i < n; ++i) {
        std::string name = "argument " + std::to_string(i + 1);
        if (f.fn_ref != LUA_NOREF) {
            lua_rawgeti(L, LUA_REGISTRYINDEX, f.fn_ref);
            const char* local = lua_getlocal(L, nullptr, i + 1);
            if (local && local[0] != '(') name = local;
            lua_pop(L, 1);
        }
        names.push_back(name);
    }
    return names;
}

// The names of the tensor arguments among those at [first, first + n).
std::vector<std::string> input_names(lua_State* L, const std::vector<std::string>& names, int first) {
    std::vector<std::string> inputs;
    for (size_t i = 0; i < names.size(); ++i)
        if (tapedeck_test_tensor(L, first + static_cast<int>(i))) inputs.push_back(names[i]);
    return inputs;
}

// torch.freeze(fn, args...) records by running fn once, and nobody sees that run's results: its
// graph (a long unroll's: hundreds of MB) is let go before compiling, and the memory it held given
// back to the system, so that the freeze's peak is the recording and the plan, not the run as well.
void release_recorded_run(lua_State* L, int top, std::vector<Tensor>& outputs) {
    std::vector<Tensor>().swap(outputs);
    lua_settop(L, top);
    lua_gc(L, LUA_GCCOLLECT);
    engine_release_spares();
    malloc_trim(0);   // glibc: free pages amid the heap too, not only at its top
}

// The Lua values the recorded call changed itself (lua_values_record_end): said once each, as a
// replay will not change them.
void say_changed_by_call(Frozen& f, const std::vector<std::string>& changed) {
    for (const std::string& what : changed) {
        std::string key = "changed " + what.substr(0, what.find(';'));
        if (!f.verbose || std::find(f.told.begin(), f.told.end(), key) != f.told.end()) continue;
        f.told.push_back(key);
        fflush(stdout);
        fprintf(stderr, "freeze: %s changes the Lua value %s: a replay runs no Lua code, so it will not change it "
                        "(and it is not guarded); keep such state in tensors, or outside the frozen function\n",
                f.name.c_str(), what.c_str());
    }
}

// Runs fn on the arguments at [first, first + n) under the recorder, compiles what it recorded and
// puts the plan first in f's cache. With results_wanted, fn's results are left on the stack and
// their count returned (the first call of a frozen function returns them); without, they are
// dropped (release_recorded_run) and 0 returned.
int record_call(lua_State* L, Frozen& f, int first, int n, bool results_wanted) {
    if (plan_recording())
        raise(L, f.name + ": cannot record while another function is being frozen (call the eager function inside it)");
    CacheEntry e;
    std::vector<Tensor> tensors = split_args(L, first, n, &e.args_ref);
    std::vector<std::string> arg_names = argument_names(L, f, n);
    std::vector<std::string> names = input_names(L, arg_names, first);
    int top = lua_gettop(L);
    std::string error;
    try {
        plan_record_begin(f.name, tensors, names, f.where);
    } catch (const std::exception& x) {
        f.unref(e.args_ref);
        raise(L, x.what());
    }
    lua_rawgeti(L, LUA_REGISTRYINDEX, f.fn_ref);
    for (int i = 0; i < n; ++i) lua_pushvalue(L, first + i);
    tdlua::lua_values_record_begin(L, first, n, arg_names);
    int status = lua_pcall(L, n, LUA_MULTRET, 0);
    std::vector<std::string> changed_by_call;
    e.lua_values = tdlua::lua_values_record_end(L, &changed_by_call);
    if (status != LUA_OK) {
        plan_record_abort();
        f.drop_entry(e);
        return lua_error(L);   // the function's own error, unchanged (the caller's traceback shows where)
    }
    int n_results = lua_gettop(L) - top;
    std::vector<Tensor> outputs;
    std::string naming_error;   // raised as it is (an interrupt): not the freeze's message
    try {
        lua_createtable(L, n_results, 1);
        for (int i = 1; i <= n_results; ++i) {
            template_of(L, top + i, outputs, 0);
            lua_rawseti(L, -2, i);
        }
        set_integer(L, "n", n_results);
        e.results_ref = luaL_ref(L, LUA_REGISTRYINDEX);
        e.recorded = std::shared_ptr<Plan>(plan_record_end(outputs));
        naming_error = name_captured(L, f, *e.recorded);
        if (!naming_error.empty()) throw std::runtime_error(naming_error);
        if (!results_wanted) {
            release_recorded_run(L, top, outputs);
            n_results = 0;
        }
        e.plan = std::shared_ptr<Plan>(plan_compile(e.recorded, f.passes));
        if (f.native) tdlua::plan_make_native(f.name, *e.plan, f.native_told);
        if (!results_wanted) malloc_trim(0);   // and the compile's temporaries (per-value tables)
    } catch (const std::exception& x) {
        plan_record_abort();
        f.drop_entry(e);
        error = x.what();
    }
    if (!naming_error.empty()) {
        lua_pushstring(L, naming_error.c_str());
        return lua_error(L);
    }
    if (!error.empty()) raise(L, error);
    f.cache.insert(f.cache.begin(), e);
    while (static_cast<int>(f.cache.size()) > std::max(1, f.cache_size)) {
        f.drop_entry(f.cache.back());
        f.cache.pop_back();
    }
    ++f.records;
    say_changed_by_call(f, changed_by_call);
    return n_results;
}

// Keeps the arguments of a call that succeeded (for :timeit, which runs the plan that call used,
// first in the cache) in one table, refilled each call (no allocation).
void remember_args(lua_State* L, Frozen& f, int first, int n) {
    if (f.last_args_ref == LUA_NOREF) {
        lua_createtable(L, n, 1);
        set_integer(L, "n", 0);
        f.last_args_ref = luaL_ref(L, LUA_REGISTRYINDEX);
        f.last_args_n = 0;
    }
    lua_rawgeti(L, LUA_REGISTRYINDEX, f.last_args_ref);
    int t = lua_gettop(L);
    for (int i = 0; i < n; ++i) {
        lua_pushvalue(L, first + i);
        lua_rawseti(L, t, i + 1);
    }
    for (int i = n + 1; i <= f.last_args_n; ++i) {
        lua_pushnil(L);
        lua_rawseti(L, t, i);
    }
    if (n != f.last_args_n) {
        lua_pushinteger(L, n);
        lua_setfield(L, t, "n");
        f.last_args_n = n;
    }
    lua_settop(L, t - 1);
}

constexpr int EAGER_AFTER_FAILURES = 3;

// The function itself on the call's arguments (f.eager): all its results.
int call_eagerly(lua_State* L, Frozen& f, int first, int n) {
    ++f.eager_calls;
    int top = lua_gettop(L);
    lua_rawgeti(L, LUA_REGISTRYINDEX, f.fn_ref);
    for (int i = 0; i < n; ++i) lua_pushvalue(L, first + i);
    lua_call(L, n, LUA_MULTRET);
    return lua_gettop(L) - top;
}

// Why a call found no plan, from the first cached plan that did not fit: the reason, and for a
// value the code read (a tensor's value, a Lua value) the key that counts its failures in a row
// ("item() at step.lua:6", "lr at step.lua:9") and what to do about it.
struct CallMiss {
    std::string reason;
    std::string key;          // "" when the miss is not on a value the code read
    std::string hint;
    std::string lua_name;     // a Lua value's name ("lr"), "" for a tensor's value
};

CallMiss miss_on_guard(const Plan& plan, int guard, const std::string& reason) {
    CallMiss miss;
    miss.reason = reason;
    if (guard < 0 || !plan_guard_reads_value(plan, guard)) return miss;
    const PlanGuard& g = plan.guards[guard];
    miss.key = g.text + " at " + source_loc_str(g.where);
    miss.hint = plan_guard_advice(plan, guard);
    return miss;
}

CallMiss miss_on_lua_value(lua_State* L, const CacheEntry& e, int guard) {
    const tdlua::LuaValueGuard& g = e.lua_values.list[static_cast<size_t>(guard)];
    CallMiss miss;
    miss.reason = tdlua::lua_values_describe_change(L, e.lua_values, guard);
    miss.key = g.name + " at " + source_loc_str(g.where);
    miss.lua_name = g.name;
    lua_rawgeti(L, LUA_REGISTRYINDEX, e.lua_values.values_ref);
    bool number = lua_rawgeti(L, -1, 3 * static_cast<lua_Integer>(guard) + 3) == LUA_TNUMBER;   // as recorded
    lua_pop(L, 2);
    if (number)
        miss.hint = "pass " + g.name + " as a tensor argument (torch.tensor(" + g.name +
                    ")) and compute with it in tensors: one plan then serves every value";
    else   // a flag or a string chooses code: one frozen function per choice, or the choice outside
        miss.hint = "make the choice " + g.name + " stands for outside the frozen function (one frozen function "
                    "per value of it)";
    return miss;
}

// Counts a value guard failing call after call; after EAGER_AFTER_FAILURES the function goes
// eager (said once, by the caller).
void note_miss(Frozen& f, const CallMiss& miss) {
    if (miss.key.empty()) {
        f.failing_guard.clear();
        f.failures_in_row = 0;
        return;
    }
    f.failures_in_row = miss.key == f.failing_guard ? f.failures_in_row + 1 : 1;
    f.failing_guard = miss.key;
    if (f.failures_in_row >= EAGER_AFTER_FAILURES) f.eager = true;
}

// The messages of a call that re-records (or, when it made f go eager, says so once). A Lua
// value's change is said once per value: a new value is a new plan, as a new argument is.
void say_miss(Frozen& f, const CallMiss& miss) {
    fflush(stdout);   // the message after what the program printed before
    if (!f.eager) {
        if (!miss.lua_name.empty()) {
            if (std::find(f.told.begin(), f.told.end(), miss.key) != f.told.end()) return;
            f.told.push_back(miss.key);
        }
        fprintf(stderr, "freeze: re-recording %s: %s\n", f.name.c_str(), miss.reason.c_str());
        if (!miss.lua_name.empty())
            fprintf(stderr, "  a plan keeps the Lua values its function read: a new value means a new recording (said "
                            "once for %s). If it changes every call, %s\n", miss.lua_name.c_str(), miss.hint.c_str());
        else if (!miss.hint.empty())
            fprintf(stderr, "  %s reads a tensor's value, so a new value means a new recording: %s\n",
                    f.failing_guard.c_str(), miss.hint.c_str());
        return;
    }
    std::string what = miss.lua_name.empty() ? "the guard on " + f.failing_guard + " failed"
                                             : "the Lua value " + f.failing_guard + " changed";
    fprintf(stderr,
            "freeze: %s: %s %d calls in a row: from now on it runs eagerly, without recording. To freeze it, %s; "
            "then freeze it again (or set its eager = false)\n",
            f.name.c_str(), what.c_str(), f.failures_in_row, miss.hint.c_str());
}

// The first cached plan that fits the call at [first, first + n) runs: its results are pushed and
// their count returned; -1 when none fits (`miss` says why the first one did not).
int run_cached_plan(lua_State* L, Frozen& f, int first, int n, const std::vector<Tensor>& tensors, CallMiss& miss) {
    for (size_t c = 0; c < f.cache.size(); ++c) {
        CacheEntry& e = f.cache[c];
        std::string why = f.fn_ref == LUA_NOREF ? "" : args_mismatch(L, e, first, n);
        int changed = why.empty() ? tdlua::lua_values_check(L, e.lua_values) : -1;
        if (changed >= 0) {
            if (miss.reason.empty()) miss = miss_on_lua_value(L, e, changed);
            continue;
        }
        if (why.empty()) why = plan_check_inputs(*e.plan, tensors);
        if (why.empty()) {
            PlanRunResult result;
            std::string error;
            try {
                result = plan_run(*e.plan, tensors, true);
            } catch (const std::exception& x) {
                error = x.what();
            }
            if (!error.empty()) raise(L, error);
            if (result.completed) {
                ++f.replays;
                f.failures_in_row = 0;
                f.failing_guard.clear();
                if (c > 0) std::rotate(f.cache.begin(), f.cache.begin() + static_cast<long>(c), f.cache.begin() + static_cast<long>(c) + 1);
                remember_args(L, f, first, n);
                return push_results(L, f.cache.front(), result.outputs);
            }
            if (miss.reason.empty()) miss = miss_on_guard(*e.plan, result.failed_guard, result.reason);
        }
        if (miss.reason.empty()) miss.reason = why;
    }
    return -1;
}

// f(...): the first cached plan that fits runs; else re-record (or refuse when strict).
int frozen_call(lua_State* L) {
    Frozen& f = check_frozen(L, 1);
    int first = 2, n = lua_gettop(L) - 1;
    ++f.calls;
    if (f.eager && f.fn_ref != LUA_NOREF) return call_eagerly(L, f, first, n);
    if (plan_recording())
        raise(L, f.name + ": a frozen function cannot run while another function is being frozen (call its eager function)");
    struct BorrowedInputs {   // f's spare vector for this call, emptied and handed back however it ends
        std::vector<Tensor>& home;
        std::vector<Tensor> tensors;
        explicit BorrowedInputs(std::vector<Tensor>& spare) : home(spare) { tensors.swap(home); }
        ~BorrowedInputs() {
            tensors.clear();
            home.swap(tensors);
        }
    } borrowed(f.spare_inputs);
    std::vector<Tensor>& tensors = borrowed.tensors;
    for (int i = 0; i < n; ++i)
        if (Tensor* t = tapedeck_test_tensor(L, first + i)) tensors.push_back(*t);
    CallMiss miss;
    int n_results = run_cached_plan(L, f, first, n, tensors, miss);
    if (n_results >= 0) return n_results;
    if (!miss.reason.empty()) f.last_reason = miss.reason;
    std::string frozen_at = f.where.file >= 0 ? " (frozen at " + source_loc_str(f.where) + ")" : "";
    if (f.fn_ref == LUA_NOREF) raise(L, f.name + ": " + miss.reason + frozen_at);
    if (f.strict && !f.cache.empty())
        raise(L, f.name + ": guard failed: " + miss.reason + "; strict mode does not re-record" + frozen_at);
    if (!f.cache.empty()) note_miss(f, miss);
    if (f.verbose && !f.cache.empty()) say_miss(f, miss);
    if (f.eager) return call_eagerly(L, f, first, n);   // said once: from now on calls do not get here
    n_results = record_call(L, f, first, n, true);
    remember_args(L, f, first, n);
    return n_results;
}

// ============================================================================================
// [SECTION] timeit

// Calls fn (the function at fn_idx) with the last arguments; false with the message on error.
bool call_with_last_args(lua_State* L, Frozen& f, int fn_idx, int* base) {
    *base = lua_gettop(L);
    lua_pushvalue(L, fn_idx);
    lua_rawgeti(L, LUA_REGISTRYINDEX, f.last_args_ref);
    int args = lua_gettop(L);
    lua_getfield(L, args, "n");
    int n = static_cast<int>(lua_tointeger(L, -1));
    lua_pop(L, 1);
    for (int i = 1; i <= n; ++i) lua_rawgeti(L, args, i);
    lua_remove(L, args);
    return lua_pcall(L, n, LUA_MULTRET, 0) == LUA_OK;
}

// plan_timeit's call of fn (the function at fn_idx) on the last arguments: the values of the
// tensors it returned, when asked; a Lua error when it raises one.
PlanTimeitCall timeit_call(lua_State* L, Frozen& f, int fn_idx) {
    return [L, &f, fn_idx](std::vector<Value>* returned) {
        int base;
        if (!call_with_last_args(L, f, fn_idx, &base)) lua_error(L);
        if (returned)
            for (int i = base + 1; i <= lua_gettop(L); ++i)
                if (Tensor* t = tapedeck_test_tensor(L, i)) returned->push_back(t->value());
        lua_settop(L, base);
    };
}

// The tensor arguments of f's last call.
std::vector<Tensor> last_tensor_args(lua_State* L, const Frozen& f) {
    std::vector<Tensor> inputs;
    lua_rawgeti(L, LUA_REGISTRYINDEX, f.last_args_ref);
    for (lua_Integer i = 1; i <= luaL_len(L, -1); ++i) {
        lua_rawgeti(L, -1, i);
        if (Tensor* t = tapedeck_test_tensor(L, -1)) inputs.push_back(*t);
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
    return inputs;
}

// f:timeit(n): {eager_min_us, eager_median_us, frozen_min_us, frozen_median_us, speedup,
// eager_peak_bytes, frozen_peak_bytes, max_diff, iterations}. Both run on the last call's
// arguments from the same state, which is put back afterwards (plan_timeit.h).
int frozen_timeit(lua_State* L) {
    Frozen& f = check_frozen(L, 1);
    int64_t iterations = lua_isnoneornil(L, 2) ? 100 : tdlua::check_integer(L, 2, "iterations");
    if (iterations < 1 || iterations > 100000000) tdlua::arg_fail(2, "iterations must be 1..100000000, got %lld", static_cast<long long>(iterations));
    if (lua_gettop(L) > 2) tdlua::arg_fail(3, "timeit takes one argument, the number of iterations");
    if (f.fn_ref == LUA_NOREF) engine_fail("timeit: %s was loaded from a file: there is no eager function to compare with", f.name.c_str());
    if (f.last_args_ref == LUA_NOREF || f.cache.empty()) engine_fail("timeit: %s has not been called yet", f.name.c_str());
    lua_settop(L, 1);
    lua_rawgeti(L, LUA_REGISTRYINDEX, f.fn_ref);
    int fn_idx = lua_gettop(L);
    std::vector<Tensor> inputs = last_tensor_args(L, f);
    std::shared_ptr<Plan> plan = f.cache.front().plan;
    std::string why = plan_check_inputs(*plan, inputs);   // the last successful call made it first: it fits
    if (!why.empty()) engine_fail("timeit: %s's latest plan does not fit its last arguments: %s", f.name.c_str(), why.c_str());
    PlanTimeitCalls calls;
    calls.eager = timeit_call(L, f, fn_idx);
    calls.frozen = timeit_call(L, f, 1);
    calls.collect_garbage = [L] { lua_gc(L, LUA_GCCOLLECT); };
    calls.latest_plan = [&f] { return f.cache.front().plan; };
    tdlua::NativeSwitch native_switch{plan};   // however timeit ends, native code runs again
    if (plan->native) calls.set_native = [&native_switch](bool on) { native_switch.set(on); };
    PlanTimeit timed = plan_timeit(*plan, inputs, iterations, calls);
    const PlanTiming &e = timed.eager, &z = timed.frozen;
    lua_createtable(L, 0, 10);
    auto field = [&](const char* name, double v) {
        lua_pushnumber(L, v);
        lua_setfield(L, -2, name);
    };
    field("eager_min_us", e.min_us);
    field("eager_median_us", e.median_us);
    field("frozen_min_us", z.min_us);
    field("frozen_median_us", z.median_us);
    field("speedup", z.min_us > 0 ? e.min_us / z.min_us : 0);
    field("eager_peak_bytes", static_cast<double>(e.peak_bytes));
    field("frozen_peak_bytes", static_cast<double>(z.peak_bytes));
    field("eager_gpu_peak_bytes", static_cast<double>(e.gpu_peak_bytes));
    field("frozen_gpu_peak_bytes", static_cast<double>(z.gpu_peak_bytes));
    field("max_diff", timed.max_diff);
    field("iterations", iterations);
    tdlua::push_native_timing(L, timed);
    return 1;
}

// ============================================================================================
// [SECTION] bindings

// Reads {dce=, cse=, fold=, fuse=, inplace=, reuse=} into passes; unknown keys are errors, but for
// `also` (an option the caller reads itself: load_plan's max_bytes), which is skipped.
#define PLAN_PASS_OPTIONS "dce cse fold fuse inplace reuse all"
void passes_from_table(lua_State* L, int idx, PlanPasses& passes, const char* also = nullptr) {
    idx = lua_absindex(L, idx);
    tdlua::options_check(L, idx, also ? "max_bytes " PLAN_PASS_OPTIONS : PLAN_PASS_OPTIONS);
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        const char* key = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : "?";
        bool on = lua_toboolean(L, -1);
        if (also && strcmp(key, also) == 0) {
            lua_pop(L, 1);
            continue;
        }
        if (strcmp(key, "dce") == 0) passes.dce = on;
        else if (strcmp(key, "cse") == 0) passes.cse = on;
        else if (strcmp(key, "fold") == 0) passes.fold = on;
        else if (strcmp(key, "fuse") == 0) passes.fuse = on;
        else if (strcmp(key, "inplace") == 0) passes.inplace = on;
        else if (strcmp(key, "reuse") == 0) passes.reuse = on;
        else if (strcmp(key, "all") == 0) passes = on ? PlanPasses() : PlanPasses{false, false, false, false, false, false};
        lua_pop(L, 1);
    }
}

std::string function_name(lua_State* L, int idx) {
    lua_Debug ar;
    lua_pushvalue(L, idx);
    lua_getinfo(L, ">S", &ar);
    return std::string("function (") + ar.short_src + ":" + std::to_string(ar.linedefined) + ")";
}

constexpr int MAX_FREEZE_ARGS = 200;

// The options of torch.freeze{fn, args..., name=, strict=, verbose=, cache=, passes=}, read into
// f; unknown keys are errors (a typo must not pass silently).
#define FREEZE_OPTIONS "name strict verbose cache passes native"
void freeze_options(lua_State* L, int idx, Frozen& f) {
    tdlua::options_check(L, idx, FREEZE_OPTIONS);
    lua_Integer count = static_cast<lua_Integer>(lua_rawlen(L, idx));
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        if (lua_isinteger(L, -2) && lua_tointeger(L, -2) >= 1 && lua_tointeger(L, -2) <= count) {
            lua_pop(L, 1);
            continue;
        }
        const char* key = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : "?";
        if (strcmp(key, "name") == 0) {
            f.name = tdlua::check_string(L, -1, "name");
        } else if (strcmp(key, "strict") == 0) {
            f.strict = lua_toboolean(L, -1);
        } else if (strcmp(key, "verbose") == 0) {
            f.verbose = lua_toboolean(L, -1);
        } else if (strcmp(key, "native") == 0) {
            f.native = lua_toboolean(L, -1);
        } else if (strcmp(key, "cache") == 0) {
            int is_integer = 0;
            lua_Integer size = lua_tointegerx(L, -1, &is_integer);
            if (!is_integer || size < 1 || size > 1000)
                tdlua::arg_fail(idx, "cache must be a number of plans, 1..1000, got %s", luaL_tolstring(L, -1, nullptr));
            f.cache_size = static_cast<int>(size);
        } else if (strcmp(key, "passes") == 0) {
            if (!lua_istable(L, -1)) tdlua::arg_fail(idx, "passes must be a table like {fuse = false}, got %s", tdlua::type_name_of(L, -1));
            passes_from_table(L, lua_gettop(L), f.passes);
        }
        lua_pop(L, 1);
    }
}

// torch.freeze(fn, args...) or torch.freeze{fn, args..., strict=, cache=, verbose=, passes=, name=, native=}
int l_freeze(lua_State* L) {
    bool options = lua_istable(L, 1);
    int fn_idx = 1, first = 2, n = lua_gettop(L) - 1;
    if (options) {
        lua_Integer count = static_cast<lua_Integer>(lua_rawlen(L, 1));
        if (count > MAX_FREEZE_ARGS + 1) tdlua::arg_fail(1, "at most %d arguments", MAX_FREEZE_ARGS);
        luaL_checkstack(L, static_cast<int>(count) + 8, "too many arguments");
        for (lua_Integer i = 1; i <= count; ++i) lua_rawgeti(L, 1, i);
        fn_idx = 2;
        first = 3;
        n = static_cast<int>(count) - 1;
    }
    if (lua_type(L, fn_idx) != LUA_TFUNCTION)
        tdlua::arg_fail(1, "expects a function first (torch.freeze(fn, args...) or torch.freeze{fn, args...}), got %s",
                        tdlua::type_name_of(L, fn_idx));
    Frozen& f = push_frozen(L);
    int self = lua_gettop(L);
    lua_pushvalue(L, fn_idx);
    f.fn_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    f.where = lua_loc(L, 1);
    f.name = function_name(L, fn_idx);
    bool record_now = !options;
    if (options) {
        freeze_options(L, 1, f);
        record_now = n > 0;
    }
    if (record_now) {
        record_call(L, f, first, n, false);
        remember_args(L, f, first, n);
    }
    lua_pushvalue(L, self);
    return 1;
}

int frozen_gc(lua_State* L) {
    Frozen** p = static_cast<Frozen**>(tapedeck_test_udata(L, 1, tdlua::bindings_state.frozen_metatable));
    if (!p) return 0;
    delete *p;
    *p = nullptr;   // test_frozen refuses it from now on
    return 0;
}

int frozen_tostring(lua_State* L) {
    Frozen& f = check_frozen(L, 1);
    if (f.cache.empty()) {
        lua_pushfstring(L, "frozen %s (not recorded yet)", f.name.c_str());
        return 1;
    }
    const Plan& p = *f.cache.front().plan;
    lua_pushfstring(L, "frozen %s: %d steps, %d guards, %d plan%s cached", f.name.c_str(), static_cast<int>(p.steps.size()),
                    static_cast<int>(p.guards.size()), static_cast<int>(f.cache.size()), f.cache.size() == 1 ? "" : "s");
    return 1;
}

// f:plan(): the :plan text of the most recently used plan.
int frozen_plan(lua_State* L) {
    Frozen& f = check_frozen(L, 1);
    if (f.cache.empty()) engine_fail("plan: %s was not recorded yet (call it once)", f.name.c_str());
    lua_pushstring(L, plan_describe(*f.cache.front().plan).c_str());
    return 1;
}

// f:with_passes{fuse = false}: a new frozen function, the same recording compiled with those passes.
int frozen_with_passes(lua_State* L) {
    Frozen& f = check_frozen(L, 1);
    if (!lua_istable(L, 2)) tdlua::arg_fail(2, "expected a table of passes like {fuse = false}, got %s", tdlua::type_name_of(L, 2));
    if (f.cache.empty()) engine_fail("with_passes: %s was not recorded yet (call it once)", f.name.c_str());
    PlanPasses passes = f.passes;
    passes_from_table(L, 2, passes);
    Frozen& g = push_frozen(L);
    g.name = f.name;
    g.where = f.where;
    g.strict = f.strict;
    g.verbose = f.verbose;
    g.cache_size = f.cache_size;
    g.native = f.native;
    g.passes = passes;
    if (f.fn_ref != LUA_NOREF) {
        lua_rawgeti(L, LUA_REGISTRYINDEX, f.fn_ref);
        g.fn_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    }
    if (f.last_args_ref != LUA_NOREF) {   // a copy: each function's calls update only its own
        lua_rawgeti(L, LUA_REGISTRYINDEX, f.last_args_ref);
        lua_createtable(L, f.last_args_n, 1);
        for (int i = 1; i <= f.last_args_n; ++i) {
            lua_rawgeti(L, -2, i);
            lua_rawseti(L, -2, i);
        }
        set_integer(L, "n", f.last_args_n);
        g.last_args_ref = luaL_ref(L, LUA_REGISTRYINDEX);
        g.last_args_n = f.last_args_n;
        lua_pop(L, 1);
    }
    for (const CacheEntry& e : f.cache) {
        CacheEntry c;
        c.recorded = e.recorded;
        c.plan = std::shared_ptr<Plan>(plan_compile(e.recorded, passes));
        if (f.native) tdlua::plan_make_native(g.name, *c.plan, g.native_told);
        lua_rawgeti(L, LUA_REGISTRYINDEX, e.args_ref);
        c.args_ref = luaL_ref(L, LUA_REGISTRYINDEX);
        lua_rawgeti(L, LUA_REGISTRYINDEX, e.results_ref);
        c.results_ref = luaL_ref(L, LUA_REGISTRYINDEX);
        if (!e.lua_values.list.empty()) {   // the same guards, held by g's own reference
            lua_rawgeti(L, LUA_REGISTRYINDEX, e.lua_values.values_ref);
            c.lua_values.values_ref = luaL_ref(L, LUA_REGISTRYINDEX);
            c.lua_values.list = e.lua_values.list;
        }
        g.cache.push_back(c);
    }
    return 1;
}

int frozen_stats(lua_State* L) {
    Frozen& f = check_frozen(L, 1);
    lua_createtable(L, 0, 20);
    set_integer(L, "calls", f.calls);
    set_integer(L, "replays", f.replays);
    set_integer(L, "records", f.records);
    set_integer(L, "cached", f.cache.size());
    set_string(L, "last_reason", f.last_reason);
    set_boolean(L, "eager", f.eager);
    set_integer(L, "eager_calls", f.eager_calls);
    if (!f.cache.empty()) {
        const PlanStats& s = f.cache.front().plan->stats;
        set_integer(L, "steps", f.cache.front().plan->steps.size());
        set_integer(L, "recorded_nodes", s.recorded_nodes);
        set_integer(L, "buffer_bytes", s.buffer_bytes);
        set_integer(L, "eager_peak_bytes", s.eager_peak_bytes);
        set_integer(L, "fused_groups", s.fused_groups);
        const Plan& compiled = *f.cache.front().plan;
        set_string(L, "device", device_name(compiled.device));
        PlanGraphStats graphs = plan_graph_stats(compiled);
        set_integer(L, "graph_segments", graphs.segments);
        set_integer(L, "graph_steps", graphs.steps);
        set_integer(L, "graphs_captured", graphs.captured);
        set_integer(L, "guards", f.cache.front().plan->guards.size());
        set_number(L, "record_seconds", s.record_seconds);
        set_number(L, "compile_seconds", s.compile_seconds);
        set_number(L, "flops", plan_flops(compiled));
        tdlua::push_native_stats(L, compiled);
        const std::vector<tdlua::LuaValueGuard>& lua_values = f.cache.front().lua_values.list;
        lua_createtable(L, static_cast<int>(lua_values.size()), 0);   // "lr (an upvalue, step.lua:9)"
        for (size_t i = 0; i < lua_values.size(); ++i) {
            const tdlua::LuaValueGuard& g = lua_values[i];
            std::string text = g.name + " (" + g.kind + (g.where.file >= 0 ? ", " + source_loc_str(g.where) : "") + ")";
            lua_pushstring(L, text.c_str());
            lua_rawseti(L, -2, static_cast<lua_Integer>(i + 1));
        }
        lua_setfield(L, -2, "lua_values");
    }
    return 1;
}

// f.strict, f.cache_size, f.verbose, f.name (read and write); methods.
int frozen_index(lua_State* L) {
    Frozen& f = check_frozen(L, 1);
    const char* key = tdlua::check_string(L, 2, "field name");
    if (strcmp(key, "strict") == 0) lua_pushboolean(L, f.strict);
    else if (strcmp(key, "eager") == 0) lua_pushboolean(L, f.eager);
    else if (strcmp(key, "verbose") == 0) lua_pushboolean(L, f.verbose);
    else if (strcmp(key, "cache_size") == 0) lua_pushinteger(L, f.cache_size);
    else if (strcmp(key, "name") == 0) lua_pushstring(L, f.name.c_str());
    else if (strcmp(key, "fn") == 0) {
        if (f.fn_ref == LUA_NOREF) lua_pushnil(L);
        else lua_rawgeti(L, LUA_REGISTRYINDEX, f.fn_ref);
    } else {
        lua_getmetatable(L, 1);
        lua_getfield(L, -1, "methods");
        lua_getfield(L, -1, key);
        if (lua_isnil(L, -1)) engine_fail("frozen function: %s has no field or method '%s'", f.name.c_str(), key);
    }
    return 1;
}

int frozen_newindex(lua_State* L) {
    Frozen& f = check_frozen(L, 1);
    const char* key = tdlua::check_string(L, 2, "field name");
    if (strcmp(key, "strict") == 0) {
        f.strict = lua_toboolean(L, 3);
    } else if (strcmp(key, "verbose") == 0) {
        f.verbose = lua_toboolean(L, 3);
    } else if (strcmp(key, "eager") == 0) {   // false: record (and replay) again; true: run eagerly
        if (lua_toboolean(L, 3) && f.fn_ref == LUA_NOREF)
            engine_fail("frozen function: %s was loaded from a plan file and has no Lua function to run eagerly", f.name.c_str());
        f.eager = lua_toboolean(L, 3);
        f.failures_in_row = 0;
        f.failing_guard.clear();
    } else if (strcmp(key, "cache_size") == 0) {
        int64_t size = tdlua::check_integer(L, 3, "cache_size");
        if (size < 1 || size > 1000) tdlua::arg_fail(3, "cache_size must be 1..1000, got %lld", static_cast<long long>(size));
        f.cache_size = static_cast<int>(size);
    } else if (strcmp(key, "name") == 0) {
        f.name = tdlua::check_string(L, 3, "name");
    } else {
        engine_fail("frozen function: cannot set '%s' (strict, verbose, eager, cache_size, name)", key);
    }
    return 0;
}

// torch.save_plan(f, path): the most recently used plan, its weights and its passes.
int l_save_plan(lua_State* L) {
    Frozen& f = check_frozen(L, 1);
    const char* path = tdlua::check_string(L, 2, "path");
    if (f.cache.empty()) engine_fail("save_plan: %s was never recorded (call it once)", f.name.c_str());
    plan_save(*f.cache.front().recorded, f.passes, path);
    return 0;
}

// load_plan's {max_bytes = N}: the memory bound of plan_load (0: its default).
size_t load_plan_max_bytes(lua_State* L, int idx) {
    lua_getfield(L, idx, "max_bytes");
    size_t max_bytes = 0;
    if (!lua_isnil(L, -1)) {
        int is_integer = 0;
        lua_Integer n = lua_tointegerx(L, -1, &is_integer);
        if (!is_integer || n < 1)
            tdlua::arg_fail(idx, "max_bytes must be a positive whole number of bytes, got %s", luaL_tolstring(L, -1, nullptr));
        max_bytes = static_cast<size_t>(n);
    }
    lua_pop(L, 1);
    return max_bytes;
}

// torch.load_plan(path [, {max_bytes = N, passes...}]): a frozen function that runs the file's
// plan; its results are the tensors the function returned, in order. It cannot re-record: wrong
// inputs are an error. max_bytes bounds the memory the plan may take (plan_load); the passes
// switch the file's passes on or off.
int l_load_plan(lua_State* L) {
    const char* path = tdlua::check_string(L, 1, "path");
    bool options = !lua_isnoneornil(L, 2);
    if (options && !lua_istable(L, 2))
        tdlua::arg_fail(2, "options must be a table like {max_bytes = 2^30, fuse = false}, got %s", tdlua::type_name_of(L, 2));
    PlanLoadOptions load;
    if (options) load.max_bytes = load_plan_max_bytes(L, 2);
    PlanPasses passes;
    std::shared_ptr<Plan> recorded(plan_load(path, &passes, load));
    if (options) passes_from_table(L, 2, passes, "max_bytes");
    Frozen& f = push_frozen(L);
    f.name = recorded->name;
    f.passes = passes;
    CacheEntry e;
    e.recorded = recorded;
    e.plan = std::shared_ptr<Plan>(plan_compile(recorded, passes));
    lua_createtable(L, 0, 1);   // any arguments: only tensors count for a loaded plan
    set_integer(L, "n", recorded->inputs.size());
    for (size_t i = 0; i < recorded->inputs.size(); ++i) {
        lua_pushlightuserdata(L, &tdlua::bindings_state.tensor_marker);
        lua_rawseti(L, -2, static_cast<lua_Integer>(i + 1));
    }
    e.args_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    lua_createtable(L, static_cast<int>(recorded->outputs.size()), 1);
    for (size_t i = 0; i < recorded->outputs.size(); ++i) {
        lua_createtable(L, 0, 1);
        lua_pushlightuserdata(L, &tdlua::bindings_state.tensor_marker);
        lua_pushinteger(L, static_cast<lua_Integer>(i + 1));
        lua_rawset(L, -3);
        lua_rawseti(L, -2, static_cast<lua_Integer>(i + 1));
    }
    set_integer(L, "n", recorded->outputs.size());
    e.results_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    f.cache.push_back(e);
    return 1;
}

// f:params(): {name = tensor} of the captured tensors (a loaded plan's weights).
int frozen_params(lua_State* L) {
    Frozen& f = check_frozen(L, 1);
    lua_newtable(L);
    if (f.cache.empty()) return 1;
    const Plan& p = *f.cache.front().plan;
    for (size_t i = 0; i < p.captured.size(); ++i) {
        std::string name = p.captured[i].name.empty() ? "#" + std::to_string(p.captured[i].tensor.id()) : p.captured[i].name;
        tapedeck_push_tensor(L, p.captured[i].tensor);
        lua_setfield(L, -2, name.c_str());
    }
    return 1;
}

// f:native(): its plans, and those it records from now on, run native code. true, or false and
// why not (said on stderr as well): then the interpreted plans run.
int frozen_native(lua_State* L) {
    Frozen& f = check_frozen(L, 1);
    if (lua_gettop(L) > 1) tdlua::arg_fail(2, "native takes no arguments");
    f.native = true;
    std::string why;
    for (CacheEntry& e : f.cache) {
        std::string failed = tdlua::plan_make_native(f.name, *e.plan, f.native_told);
        if (why.empty()) why = failed;
    }
    lua_pushboolean(L, why.empty());
    if (!why.empty()) lua_pushstring(L, why.c_str());
    return why.empty() ? 1 : 2;
}

// f:source(): the C++ of its latest plan's native code (made now when it was not).
int frozen_source(lua_State* L) {
    Frozen& f = check_frozen(L, 1);
    if (lua_gettop(L) > 1) tdlua::arg_fail(2, "source takes no arguments");
    if (f.cache.empty()) engine_fail("source: %s was never recorded (call it once)", f.name.c_str());
    lua_pushstring(L, tdlua::plan_source_text(f.name, *f.cache.front().plan).c_str());
    return 1;
}

int l_is_frozen(lua_State* L) {
    lua_pushboolean(L, test_frozen(L, 1) != nullptr);
    return 1;
}

const tdlua::Binding frozen_methods[] = {
    {"plan", frozen_plan}, {"passes", tapedeck_frozen_passes}, {"with_passes", frozen_with_passes, PLAN_PASS_OPTIONS}, {"stats", frozen_stats},
    {"timeit", frozen_timeit}, {"params", frozen_params}, {"native", frozen_native}, {"source", frozen_source}, {nullptr, nullptr},
};

const tdlua::Binding frozen_metamethods[] = {
    {"__index", frozen_index, nullptr, "frozen function"}, {"__newindex", frozen_newindex, nullptr, "frozen function"}, {nullptr, nullptr},
};

const tdlua::Binding torch_plan_functions[] = {
    {"freeze", l_freeze, FREEZE_OPTIONS}, {"save_plan", l_save_plan}, {"load_plan", l_load_plan, "max_bytes " PLAN_PASS_OPTIONS},
    {"is_frozen", l_is_frozen, tdlua::OPTIONS_TABLE_IS_VALUE}, {nullptr, nullptr},
};

}  // namespace

void tapedeck_open_plan(lua_State* L) {
    luaL_newmetatable(L, FROZEN_TYPE);
    tdlua::bindings_state.frozen_metatable = lua_topointer(L, -1);
    lua_pushcfunction(L, frozen_gc);
    lua_setfield(L, -2, "__gc");
    lua_pushstring(L, FROZEN_TYPE);   // getmetatable(f) gives the type name: scripts cannot call __gc
    lua_setfield(L, -2, "__metatable");
    lua_pushcfunction(L, frozen_call);
    lua_setfield(L, -2, "__call");
    lua_pushcfunction(L, frozen_tostring);
    lua_setfield(L, -2, "__tostring");
    tdlua::register_bindings(L, frozen_metamethods, nullptr);
    lua_newtable(L);
    tdlua::register_bindings(L, frozen_methods, "f:");
    lua_setfield(L, -2, "methods");
    lua_pop(L, 1);
    tdlua::register_bindings(L, torch_plan_functions, "torch.");   // into the torch table on top of the stack
}

bool tapedeck_is_frozen(lua_State* L, int idx) { return test_frozen(L, idx) != nullptr; }

std::shared_ptr<const Plan> tapedeck_frozen_recording(lua_State* L, int idx) {
    Frozen& f = check_frozen(L, idx);
    if (f.cache.empty()) engine_fail("%s was never recorded (call it once)", f.name.c_str());
    return f.cache.front().recorded;
}

std::shared_ptr<const Plan> tapedeck_frozen_plan(lua_State* L, int idx) {
    Frozen& f = check_frozen(L, idx);
    if (f.cache.empty()) engine_fail("%s was never recorded (call it once)", f.name.c_str());
    return f.cache.front().plan;
}
