-- nn.lua: PyTorch's torch.nn in Lua over torch's ops: Module, parameters, containers, nn.utils and
-- the argument checks every nn file shares; embedded in tapedeck as the global `nn` (require "nn").
-- [SECTION]s: errors; Module (members, dtypes, state_dict, printing); parameters and initialisation;
-- arguments; containers; nn.utils; the rest of nn (the files of its layers and F, at the end).
-- Defining a module class (the one idiom):
--   local TwoLayerNet = nn.Module:extend("TwoLayerNet")
--   function TwoLayerNet:init(D_in, H, D_out)        -- the constructor; no super call needed
--     self.linear1 = nn.Linear(D_in, H)               -- assigning a module or a parameter registers it
--     self.linear2 = nn.Linear(H, D_out)
--   end
--   function TwoLayerNet:forward(x)
--     return self.linear2(self.linear1(x):clamp{min = 0})
--   end
--   local model = TwoLayerNet(1000, 100, 10)         -- model(x) calls model:forward(x)
--
-- A parameter is a leaf tensor that requires grad (nn.Parameter(t) makes one). parameters() lists
-- them in registration order (the order of the assignments in init), never pairs() order, so an
-- optimizer's state and a run's numbers are reproducible. A plain Lua table of modules assigned to
-- a field (self.blocks = {nn.Linear(2, 2), ...}) is registered too.
local nn = {}

-- ============================================================================================
-- Errors: as the bindings', they name the function the user called and end with the user's
-- file:line, e.g. "Linear: in_features must be an integer >= 0, got 1.5 (model.lua:7)".

local errors = require "tapedeck.errors"
local fail, describe = errors.fail, errors.describe

-- v as an integer >= min, or an error naming the class and the argument.
local function check_integer(class, what, v, min)
  local n = type(v) == "number" and math.tointeger(v)
  if not n or n < min then fail(string.format("%s: %s must be an integer >= %d, got %s", class, what, min, describe(v))) end
  return n
end

-- v as PyTorch's int or pair (a window's size): an integer >= min for both H and W, or a list
-- {h, w} of two; returns h, w.
local function check_pair(class, what, v, min)
  if type(v) ~= "table" then
    local n = check_integer(class, what, v, min)
    return n, n
  end
  local h = type(v[1]) == "number" and math.tointeger(v[1])
  local w = type(v[2]) == "number" and math.tointeger(v[2])
  if #v ~= 2 or not h or not w or h < min or w < min then
    fail(string.format("%s: %s must be an integer >= %d or a list {h, w} of two, got %s", class, what, min, describe(v)))
  end
  return h, w
end

-- A size as PyTorch's repr shows it: "(3, 3)" (a number counts for both H and W).
local function pair_repr(v)
  if type(v) == "table" then return string.format("(%d, %d)", v[1], v[2]) end
  return string.format("(%d, %d)", v, v)
end

-- fn(...), an error from it named after the class ("Linear: rand: ..."), with the user's line.
local function named(class, fn, ...)
  local results = table.pack(pcall(fn, ...))
  if results[1] then return table.unpack(results, 2, results.n) end
  local message = tostring(results[2])
  if message:sub(1, #class + 1) == class .. ":" and message:find("%([^()]*:%d+%)$") then error(message, 0) end   -- already named
  if message:find("%([^()]*:%d+%)$") then error(class .. ": " .. message, 0) end
  fail(class .. ": " .. message)
end

-- ============================================================================================
-- Module
--
-- A module keeps, besides its fields, the order its members were registered in (_order) and what
-- each is (_kinds[key]: "module", "parameter", "buffer" or "list", a plain Lua table of modules or
-- parameters). The kind is fixed when the field is first assigned, so a parameter frozen with
-- requires_grad_(false) stays a parameter. Names are PyTorch's: an integer key (a container's
-- child, a plain list's item) is named from 0 ("0.weight" for model[1]), as PyTorch indexes.

local Module = {__name = "Module"}
Module.__index = Module
nn.Module = Module

local function is_module(v)
  return type(v) == "table" and getmetatable(v) ~= nil and rawget(getmetatable(v), "__is_module") == true
end
nn.is_module = is_module

local function is_parameter(v)
  return torch.is_tensor(v) and v.is_leaf and v.requires_grad
end

local function is_plain_table(v) return type(v) == "table" and getmetatable(v) == nil end

-- The name PyTorch gives a member: integer keys count from 0.
local function member_name(key)
  if math.type(key) == "integer" then return tostring(key - 1) end
  return tostring(key)
end

-- Records key's kind and order on its first assignment; the value itself is stored as usual.
local function register_member(self, key, value, kind)
  local kinds = rawget(self, "_kinds")
  if not kinds[key] then
    kinds[key] = kind
    local order = rawget(self, "_order")
    order[#order + 1] = key
  end
  if kind == "module" and rawget(value, "_field") == nil then rawset(value, "_field", member_name(key)) end
  rawset(self, key, value)
end

-- __newindex: assigning a module, a parameter or a plain table registers it; any other value (nil
-- too: self.cache = nil declares an optional field) makes the name known, so reading it later is
-- never the unknown-field error (module_index).
local function register_field(self, key, value)
  local kind = is_module(value) and "module" or is_parameter(value) and "parameter" or is_plain_table(value) and "list"
  if kind then return register_member(self, key, value, kind) end
  local declared = rawget(self, "_declared")
  if declared then declared[key] = true end
  rawset(self, key, value)
end

-- The names a module answers to: its own string fields (members first) and its classes' methods.
local function known_names(self)
  local names, seen = {}, {}
  local function add(key)
    if type(key) == "string" and key:sub(1, 1) ~= "_" and not seen[key] then seen[key], names[#names + 1] = true, key end
  end
  for _, key in ipairs(rawget(self, "_order") or {}) do add(key) end
  for key in pairs(rawget(self, "_declared") or {}) do add(key) end
  for key in next, self do add(key) end
  local class = getmetatable(self)
  while type(class) == "table" do
    for key, value in next, class do if type(value) == "function" then add(key) end end
    local meta = getmetatable(class)
    class = meta and meta.__index
  end
  return names
end

local hints = require "tapedeck.hints"

-- A read of a name the module does not have, from the user's code: an error that names it, as
-- PyTorch's AttributeError / IndexError (never a nil that fails later, far away). Lists count from
-- 1 in Lua: model[0] says model[1]. Integers past the end are nil for ipairs (a C function).
local function missing_member(self, key)
  local name = rawget(getmetatable(self), "__name") or "Module"
  if math.type(key) == "integer" then
    local n = rawlen(self)
    if key < 1 then
      fail(string.format("%s: no module [%d]: modules are numbered from 1 in Lua: model[1] is PyTorch's model[0], " ..
                         "model[#model] its model[-1]%s", name, key, n > 0 and string.format(" (this one holds %d)", n) or ""))
    end
    fail(string.format("%s: no module [%d]: it holds %d (model[1] .. model[%d])", name, key, n, n))
  end
  local names = known_names(self)
  local hint = hints.close_names(key, names)
  if hint == "" and #names > 0 then
    local members = {}
    for _, k in ipairs(rawget(self, "_order") or {}) do if type(k) == "string" then members[#members + 1] = k end end
    if #members > 0 then hint = " (its members: " .. table.concat(members, ", ") .. ")" end
  end
  fail(string.format("%s: no field, member or method '%s'%s", name, key, hint))
end

local getinfo = debug.getinfo

-- The __index of a module class's instances: the class's fields and methods; then nil for a name
-- the module knows (a member set to nil, an optional field declared as nil, a private _name) or a
-- read from the library's own code or from C (ipairs, the bindings); else missing_member's error.
local function module_index(class)
  return function(self, key)
    local value = class[key]
    if value ~= nil then return value end
    if type(key) == "string" then
      if key:sub(1, 1) == "_" then return nil end
      local kinds, declared = rawget(self, "_kinds"), rawget(self, "_declared")
      if not kinds or kinds[key] or (declared and declared[key]) then return nil end
    elseif math.type(key) ~= "integer" then
      return nil
    end
    local caller = getinfo(2, "S")
    if not caller or caller.what == "C" or caller.source:sub(1, 10) == "=tapedeck/" then return nil end
    missing_member(self, key)
  end
end

-- module(...) runs module:forward(...) inside a scope named after the module ("linear1:Linear",
-- nested in its parent's), so every node it records says which module call made it.
local function call_in_scope(module, ...)
  local field = rawget(module, "_field")
  local name = getmetatable(module).__name
  return torch.scope(field and (field .. ":" .. name) or name, module.forward, module, ...)
end

local module_repr   -- below: tostring(module), as PyTorch prints it

-- Class:extend(name): a new module class; instances are made by calling the class.
function Module:extend(name)
  if type(name) ~= "string" then
    fail("Module:extend: give the class a name, e.g. nn.Module:extend(\"TwoLayerNet\"), got " .. describe(name))
  end
  local class = setmetatable({__name = name}, {__index = self, __call = function(class, ...) return class:new(...) end})
  class.__index = module_index(class)
  class.__newindex = register_field
  class.__call = call_in_scope
  class.__tostring = function(module) return module_repr(module) end
  class.__is_module = true
  class.__library = errors.is_library_source(debug.getinfo(2, "S").source)
  return class
end

-- A table with a named field is an options table; a plain list ({1, 2}) is a value.
local function is_options(v)
  if type(v) ~= "table" or getmetatable(v) ~= nil then return false end
  for key in pairs(v) do if type(key) == "string" then return true end end
  return false
end

-- The options a function of the library takes, declared when its file loads: the list of keys in
-- PyTorch's order, entered in the options registry under the name the user calls it by ("nn.Linear",
-- "F.l1_loss", "m:load_state_dict"), as every C binding's is (torch._options.registry()).
local declared_names = {}   -- called name -> true, for Module:new
local function declare_options(called, keys)
  torch._options.declare(called, table.concat(keys, " "))
  declared_names[called] = true
  local declared = {called = called}
  for i, key in ipairs(keys) do declared[i] = key end
  return declared
end

-- opts is nil or a table whose keys are all declared (a typo must not pass silently): the C
-- bindings' check and message ("nn.Linear: unknown option 'biass' (did you mean 'bias'? it takes
-- bias, device, dtype)"), with the user's file:line; returns opts, or {} for nil.
local function check_options(declared, opts, example)
  if opts ~= nil and (type(opts) ~= "table" or torch.is_tensor(opts)) then
    fail(string.format("%s: options must be a table like %s, got %s", declared.called, example, describe(opts)))
  end
  return torch._options.check(declared.called, opts, declared)
end

-- Class:new(...): an instance, set up, then the class's init(...) runs.
-- A class of the library that declares no options (nn.ReLU, nn.Flatten) refuses a trailing
-- options table, as PyTorch's constructors refuse an unknown keyword, instead of dropping it.
local function takes_options(class)
  for _ = 1, 100 do
    if class == nil or class == Module then return false end
    if rawget(class, "__table_is_value") or declared_names["nn." .. tostring(rawget(class, "__name"))] then return true end
    class = (getmetatable(class) or {}).__index
  end
  return false
end
function Module:new(...)
  local n = select("#", ...)
  if n > 0 and rawget(self, "__library") and not takes_options(self) then
    local last = select(n, ...)
    if is_options(last) then torch._options.check("nn." .. tostring(rawget(self, "__name")), last, "") end
  end
  local module = setmetatable({_order = {}, _kinds = {}, _declared = {}, training = true}, self)
  module:init(...)
  return module
end

function Module:init() end

function Module:forward()
  local name = type(self) == "table" and getmetatable(self) and getmetatable(self).__name or "Module"
  fail(name .. ": forward is not defined (define " .. name .. ":forward(x))")
end

-- self:register_buffer(name, tensor [, persistent = true]): a tensor that is state but not a
-- parameter (BatchNorm's running stats): in state_dict() (unless persistent is false), converted
-- by double()/float(), never given to an optimizer. tensor may be nil (a declared, empty slot).
function Module:register_buffer(name, tensor, persistent)
  if type(name) ~= "string" then fail("register_buffer: name must be a string, got " .. describe(name)) end
  if tensor ~= nil and not torch.is_tensor(tensor) then
    fail("register_buffer: buffer '" .. name .. "' must be a tensor or nil, got " .. describe(tensor))
  end
  local kinds = rawget(self, "_kinds")
  if kinds[name] and kinds[name] ~= "buffer" then fail("register_buffer: '" .. name .. "' is already a " .. kinds[name]) end
  register_member(self, name, tensor, "buffer")
  if persistent == false then
    local transient = rawget(self, "_transient") or {}
    transient[name] = true
    rawset(self, "_transient", transient)
  end
end

-- self:register_parameter(name, p): p a parameter (a leaf that requires grad) or nil.
function Module:register_parameter(name, p)
  if type(name) ~= "string" then fail("register_parameter: name must be a string, got " .. describe(name)) end
  if p ~= nil and not is_parameter(p) then
    fail("register_parameter: '" .. name .. "' must be a parameter (nn.Parameter(t)) or nil, got " .. describe(p))
  end
  register_member(self, name, p, "parameter")
end

-- A member's value, and its kind, when the value still is of the kind it was registered as; else
-- nil. Lua cannot refuse `model.fc = 5` on a field that already holds a module (a raw assignment,
-- where PyTorch raises), so a field given a value of another kind is no longer a member: it is not
-- listed, saved, converted or printed.
local function member_value(module, key)
  local value, kind = rawget(module, key), rawget(module, "_kinds")[key]
  local still = (kind == "module" and is_module(value)) or (kind == "list" and is_plain_table(value)) or
                ((kind == "parameter" or kind == "buffer") and torch.is_tensor(value))
  if still then return value, kind end
  return nil, kind
end

-- Visits the members in registration order: fn(name, value, kind) with kind "module", "parameter"
-- or "buffer"; a plain list's items are named "field.0", ... (modules, and tensors that are
-- parameters). Empty slots (nil) are skipped.
local function each_member(module, fn)
  for _, key in ipairs(rawget(module, "_order")) do
    local value, kind = member_value(module, key)
    if kind == "list" and value ~= nil then
      for i, item in ipairs(value) do
        local name = member_name(key) .. "." .. (i - 1)
        if is_module(item) then fn(name, item, "module")
        elseif is_parameter(item) then fn(name, item, "parameter") end
      end
    elseif value ~= nil and kind ~= "list" then
      fn(member_name(key), value, kind)
    end
  end
end

-- The members of one kind as {name, value} pairs, this module's own (not its children's).
local function own_members(module, kind)
  local list = {}
  each_member(module, function(name, value, k) if k == kind then list[#list + 1] = {name, value} end end)
  return list
end

-- The direct child modules as {name, module} pairs, in registration order.
function Module:named_children()
  return own_members(self, "module")
end

function Module:children()
  local list = {}
  for i, pair in ipairs(self:named_children()) do list[i] = pair[2] end
  return list
end

-- Every module of the tree as {name, module} pairs, depth first, this one first (named ""), each
-- module once (PyTorch's named_modules).
function Module:named_modules()
  local list, seen = {}, {}
  local function visit(module, name)
    if seen[module] then return end
    seen[module] = true
    list[#list + 1] = {name, module}
    for _, pair in ipairs(module:named_children()) do visit(pair[2], name == "" and pair[1] or name .. "." .. pair[1]) end
  end
  visit(self, "")
  return list
end

function Module:modules()
  local list = {}
  for i, pair in ipairs(self:named_modules()) do list[i] = pair[2] end
  return list
end

-- The tensors of one kind in the whole tree as {"path.name", tensor} pairs, PyTorch's order: each
-- module's own, then its children's; a tensor shared by two modules is listed once.
local function named_tensors(self, kind)
  local list, seen = {}, {}
  for _, entry in ipairs(self:named_modules()) do
    local prefix = entry[1] == "" and "" or entry[1] .. "."
    for _, pair in ipairs(own_members(entry[2], kind)) do
      if not seen[pair[2]] then
        seen[pair[2]] = true
        list[#list + 1] = {prefix .. pair[1], pair[2]}
      end
    end
  end
  return list
end

local function values_of(pairs_list)
  local list = {}
  for i, pair in ipairs(pairs_list) do list[i] = pair[2] end
  return list
end

-- The parameters as {name, tensor} pairs ("linear1.weight", "0.bias").
function Module:named_parameters() return named_tensors(self, "parameter") end
function Module:parameters() return values_of(named_tensors(self, "parameter")) end
function Module:named_buffers() return named_tensors(self, "buffer") end
function Module:buffers() return values_of(named_tensors(self, "buffer")) end

-- The number of parameter elements (PyTorch users write sum(p.numel() for p in model.parameters())),
-- or only those that require grad with {only_trainable = true}.
local NUM_PARAMETERS_OPTIONS = declare_options("m:num_parameters", {"only_trainable"})
function Module:num_parameters(opts)
  opts = check_options(NUM_PARAMETERS_OPTIONS, opts, "{only_trainable = true}")
  local n = 0
  for _, p in ipairs(self:parameters()) do
    if not opts.only_trainable or p.requires_grad then n = n + p:numel() end
  end
  return n
end

-- fn(module) for every module of the tree, children before their parent (PyTorch's apply).
function Module:apply(fn)
  if type(fn) ~= "function" then fail("apply: expects a function of a module, got " .. describe(fn)) end
  for _, child in ipairs(self:children()) do child:apply(fn) end
  fn(self)
  return self
end

-- Gradients are dropped (PyTorch's set_to_none, its default): the next backward starts them afresh.
-- zero_grad(false) or zero_grad{set_to_none = false} zeroes them in place instead.
local ZERO_GRAD_OPTIONS = declare_options("m:zero_grad", {"set_to_none"})
function Module:zero_grad(set_to_none)
  if type(set_to_none) == "table" then set_to_none = check_options(ZERO_GRAD_OPTIONS, set_to_none).set_to_none end
  for _, p in ipairs(self:parameters()) do
    if set_to_none == false then
      if p.grad then torch.no_grad(function() p.grad:zero_() end) end
    else
      p.grad = nil
    end
  end
end

-- requires_grad_(false) freezes every parameter (they stay parameters); requires_grad_() thaws.
function Module:requires_grad_(flag)
  if flag == nil then flag = true end
  if type(flag) ~= "boolean" then fail("requires_grad_: expects true or false, got " .. describe(flag)) end
  for _, p in ipairs(self:parameters()) do p.requires_grad = flag end
  return self
end

function Module:train(mode)
  if mode == nil then mode = true end
  if type(mode) ~= "boolean" then fail("train: mode must be true or false, got " .. describe(mode)) end
  rawset(self, "training", mode)
  for _, child in ipairs(self:children()) do child:train(mode) end
  return self
end

function Module:eval() return self:train(false) end

-- ============================================================================================
-- Module: dtypes

local dtype_names = {float32 = "float32", float = "float32", float64 = "float64", double = "float64"}

-- Every parameter and buffer of the tree replaced by a copy in dtype (floating ones only: int64
-- buffers keep theirs) and on device (nil: each keeps its own): a parameter stays a leaf with its
-- requires_grad, and its gradient is converted too. A tensor shared by two modules stays shared.
-- Tensors made earlier (an optimizer's list) still hold the old ones: convert before making the
-- optimizer, as in PyTorch.
local function convert_module(self, dtype, device)
  local converted = {}
  local function convert(t, kind)
    local want_dtype = (dtype and t.dtype ~= "int64") and dtype or t.dtype
    local want_device = device or t.device
    if t.dtype == want_dtype and t.device == want_device then return t end
    if converted[t] then return converted[t] end
    local new = torch.no_grad(function()
      local copy = t:detach():to(want_device, want_dtype)
      if kind == "parameter" then
        copy = copy:requires_grad_(t.requires_grad)
        if t.grad then copy.grad = t.grad:to(want_device, want_dtype) end
      end
      return copy
    end)
    converted[t] = new
    return new
  end
  for _, module in ipairs(self:modules()) do
    for _, key in ipairs(rawget(module, "_order")) do
      local value, kind = member_value(module, key)
      if (kind == "parameter" or kind == "buffer") and value ~= nil then
        rawset(module, key, convert(value, kind))
      elseif kind == "list" and value ~= nil then
        for i, item in ipairs(value) do
          if is_parameter(item) then value[i] = convert(item, "parameter") end
        end
      end
    end
  end
  return self
end

function Module:double() return convert_module(self, "float64") end
function Module:float() return convert_module(self, "float32") end
function Module:cuda() return convert_module(self, nil, "cuda") end
function Module:cpu() return convert_module(self, nil, "cpu") end

local device_names = {cpu = "cpu", cuda = "cuda", ["cuda:0"] = "cuda"}

-- to(dtype), to(device), to(device, dtype) or to{dtype =, device =}.
local TO_OPTIONS = declare_options("m:to", {"dtype", "device"})
function Module:to(...)
  local args = table.pack(...)
  local dtype, device
  local function take(v)
    if v == nil then return end
    if dtype_names[v] then dtype = dtype_names[v]; return end
    if device_names[v] then device = device_names[v]; return end
    if type(v) == "table" and not is_module(v) then
      check_options(TO_OPTIONS, v, "{dtype = \"float64\"}")
      take(v.dtype); take(v.device)
      return
    end
    fail("to: expects a floating dtype (float32, float64) or a device (\"cpu\", \"cuda\"), got " .. describe(v))
  end
  for i = 1, args.n do take(args[i]) end
  if dtype or device then convert_module(self, dtype, device) end
  return self
end

-- ============================================================================================
-- Module: state_dict

-- A table of keys in a given order: pairs() visits them in that order (a plain Lua table's pairs
-- has none), so saving a state_dict keeps PyTorch's key order.
local function ordered_table(keys, values)
  local position = {}
  for i, key in ipairs(keys) do position[key] = i end
  return setmetatable(values, {__pairs = function(t)
    local i = 0
    return function()
      repeat
        i = i + 1
        local key = keys[i]
        if key == nil then return nil end
        if rawget(t, key) ~= nil then return key, rawget(t, key) end
      until false
    end, t, nil
  end})
end

-- The persistent parameters and buffers of the tree as {key, tensor} pairs in PyTorch's order,
-- without removing duplicates (a module used twice appears under both names, as PyTorch's).
local function state_entries(module, prefix, list)
  local transient = rawget(module, "_transient") or {}
  for _, kind in ipairs({"parameter", "buffer"}) do
    for _, pair in ipairs(own_members(module, kind)) do
      if not transient[pair[1]] then list[#list + 1] = {prefix .. pair[1], pair[2]} end
    end
  end
  for _, pair in ipairs(module:named_children()) do state_entries(pair[2], prefix .. pair[1] .. ".", list) end
  return list
end

-- {["0.weight"] = tensor, ...}: every parameter and persistent buffer, detached (sharing storage
-- with the module's tensors, as PyTorch's), keys in PyTorch's order for pairs().
function Module:state_dict()
  local keys, values = {}, {}
  for _, entry in ipairs(state_entries(self, "", {})) do
    keys[#keys + 1] = entry[1]
    values[entry[1]] = entry[2]:detach()
  end
  return ordered_table(keys, values)
end

local function quoted_list(names)
  local quoted = {}
  for i, name in ipairs(names) do quoted[i] = string.format("%q", name) end
  return table.concat(quoted, ", ")
end

-- load_state_dict(sd [, {strict = true}]): copies sd's tensors into the parameters and buffers
-- in place (under no_grad; a dtype is converted as copy_ does). Missing keys (in the model, not
-- in sd), unexpected keys and shape mismatches are one error listing them all; with
-- strict = false only shape mismatches are, and the result lists the others:
-- {missing_keys = {...}, unexpected_keys = {...}} (PyTorch's named tuple).
local LOAD_STATE_DICT_OPTIONS = declare_options("m:load_state_dict", {"strict"})
function Module:load_state_dict(sd, opts)
  if type(sd) ~= "table" then fail("load_state_dict: expects a table of name -> tensor, got " .. describe(sd)) end
  opts = check_options(LOAD_STATE_DICT_OPTIONS, opts, "{strict = false}")
  local strict = opts.strict ~= false
  local entries = state_entries(self, "", {})
  local expected, missing, unexpected, mismatched = {}, {}, {}, {}
  for _, entry in ipairs(entries) do
    local name, target = entry[1], entry[2]
    expected[name] = true
    local source = sd[name]
    if source == nil then
      missing[#missing + 1] = name
    elseif not torch.is_tensor(source) then
      mismatched[#mismatched + 1] = string.format("%s is %s, not a tensor", name, describe(source))
    elseif tostring(source.shape) ~= tostring(target.shape) then
      mismatched[#mismatched + 1] = string.format("size mismatch for %s: %s in the state_dict, %s in the model", name,
                                                  tostring(source.shape), tostring(target.shape))
    end
  end
  for key, value in pairs(sd) do   -- entries that are not tensors (a file's metadata strings) are not state
    if not expected[key] and torch.is_tensor(value) then unexpected[#unexpected + 1] = tostring(key) end
  end
  table.sort(unexpected)
  local problems = {}
  if strict and #missing > 0 then problems[#problems + 1] = "missing keys: " .. quoted_list(missing) end
  if strict and #unexpected > 0 then problems[#problems + 1] = "unexpected keys: " .. quoted_list(unexpected) end
  for _, text in ipairs(mismatched) do problems[#problems + 1] = text end
  if #problems > 0 then
    fail(string.format("load_state_dict: error(s) loading into %s: %s", getmetatable(self).__name, table.concat(problems, "; ")))
  end
  torch.no_grad(function()
    for _, entry in ipairs(entries) do
      local source = sd[entry[1]]
      if source ~= nil then entry[2]:copy_(source) end
    end
  end)
  return {missing_keys = missing, unexpected_keys = unexpected}
end

-- ============================================================================================
-- Module: printing, as PyTorch's repr

-- What tostring prints between the parentheses, e.g. "in_features=2, out_features=3".
function Module:extra_repr() return "" end

-- Python's repr of a number (1e-05, 0.1, 2.0, 3) and of a boolean (True), as extra_repr shows them.
local function py_repr(v)
  if type(v) == "boolean" then return v and "True" or "False" end
  if v == nil then return "None" end
  if math.type(v) == "integer" then return tostring(v) end
  if type(v) ~= "number" then return tostring(v) end
  if v == math.floor(v) and math.abs(v) < 1e16 then return string.format("%.1f", v) end
  for digits = 1, 17 do
    local s = string.format("%." .. digits .. "g", v)
    if tonumber(s) == v then return s end
  end
  return string.format("%.17g", v)
end
nn._py_repr = py_repr

-- A size as Python shows an int or a tuple: 3, (2, 5), (3,).
local function py_size(v)
  if type(v) ~= "table" then return py_repr(v) end
  local parts = {}
  for i, n in ipairs(v) do parts[i] = py_repr(n) end
  return "(" .. table.concat(parts, ", ") .. (#parts == 1 and ",)" or ")")
end

-- Every line after the first indented by two spaces (PyTorch's _addindent).
local function add_indent(text)
  return (text:gsub("\n", "\n  "))
end

-- PyTorch's Module.__repr__: Name(extra) or Name(\n  extra\n  (child): ...\n). A plain list of
-- modules prints as the ModuleList PyTorch would have there.
function module_repr(module)
  local lines = {}
  local extra = module:extra_repr()
  local extra_lines = {}
  if extra ~= "" then for line in (extra .. "\n"):gmatch("(.-)\n") do extra_lines[#extra_lines + 1] = line end end
  for _, line in ipairs(extra_lines) do lines[#lines + 1] = line end
  local n_children = 0
  for _, key in ipairs(rawget(module, "_order")) do
    local value, kind = member_value(module, key)
    if kind == "module" and value ~= nil then
      lines[#lines + 1] = "(" .. member_name(key) .. "): " .. add_indent(module_repr(value))
      n_children = n_children + 1
    elseif kind == "list" and value ~= nil then
      local items = {}
      for i, item in ipairs(value) do
        if is_module(item) then items[#items + 1] = "  (" .. (i - 1) .. "): " .. add_indent(module_repr(item)) end
      end
      if #items > 0 then
        lines[#lines + 1] = "(" .. member_name(key) .. "): " .. add_indent("ModuleList(\n" .. table.concat(items, "\n") .. "\n)")
        n_children = n_children + 1
      end
    end
  end
  local text = getmetatable(module).__name .. "("
  if #extra_lines == 1 and n_children == 0 then
    text = text .. extra_lines[1]
  elseif #lines > 0 then
    text = text .. "\n  " .. table.concat(lines, "\n  ") .. "\n"
  end
  return text .. ")"
end

-- ============================================================================================
-- Parameters and initialisation

-- A leaf with t's values that requires grad (unless requires_grad is false), made under no_grad:
-- no history of how its values were computed.
function nn.Parameter(t, requires_grad)
  if not torch.is_tensor(t) then fail("Parameter: expects a tensor, got " .. describe(t)) end
  if requires_grad ~= nil and type(requires_grad) ~= "boolean" then
    fail("Parameter: requires_grad must be true or false, got " .. describe(requires_grad))
  end
  return named("Parameter", function()
    return torch.no_grad(function() return t:detach():clone():requires_grad_(requires_grad ~= false) end)
  end)
end

-- The dtype option of a constructor: nil (float32) or a floating dtype's name. With `device` (the
-- device option), that device is checked too: an unknown one or "cuda" without a GPU is torch.zeros's
-- error, before anything is made.
local function check_dtype(class, dtype, device)
  if device ~= nil then named(class, torch.zeros, 0, {device = device}) end
  if dtype == nil then return nil end
  if dtype ~= "float32" and dtype ~= "float64" and dtype ~= "float" and dtype ~= "double" then
    fail(string.format("%s: dtype must be \"float32\" or \"float64\", got %s", class, describe(dtype)))
  end
  return dtype
end

-- A constructor's device option: its parameters and buffers moved there (nil: where they are).
local function place_on_device(module, device)
  if device ~= nil then convert_module(module, nil, device) end
end

-- A parameter with the values fn() computes under no_grad (an initialisation, never on a graph).
local function init_parameter(class, fn)
  return named(class, function() return nn.Parameter(torch.no_grad(fn)) end)
end

-- Uniform on [-bound, bound), as PyTorch's default init of Linear and Conv2d (kaiming_uniform with
-- a = sqrt(5) comes to bound = 1 / sqrt(fan_in)).
local function uniform_parameter(shape, bound, dtype)
  return nn.Parameter(torch.no_grad(function() return torch.rand(shape, {dtype = dtype}) * (2 * bound) - bound end))
end

-- ============================================================================================
-- Arguments of F's functions and of the modules.
--
-- The house convention: the tensors, then the parameters PyTorch takes by position (those before
-- its deprecated size_average / reduce), then a trailing options table with any parameter by
-- name. An unknown name, a parameter given twice or one argument too many is an error naming the
-- function and the argument.


-- The parameters of fname(...) by name: after n_fixed leading arguments, the first n_positional of
-- `names` may come by position; all of them by name in a trailing options table.
local function parse_args(fname, n_fixed, names, n_positional, ...)   -- names: from declare_options
  local args = table.pack(...)
  local n = args.n
  local opts
  if n > n_fixed and is_options(args[n]) then opts, n = args[n], n - 1 end
  local values, given_at = {}, {}
  for i = n_fixed + 1, n do
    local k = i - n_fixed
    if k > n_positional then
      if args[i] ~= nil or i == n then
        local by_position = {}
        for j = 1, n_positional do by_position[j] = names[j] end
        fail(string.format("%s: argument %d: one argument too many, got %s (%s; the others go in an options table: %s)",
                           fname, i, describe(args[i]),
                           n_positional == 0 and "no parameter comes by position" or
                           "by position: " .. table.concat(by_position, ", "), table.concat(names, ", ")))
      end
    elseif args[i] ~= nil then
      values[names[k]], given_at[names[k]] = args[i], i
    end
  end
  if opts then
    torch._options.check(names.called, opts, names)
    for key, value in pairs(opts) do
      if given_at[key] then fail(string.format("%s: %s is given twice: as argument %d and as an option", fname, key, given_at[key])) end
      values[key] = value
    end
  end
  return values
end

local function check_tensor(fname, what, v, optional)
  if (v == nil and optional) or torch.is_tensor(v) then return v end
  fail(string.format("%s: %s must be a tensor%s, got %s", fname, what, optional and " or nil" or "", describe(v)))
end

local function check_number(fname, what, v, default)
  if v == nil then return default end
  if type(v) ~= "number" then fail(string.format("%s: %s must be a number, got %s", fname, what, describe(v))) end
  return v
end

local function check_boolean(fname, what, v, default)
  if v == nil then return default end
  if type(v) ~= "boolean" then fail(string.format("%s: %s must be true or false, got %s", fname, what, describe(v))) end
  return v
end

local function check_reduction(fname, v)
  if v == nil then return "mean" end
  if v ~= "mean" and v ~= "sum" and v ~= "none" then
    fail(string.format("%s: reduction must be \"mean\", \"sum\" or \"none\", got %s", fname, describe(v)))
  end
  return v
end

-- A size or a list of sizes as a list.
local function size_list(fname, what, v)
  if math.type(v) == "integer" then return {v} end
  if type(v) == "table" and not is_options(v) then
    local list = {}
    for i, n in ipairs(v) do
      if math.type(n) ~= "integer" then fail(string.format("%s: %s must hold integers, got %s", fname, what, describe(n))) end
      list[i] = n
    end
    return list
  end
  fail(string.format("%s: %s must be an integer or a list of integers, got %s", fname, what, describe(v)))
end

-- ============================================================================================
-- Containers. Lua indexing is 1-based (model[1] is the first layer), names are PyTorch's, from 0
-- (its parameters are "0.weight", "0.bias").

local function check_module(class, what, v)
  if not is_module(v) then fail(string.format("%s: %s is not a module, got %s", class, what, describe(v))) end
  return v
end

-- nn.Sequential(m1, m2, ...): forward runs them in order. model[i], #model, ipairs(model).
nn.Sequential = Module:extend("Sequential")
function nn.Sequential:init(...)
  for i = 1, select("#", ...) do   -- a nil in the middle is an error too, not the end of the list
    self[i] = check_module("Sequential", "argument " .. i, (select(i, ...)))
  end
end
function nn.Sequential:forward(x)
  for _, module in ipairs(self) do x = module(x) end
  return x
end
function nn.Sequential:append(module)
  self[#self + 1] = check_module("append", "argument 1", module)
  return self
end

-- nn.ModuleList([{m1, m2, ...}]): a list of modules registered as children; no forward.
nn.ModuleList = Module:extend("ModuleList")
function nn.ModuleList:init(modules)
  if modules ~= nil and not is_plain_table(modules) then
    fail("ModuleList: expects a list of modules {m1, m2, ...}, got " .. describe(modules))
  end
  self:extend(modules or {})
end
nn.ModuleList.append = nn.Sequential.append
function nn.ModuleList:extend(modules)
  for i, module in ipairs(modules) do self[#self + 1] = check_module("extend", "item " .. i, module) end
  return self
end

-- nn.ModuleDict(modules): modules = {{"name", module}, ...} (kept in that order) or
-- {name = module, ...} (sorted by name: a Lua table has no order). d.name, d["name"],
-- d:keys(), d:values(), d:items(), #d. A name must not hide a method (d:train()).
nn.ModuleDict = Module:extend("ModuleDict")
nn.ModuleDict.__table_is_value = true   -- its argument may be a table of name -> module
function nn.ModuleDict:init(modules)
  if modules ~= nil and not is_plain_table(modules) then
    fail("ModuleDict: expects {{\"name\", module}, ...} or {name = module, ...}, got " .. describe(modules))
  end
  self:update(modules or {})
end
function nn.ModuleDict:update(modules)
  local pairs_list = {}
  if #modules > 0 then
    for i, pair in ipairs(modules) do
      if type(pair) ~= "table" or type(pair[1]) ~= "string" then
        fail(string.format("ModuleDict: item %d must be a pair {\"name\", module}, got %s", i, describe(pair)))
      end
      pairs_list[i] = pair
    end
  else
    local names = {}
    for name in pairs(modules) do names[#names + 1] = name end
    table.sort(names, function(a, b) return tostring(a) < tostring(b) end)
    for i, name in ipairs(names) do pairs_list[i] = {name, modules[name]} end
  end
  for _, pair in ipairs(pairs_list) do
    local name, module = pair[1], pair[2]
    if type(name) ~= "string" then fail("ModuleDict: names must be strings, got " .. describe(name)) end
    if nn.ModuleDict[name] ~= nil or name:sub(1, 1) == "_" or name == "training" then
      fail(string.format("ModuleDict: the name '%s' would hide the ModuleDict's own field or method", name))
    end
    check_module("ModuleDict", "'" .. name .. "'", module)
    if rawget(self, name) ~= nil then rawset(self, name, module) else self[name] = module end
  end
  return self
end
function nn.ModuleDict:keys()
  local list = {}
  for i, pair in ipairs(self:named_children()) do list[i] = pair[1] end
  return list
end
nn.ModuleDict.values = Module.children
nn.ModuleDict.items = Module.named_children
nn.ModuleDict.__len = function(self) return #self:named_children() end

-- ============================================================================================
-- nn.utils

nn.utils = {}

-- nn.utils.clip_grad_norm_(parameters, max_norm [, norm_type = 2]): scales the gradients of
-- parameters (a list, one tensor or a module) in place so that their total norm (the norm of the
-- per-tensor norms; norm_type math.huge: the largest |g|) is at most max_norm, as PyTorch: every
-- gradient times min(1, max_norm / (total + 1e-6)). Returns the total norm before clipping (0-d).
function nn.utils.clip_grad_norm_(parameters, max_norm, norm_type)
  local fname = "clip_grad_norm_"
  if is_module(parameters) then parameters = parameters:parameters()
  elseif torch.is_tensor(parameters) then parameters = {parameters}
  elseif not is_plain_table(parameters) then fail(fname .. ": parameters must be a list of tensors or a module, got " .. describe(parameters)) end
  if type(max_norm) ~= "number" then fail(fname .. ": max_norm must be a number, got " .. describe(max_norm)) end
  norm_type = norm_type == nil and 2 or norm_type
  if type(norm_type) ~= "number" or norm_type <= 0 then fail(fname .. ": norm_type must be a number > 0, got " .. describe(norm_type)) end
  return named(fname, function()
    return torch.no_grad(function()
      local grads = {}
      for i, p in ipairs(parameters) do
        if not torch.is_tensor(p) then fail(string.format("%s: parameters[%d] is not a tensor, got %s", fname, i, describe(p))) end
        if p.grad then grads[#grads + 1] = p.grad end
      end
      if #grads == 0 then return torch.tensor(0.0) end
      local norms = {}
      for i, g in ipairs(grads) do
        norms[i] = norm_type == math.huge and g:abs():max() or g:norm(norm_type)
      end
      local stacked = torch.stack(norms)
      local total = norm_type == math.huge and stacked:max() or stacked:norm(norm_type)
      local scale = (max_norm / (total + 1e-6)):clamp{max = 1}
      for _, g in ipairs(grads) do g:mul_(scale) end
      return total
    end)
  end)
end

-- ============================================================================================
-- Methods that take no arguments: PyTorch's keywords and positional values given to them
-- (m:parameters{recurse = false}, m:state_dict{keep_vars = true}, m:cuda(1)) are errors naming
-- them, not dropped (tapedeck's forms: all parameters, recursively; the tensors themselves).

-- Wraps class[name] for each of `names`: any argument is an error; an options table gets the
-- options check's message ("m:parameters: unknown option 'recurse' (m:parameters takes no options)").
local function takes_no_arguments(class, prefix, names)
  for _, name in ipairs(names) do
    local method = class[name]
    local called = prefix .. name
    local declared = declare_options(called, {})
    class[name] = function(self, ...)
      local n = select("#", ...)
      if n > 0 then
        local last = select(n, ...)
        if is_options(last) then check_options(declared, last, "") end
        fail(string.format("%s takes no arguments, got %s", called, describe((...))))
      end
      return method(self)
    end
  end
end
takes_no_arguments(Module, "m:", {"named_parameters", "parameters", "named_buffers", "buffers", "named_children",
                                  "children", "named_modules", "modules", "eval", "double", "float", "cuda", "cpu",
                                  "state_dict"})

-- ============================================================================================
-- The rest of nn, in embedded files loaded after this one into the same table (lua_library.cpp):
--   nn_functional.lua   nn.functional (also the global F): losses and NN functions
--   nn_layers.lua       Linear, Conv2d, pooling, activations, normalisation, Embedding, losses as modules
--   nn_attention.lua    MultiheadAttention
--   nn_recurrent.lua    RNN, LSTM, GRU and their cells
-- They take this file's helpers from nn._helpers, so their checks and errors read as this file's.

nn._helpers = {check_integer = check_integer, check_pair = check_pair, pair_repr = pair_repr,
               declare_options = declare_options, check_options = check_options, named = named, check_dtype = check_dtype,
               place_on_device = place_on_device,
               init_parameter = init_parameter, uniform_parameter = uniform_parameter, py_repr = py_repr,
               py_size = py_size, is_options = is_options, parse_args = parse_args, check_tensor = check_tensor,
               check_number = check_number, check_boolean = check_boolean, check_reduction = check_reduction,
               size_list = size_list, takes_no_arguments = takes_no_arguments}

return nn
