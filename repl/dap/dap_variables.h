// dap_variables.h: DAP's variables at a stop: the scopes of a frame (Locals, Upvalues, Stop) and
// what a value expands into (a table's fields; a tensor's shape, dtype, device, node, statistics,
// gradient and values), each container a `variablesReference` valid until the stop's view changes.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

struct lua_State;

enum DapScope : uint8_t {
    DAP_LOCALS,          // the locals of a Lua frame (`frame`: index in DebugStop::frames)
    DAP_UPVALUES,        // its upvalues
    DAP_STOP,            // the stop's names: node, out, inputs, saved, grad_output, grad_input, ...
    DAP_GLOBALS,         // the script's globals: those not there before it ran (note_startup_globals)
    DAP_VALUE,           // a table or tensor held (`held`: its index in the holding table)
    DAP_TENSOR_VALUES,   // the elements of a held tensor under `prefix` (1-based leading indices)
};

struct DapContainer {
    DapScope kind = DAP_VALUE;
    int frame = -1;
    int held = 0;
    std::vector<int64_t> prefix;
};

class DapVariables {
public:
    // Note the globals there are before the script runs (the libraries): the Globals scope leaves them out.
    void note_startup_globals(lua_State* L);
    // Forget every reference (the stop's view changed, or it ended): the values held go too.
    void clear(lua_State* L);
    // A reference to a scope of frame `frame`.
    int add_scope(DapScope kind, int frame);
    // A reference to the table or tensor at L's index idx; 0 for a value with nothing inside.
    int add_value(lua_State* L, int idx);
    // The container of a reference; nullptr when it is not (or no longer) one.
    const DapContainer* find(int reference) const;

    // The variables of a container, as DAP's `variables` array; false with `error` set.
    bool children(lua_State* L, int reference, nlohmann::json& out, std::string& error);
    // One variable: {name, value, type, variablesReference} for the value at idx.
    nlohmann::json variable(lua_State* L, const std::string& name, int idx);
    // setVariable: `name` in container `reference` := the Lua expression `value` (evaluated in the
    // stop's context). On success `out` is DAP's response body; false with `error` set.
    bool set(lua_State* L, int reference, const std::string& name, const std::string& value, nlohmann::json& out,
             std::string& error);

private:
    void push_held(lua_State* L, int held);
    int add_container(DapContainer c);
    bool scope_children(lua_State* L, const DapContainer& c, nlohmann::json& out, std::string& error);
    void table_children(lua_State* L, int idx, nlohmann::json& out);
    void tensor_children(lua_State* L, int held, nlohmann::json& out);
    void tensor_values(lua_State* L, const DapContainer& c, nlohmann::json& out);

    std::vector<DapContainer> containers_;   // reference r is containers_[r - 1]
    int holder_ref_ = -2;                    // registry ref of the table holding the values (LUA_NOREF: none)
    int startup_globals_ref_ = -2;           // registry ref of the set of names global before the script
    int held_ = 0;
};

// The selected frame made `frame` (a Lua frame of the stop) for what follows; false when it is no
// Lua frame of the stop.
bool dap_select_frame(int frame);
