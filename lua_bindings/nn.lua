-- nn.lua: modules (PyTorch's torch.nn) written in Lua over torch's ops. Embedded in tapedeck and
-- loaded as the global `nn` (also require "nn"); nn.functional is also the global `F`.
--
-- Defining a module class (the one idiom):
--
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

-- opts is nil or a table with only the known keys (a typo must not pass silently); returns a table.
local function check_options(class, opts, known, example)
  if opts == nil then return {} end
  if type(opts) ~= "table" then fail(string.format("%s: options must be a table like %s, got %s", class, example, describe(opts))) end
  for key in pairs(opts) do
    if not known[key] then
      local names = {}
      for name in pairs(known) do names[#names + 1] = name end
      table.sort(names)
      fail(string.format("%s: unknown option '%s' (expected %s)", class, tostring(key), table.concat(names, ", ")))
    end
  end
  return opts
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

-- __newindex: assigning a module, a parameter or a plain table registers it.
local function register_field(self, key, value)
  local kind = is_module(value) and "module" or is_parameter(value) and "parameter" or is_plain_table(value) and "list"
  if kind then return register_member(self, key, value, kind) end
  rawset(self, key, value)
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
  class.__index = class
  class.__newindex = register_field
  class.__call = call_in_scope
  class.__tostring = function(module) return module_repr(module) end
  class.__is_module = true
  return class
end

-- Class:new(...): an instance, set up, then the class's init(...) runs.
function Module:new(...)
  local module = setmetatable({_order = {}, _kinds = {}, training = true}, self)
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
function Module:num_parameters(opts)
  opts = check_options("num_parameters", opts, {only_trainable = true}, "{only_trainable = true}")
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
-- zero_grad(false) zeroes them in place instead.
function Module:zero_grad(set_to_none)
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
function Module:to(...)
  local args = table.pack(...)
  local dtype, device
  local function take(v)
    if v == nil then return end
    if dtype_names[v] then dtype = dtype_names[v]; return end
    if device_names[v] then device = device_names[v]; return end
    if type(v) == "table" and not is_module(v) then
      check_options("to", v, {dtype = true, device = true}, "{dtype = \"float64\"}")
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
function Module:load_state_dict(sd, opts)
  if type(sd) ~= "table" then fail("load_state_dict: expects a table of name -> tensor, got " .. describe(sd)) end
  opts = check_options("load_state_dict", opts, {strict = true}, "{strict = false}")
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

-- The dtype option of a constructor: nil (float32) or a floating dtype's name.
local function check_dtype(class, dtype)
  if dtype == nil then return nil end
  if dtype ~= "float32" and dtype ~= "float64" and dtype ~= "float" and dtype ~= "double" then
    fail(string.format("%s: dtype must be \"float32\" or \"float64\", got %s", class, describe(dtype)))
  end
  return dtype
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
-- Layers

nn.Linear = Module:extend("Linear")
function nn.Linear:init(in_features, out_features, opts)
  in_features = check_integer("Linear", "in_features", in_features, 0)
  out_features = check_integer("Linear", "out_features", out_features, 0)
  opts = check_options("Linear", opts, {bias = true, dtype = true}, "{bias = false}")
  check_dtype("Linear", opts.dtype)
  self.in_features, self.out_features = in_features, out_features
  local bound = 1 / math.sqrt(in_features)
  self.weight = named("Linear", uniform_parameter, {out_features, in_features}, bound, opts.dtype)
  if opts.bias ~= false then self.bias = named("Linear", uniform_parameter, {out_features}, bound, opts.dtype) end
end
function nn.Linear:forward(x) return torch.linear(x, self.weight, self.bias) end
function nn.Linear:extra_repr()
  return string.format("in_features=%d, out_features=%d, bias=%s", self.in_features, self.out_features,
                       py_repr(self.bias ~= nil))
end

-- nn.Conv2d(in, out, kernel_size [, {stride =, padding =, dilation =, groups =, bias =, dtype =}]):
-- sizes as a number or {h, w}; padding also "valid" or "same" (stride 1 only, as PyTorch).
-- PyTorch's init: weight and bias uniform in ±1/sqrt(fan_in), fan_in = in/groups * kH * kW.
nn.Conv2d = Module:extend("Conv2d")
function nn.Conv2d:init(in_channels, out_channels, kernel_size, opts)
  in_channels = check_integer("Conv2d", "in_channels", in_channels, 1)
  out_channels = check_integer("Conv2d", "out_channels", out_channels, 1)
  local kh, kw = check_pair("Conv2d", "kernel_size", kernel_size, 1)
  opts = check_options("Conv2d", opts, {stride = true, padding = true, dilation = true, groups = true, bias = true,
                                        dtype = true, padding_mode = true}, "{stride = 1, padding = 0}")
  check_dtype("Conv2d", opts.dtype)
  -- sizes are stored as given (a number or {h, w}); rawset: a {h, w} is not a list of modules to register
  self.in_channels, self.out_channels = in_channels, out_channels
  rawset(self, "kernel_size", kernel_size)
  rawset(self, "stride", opts.stride == nil and 1 or opts.stride)
  local sh, sw = check_pair("Conv2d", "stride", self.stride, 1)
  rawset(self, "padding", opts.padding == nil and 0 or opts.padding)
  if self.padding == "same" then
    if sh ~= 1 or sw ~= 1 then fail("Conv2d: padding=\"same\" is not supported for strided convolutions") end
  elseif self.padding ~= "valid" then
    check_pair("Conv2d", "padding", self.padding, 0)
  end
  rawset(self, "dilation", opts.dilation == nil and 1 or opts.dilation)
  check_pair("Conv2d", "dilation", self.dilation, 1)
  self.groups = opts.groups == nil and 1 or check_integer("Conv2d", "groups", opts.groups, 1)
  if in_channels % self.groups ~= 0 then fail("Conv2d: in_channels must be divisible by groups") end
  if out_channels % self.groups ~= 0 then fail("Conv2d: out_channels must be divisible by groups") end
  if opts.padding_mode ~= nil and opts.padding_mode ~= "zeros" then
    fail("Conv2d: padding_mode " .. describe(opts.padding_mode) .. " is not supported (only \"zeros\")")
  end
  local bound = 1 / math.sqrt(in_channels // self.groups * kh * kw)
  self.weight = named("Conv2d", uniform_parameter, {out_channels, in_channels // self.groups, kh, kw}, bound, opts.dtype)
  if opts.bias ~= false then self.bias = named("Conv2d", uniform_parameter, {out_channels}, bound, opts.dtype) end
end
function nn.Conv2d:forward(x)
  return torch.conv2d(x, self.weight, self.bias,
                      {stride = self.stride, padding = self.padding, dilation = self.dilation, groups = self.groups})
end
-- As PyTorch's: the options that are not their defaults.
function nn.Conv2d:extra_repr()
  local s = string.format("%d, %d, kernel_size=%s, stride=%s", self.in_channels, self.out_channels,
                          pair_repr(self.kernel_size), pair_repr(self.stride))
  if type(self.padding) == "string" then s = s .. ", padding=" .. self.padding
  elseif self.padding ~= 0 then s = s .. ", padding=" .. pair_repr(self.padding) end
  if self.dilation ~= 1 then s = s .. ", dilation=" .. pair_repr(self.dilation) end
  if self.groups ~= 1 then s = s .. ", groups=" .. self.groups end
  if self.bias == nil then s = s .. ", bias=False" end
  return s
end

-- nn.MaxPool2d(kernel_size [, stride] [, {stride =, padding =, dilation =, ceil_mode =, return_indices =}]):
-- sizes as a number or {h, w}; stride defaults to kernel_size.
nn.MaxPool2d = Module:extend("MaxPool2d")
function nn.MaxPool2d:init(kernel_size, stride, opts)
  if opts == nil and type(stride) == "table" and type(next(stride)) == "string" then stride, opts = nil, stride end
  check_pair("MaxPool2d", "kernel_size", kernel_size, 1)
  opts = check_options("MaxPool2d", opts, {stride = true, padding = true, dilation = true, ceil_mode = true,
                                           return_indices = true}, "{stride = 2, padding = 1}")
  if stride ~= nil and opts.stride ~= nil then fail("MaxPool2d: stride is given twice: as argument 2 and as an option") end
  -- sizes are stored as given (a number or {h, w}); rawset: a {h, w} is not a list of modules to register
  rawset(self, "kernel_size", kernel_size)
  rawset(self, "stride", stride or opts.stride or kernel_size)
  check_pair("MaxPool2d", "stride", self.stride, 1)
  rawset(self, "padding", opts.padding == nil and 0 or opts.padding)
  check_pair("MaxPool2d", "padding", self.padding, 0)
  rawset(self, "dilation", opts.dilation == nil and 1 or opts.dilation)
  check_pair("MaxPool2d", "dilation", self.dilation, 1)
  for _, key in ipairs({"ceil_mode", "return_indices"}) do
    if opts[key] ~= nil and type(opts[key]) ~= "boolean" then
      fail(string.format("MaxPool2d: %s must be true or false, got %s", key, describe(opts[key])))
    end
    self[key] = opts[key] == true
  end
end
function nn.MaxPool2d:forward(x)
  return torch.max_pool2d(x, self.kernel_size, {stride = self.stride, padding = self.padding, dilation = self.dilation,
                                                ceil_mode = self.ceil_mode, return_indices = self.return_indices})
end
function nn.MaxPool2d:extra_repr()
  local function size(v) return type(v) == "table" and pair_repr(v) or tostring(v) end
  return string.format("kernel_size=%s, stride=%s, padding=%s, dilation=%s, ceil_mode=%s", size(self.kernel_size),
                       size(self.stride), size(self.padding), size(self.dilation), self.ceil_mode and "True" or "False")
end

-- ============================================================================================
-- nn.functional (F): the torch functions, under PyTorch's names

nn.functional = {}
for _, name in ipairs({"relu", "tanh", "sigmoid", "softmax", "log_softmax", "linear", "conv2d", "max_pool2d",
                       "flatten"}) do
  nn.functional[name] = torch[name]
end
local F = nn.functional

-- ============================================================================================
-- F's losses and NN functions written over torch's ops (docs/lua_api.md says which ops each is
-- made of; their gradients are PyTorch's because those ops' gradients compose to it).
--
-- Arguments (the house convention): the tensors, then the parameters PyTorch takes by position
-- (those before its deprecated size_average / reduce), then a trailing options table with any
-- parameter by name. An unknown name, a parameter given twice or one argument too many is an
-- error naming the function and the argument.

-- A table with a named field is an options table; a plain list ({1, 2}) is a value.
local function is_options(v)
  if type(v) ~= "table" or getmetatable(v) ~= nil then return false end
  for key in pairs(v) do if type(key) == "string" then return true end end
  return false
end

-- The parameters of fname(...) by name: after n_fixed leading arguments, the first n_positional of
-- `names` may come by position; all of them by name in a trailing options table.
local function parse_args(fname, n_fixed, names, n_positional, ...)
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
    local known = {}
    for _, name in ipairs(names) do known[name] = true end
    for key, value in pairs(opts) do
      if not known[key] then
        fail(string.format("%s: argument %d: %s does not take '%s' (it takes %s)", fname, n + 1, fname, tostring(key),
                           table.concat(names, ", ")))
      end
      if given_at[key] then fail(string.format("%s: %s is given twice: as argument %d and as an option", fname, key, given_at[key])) end
      values[key] = value
    end
  end
  return values
end

local function same_shape(a, b)
  local sa, sb = a.shape, b.shape
  if #sa ~= #sb then return false end
  for i = 1, #sa do if sa[i] ~= sb[i] then return false end end
  return true
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

-- PyTorch's apply_loss_reduction.
local function reduce_loss(loss, reduction)
  if reduction == "mean" then return loss:mean() end
  if reduction == "sum" then return loss:sum() end
  return loss
end

function F.l1_loss(...)
  local input, target = ...
  local a = parse_args("l1_loss", 2, {"reduction"}, 0, ...)
  check_tensor("l1_loss", "input", input)
  check_tensor("l1_loss", "target", target)
  local reduction = check_reduction("l1_loss", a.reduction)
  return named("l1_loss", function() return reduce_loss((input - target):abs(), reduction) end)
end

function F.smooth_l1_loss(...)
  local input, target = ...
  local a = parse_args("smooth_l1_loss", 2, {"reduction", "beta"}, 0, ...)
  check_tensor("smooth_l1_loss", "input", input)
  check_tensor("smooth_l1_loss", "target", target)
  local reduction = check_reduction("smooth_l1_loss", a.reduction)
  local beta = check_number("smooth_l1_loss", "beta", a.beta, 1.0)
  if beta < 0 then fail("smooth_l1_loss: beta must be >= 0, got " .. describe(beta)) end
  return named("smooth_l1_loss", function()
    local d = (input - target):abs()
    if beta == 0 then return reduce_loss(d, reduction) end
    return reduce_loss(torch.where(d:lt(beta), d:square() * (0.5 / beta), d - 0.5 * beta), reduction)
  end)
end

function F.binary_cross_entropy(...)
  local input, target = ...
  local a = parse_args("binary_cross_entropy", 2, {"weight", "reduction"}, 1, ...)
  check_tensor("binary_cross_entropy", "input", input)
  check_tensor("binary_cross_entropy", "target", target)
  local weight = check_tensor("binary_cross_entropy", "weight", a.weight, true)
  local reduction = check_reduction("binary_cross_entropy", a.reduction)
  if not same_shape(input, target) then
    fail(string.format("binary_cross_entropy: target %s must have the input's shape %s", tostring(target.shape), tostring(input.shape)))
  end
  return named("binary_cross_entropy", function()
    -- PyTorch's: each log clamped at -100, so a probability of 0 or 1 gives a finite loss.
    local loss = -(target * input:log():clamp{min = -100} + (1 - target) * (1 - input):log():clamp{min = -100})
    if weight then loss = loss * weight end
    return reduce_loss(loss, reduction)
  end)
end

function F.binary_cross_entropy_with_logits(...)
  local input, target = ...
  local fname = "binary_cross_entropy_with_logits"
  local a = parse_args(fname, 2, {"weight", "reduction", "pos_weight"}, 1, ...)
  check_tensor(fname, "input", input)
  check_tensor(fname, "target", target)
  local weight = check_tensor(fname, "weight", a.weight, true)
  local pos_weight = check_tensor(fname, "pos_weight", a.pos_weight, true)
  local reduction = check_reduction(fname, a.reduction)
  if not same_shape(input, target) then
    fail(string.format("%s: target %s must have the input's shape %s", fname, tostring(target.shape), tostring(input.shape)))
  end
  return named(fname, function()
    -- PyTorch's stable form: log(1 + e^-x) = m + log(e^-m + e^(-x-m)) with m = max(-x, 0).
    local max_val = (-input):clamp{min = 0}
    local log_term = ((-max_val):exp() + (-input - max_val):exp()):log() + max_val
    local loss
    if pos_weight then
      loss = (1 - target) * input + ((pos_weight - 1) * target + 1) * log_term
    else
      loss = (1 - target) * input + log_term
    end
    if weight then loss = loss * weight end
    return reduce_loss(loss, reduction)
  end)
end

-- The class dim of scores: [N, C] (2) or one example [C] (1).
local function class_scores(fname, input)
  if input:dim() ~= 1 and input:dim() ~= 2 then
    fail(string.format("%s: input must be [N, C] or [C], got %s", fname, tostring(input.shape)))
  end
  return input:dim()
end

-- -sum over examples of weight[label] * logp[i, label] with PyTorch's nll_loss semantics: a label
-- equal to ignore_index counts for nothing (also not in the mean's denominator, the sum of the
-- weights of the labels counted).
local function nll_composed(logp, labels, weight, ignore_index, reduction)
  local one = logp:dim() == 1
  if one then logp, labels = logp:unsqueeze(1), labels:reshape(1) end
  if labels.dtype ~= "int64" then labels = labels:long() end
  local kept = labels:ne(ignore_index)                          -- 1 or 0 (float32)
  local safe = torch.where(kept, labels, 1)                     -- any valid class where ignored
  local picked = logp:gather(2, safe:unsqueeze(2)):squeeze(2)   -- logp[i, label_i]
  local w = weight and weight:index_select(1, safe) * kept or kept:to(logp.dtype)
  local losses = -(picked * w)
  if reduction == "none" then return one and losses:reshape({}) or losses end
  if reduction == "sum" then return losses:sum() end
  return losses:sum() / w:sum()
end

-- a string at position 3 is the reduction, as torch.cross_entropy(x, y, "sum") takes it.
local function legacy_reduction(...)
  local n = select("#", ...)
  local a, b, c = ...
  if n == 3 and type(c) == "string" then return a, b, {reduction = c} end
  return ...
end

function F.nll_loss(...)
  local input, target = ...
  local a = parse_args("nll_loss", 2, {"weight", "ignore_index", "reduction"}, 1, legacy_reduction(...))
  check_tensor("nll_loss", "input", input)
  check_tensor("nll_loss", "target", target)
  local weight = check_tensor("nll_loss", "weight", a.weight, true)
  local ignore_index = check_number("nll_loss", "ignore_index", a.ignore_index, -100)
  local reduction = check_reduction("nll_loss", a.reduction)
  class_scores("nll_loss", input)
  if not weight and a.ignore_index == nil and reduction ~= "none" then
    return torch.nll_loss(input, target, reduction)   -- the op row
  end
  return named("nll_loss", nll_composed, input, target, weight, ignore_index, reduction)
end

function F.cross_entropy(...)
  local input, target = ...
  local fname = "cross_entropy"
  local a = parse_args(fname, 2, {"weight", "ignore_index", "reduction", "label_smoothing"}, 1, legacy_reduction(...))
  check_tensor(fname, "input", input)
  check_tensor(fname, "target", target)
  local weight = check_tensor(fname, "weight", a.weight, true)
  local ignore_index = check_number(fname, "ignore_index", a.ignore_index, -100)
  local reduction = check_reduction(fname, a.reduction)
  local smoothing = check_number(fname, "label_smoothing", a.label_smoothing, 0)
  if smoothing < 0 or smoothing > 1 then fail(fname .. ": label_smoothing must be in [0, 1], got " .. describe(smoothing)) end
  local class_dim = class_scores(fname, input)
  local probabilities = target.dtype ~= "int64" and same_shape(input, target)
  if probabilities and a.ignore_index ~= nil then
    fail(fname .. ": ignore_index is not supported with probability targets (a target of the input's shape)")
  end
  if not probabilities and not weight and a.ignore_index == nil and smoothing == 0 and reduction ~= "none" then
    return torch.cross_entropy(input, target, reduction)   -- the op row
  end
  if weight and (weight:dim() ~= 1 or weight:size(1) ~= input:size(class_dim)) then
    fail(string.format("%s: weight must be [C] = [%d], got %s", fname, input:size(class_dim), tostring(weight.shape)))
  end
  return named(fname, function()
    local logp = input:log_softmax(class_dim)
    local C = input:size(class_dim)
    if probabilities then
      if smoothing > 0 then target = target * (1 - smoothing) + smoothing / C end
      local terms = logp * target
      if weight then terms = terms * weight end
      local loss = -terms:sum(class_dim)
      if reduction == "mean" then return loss:sum() / (input:numel() / C) end
      return reduce_loss(loss, reduction)
    end
    local nll = nll_composed(logp, target, weight, ignore_index, reduction)
    if smoothing == 0 then return nll end
    -- PyTorch's label smoothing: (1 - e) nll + e / C * the sum over classes of -weight[c] logp[c]
    local labels = target.dtype == "int64" and target or target:long()
    local kept = labels:ne(ignore_index):to(logp.dtype)
    local smooth = -(weight and logp * weight or logp):sum(class_dim) * kept
    local ret
    if reduction == "mean" then
      if weight then
        ret = smooth:sum() / (weight:index_select(1, torch.where(kept, labels, 1):reshape(-1)) * kept:reshape(-1)):sum()
      else
        ret = smooth:sum() / kept:sum()   -- the labels counted, as nll_loss's mean
      end
    else
      ret = reduce_loss(smooth, reduction)
    end
    return nll * (1 - smoothing) + ret * (smoothing / C)
  end)
end

function F.mse_loss(...)
  local input, target = ...
  local a = parse_args("mse_loss", 2, {"reduction"}, 0, legacy_reduction(...))
  check_tensor("mse_loss", "input", input)
  check_tensor("mse_loss", "target", target)
  local reduction = check_reduction("mse_loss", a.reduction)
  if reduction ~= "none" then return torch.mse_loss(input, target, reduction) end   -- the op row
  return named("mse_loss", function() return (input - target):square() end)
end

function F.multi_margin_loss(...)
  local input, target = ...
  local fname = "multi_margin_loss"
  local a = parse_args(fname, 2, {"p", "margin", "weight", "reduction"}, 3, legacy_reduction(...))
  check_tensor(fname, "input", input)
  check_tensor(fname, "target", target)
  local p = check_number(fname, "p", a.p, 1)
  if p ~= 1 and p ~= 2 then fail(fname .. ": p must be 1 or 2, got " .. describe(p)) end
  local margin = check_number(fname, "margin", a.margin, 1)
  local weight = check_tensor(fname, "weight", a.weight, true)
  local reduction = check_reduction(fname, a.reduction)
  local class_dim = class_scores(fname, input)
  if p == 1 and margin == 1 and not weight and reduction ~= "none" then
    return torch.multi_margin_loss(input, target, reduction)   -- the op row
  end
  return named(fname, function()
    local one = class_dim == 1
    local x, labels = input, target.dtype == "int64" and target or target:long()
    if one then x, labels = x:unsqueeze(1), labels:reshape(1) end
    local C = x:size(2)
    local picked = x:gather(2, labels:unsqueeze(2))                            -- x[i, y_i], [N, 1]
    local hinge = (x - picked + margin):clamp{min = 0}
    if p == 2 then hinge = hinge:square() end
    if weight then hinge = hinge * weight:index_select(1, labels):unsqueeze(2) end
    local is_label = labels:unsqueeze(2):eq(torch.arange(1, C + 1, {device = labels.device}))   -- [N, C]
    local loss = hinge:masked_fill(is_label, 0):sum(2) / C
    if one then loss = loss:reshape({}) end
    return reduce_loss(loss, reduction)
  end)
end

-- ============================================================================================
-- F's NN functions

function F.dropout(...)
  local input = ...
  local a = parse_args("dropout", 1, {"p", "training"}, 2, ...)
  check_tensor("dropout", "input", input)
  local p = check_number("dropout", "p", a.p, 0.5)
  if p < 0 or p > 1 then fail("dropout: p must be in [0, 1], got " .. describe(p)) end
  local training = check_boolean("dropout", "training", a.training, true)
  if not training or p == 0 then return input end   -- PyTorch returns the input itself
  return named("dropout", function()
    if p == 1 then return input * torch.zeros_like(input) end
    -- PyTorch's: keep each element with probability 1 - p, scaled by 1 / (1 - p)
    local keep = torch.rand_like(input):lt(1 - p)
    return input * keep:div(1 - p)
  end)
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

function F.layer_norm(...)
  local input, normalized_shape = ...
  local a = parse_args("layer_norm", 2, {"weight", "bias", "eps"}, 3, ...)
  check_tensor("layer_norm", "input", input)
  local shape = size_list("layer_norm", "normalized_shape", normalized_shape)
  local weight = check_tensor("layer_norm", "weight", a.weight, true)
  local bias = check_tensor("layer_norm", "bias", a.bias, true)
  local eps = check_number("layer_norm", "eps", a.eps, 1e-5)
  local k, d = #shape, input:dim()
  local fits = k >= 1 and k <= d
  for i = 1, k do fits = fits and input:size(d - k + i) == shape[i] end
  if not fits then
    fail(string.format("layer_norm: normalized_shape [%s] is not the last dims of the input %s", table.concat(shape, ","),
                       tostring(input.shape)))
  end
  return named("layer_norm", function()
    local dims = {}
    for i = 1, k do dims[i] = d - k + i end
    local mean = input:mean(dims, true)
    local var = input:var(dims, {unbiased = false, keepdim = true})
    local y = (input - mean) * (var + eps):rsqrt()
    if weight then y = y * weight end
    if bias then y = y + bias end
    return y
  end)
end

function F.batch_norm(...)
  local input, running_mean, running_var = ...
  local fname = "batch_norm"
  local a = parse_args(fname, 3, {"weight", "bias", "training", "momentum", "eps"}, 5, ...)
  check_tensor(fname, "input", input)
  check_tensor(fname, "running_mean", running_mean, true)
  check_tensor(fname, "running_var", running_var, true)
  local weight = check_tensor(fname, "weight", a.weight, true)
  local bias = check_tensor(fname, "bias", a.bias, true)
  local training = check_boolean(fname, "training", a.training, false)
  local momentum = check_number(fname, "momentum", a.momentum, 0.1)
  local eps = check_number(fname, "eps", a.eps, 1e-5)
  if input:dim() < 2 then fail(fname .. ": input must be [N, C, ...], got " .. tostring(input.shape)) end
  if not training and (not running_mean or not running_var) then
    fail(fname .. ": running_mean and running_var are needed when training is false")
  end
  local C = input:size(2)
  for what, t in pairs({running_mean = running_mean, running_var = running_var, weight = weight, bias = bias}) do
    if t and (t:dim() ~= 1 or t:size(1) ~= C) then
      fail(string.format("%s: %s must be [C] = [%d], got %s", fname, what, C, tostring(t.shape)))
    end
  end
  return named(fname, function()
    -- per-channel tensors as [1, C, 1, ...] to broadcast over the input
    local view = {1, C}
    for i = 3, input:dim() do view[i] = 1 end
    local dims = {1}
    for i = 3, input:dim() do dims[#dims + 1] = i end
    local mean, var
    if training then
      local count = input:numel() / C
      if count <= 1 then fail(string.format("%s: expected more than 1 value per channel when training, got input %s", fname,
                                            tostring(input.shape))) end
      mean = input:mean(dims, true)
      var = input:var(dims, {unbiased = false, keepdim = true})
      if running_mean or running_var then
        torch.no_grad(function()   -- PyTorch's update: the running var is unbiased
          if running_mean then running_mean:mul_(1 - momentum):add_(mean:detach():reshape(C), momentum) end
          if running_var then running_var:mul_(1 - momentum):add_(var:detach():reshape(C) * (count / (count - 1)), momentum) end
        end)
      end
    else
      mean, var = running_mean:reshape(view), running_var:reshape(view)
    end
    local y = (input - mean) * (var + eps):rsqrt()
    if weight then y = y * weight:reshape(view) end
    if bias then y = y + bias:reshape(view) end
    return y
  end)
end

function F.embedding(...)
  local input, weight = ...
  parse_args("embedding", 2, {}, 0, ...)
  check_tensor("embedding", "input", input)
  check_tensor("embedding", "weight", weight)
  if input.dtype ~= "int64" then fail("embedding: input must be int64 indices (1-based), got " .. input.dtype) end
  if weight:dim() ~= 2 then fail("embedding: weight must be [num_embeddings, embedding_dim], got " .. tostring(weight.shape)) end
  return named("embedding", function()
    local shape = {}
    for i = 1, input:dim() do shape[i] = input:size(i) end
    shape[#shape + 1] = weight:size(2)
    return weight:index_select(1, input:reshape(-1)):reshape(shape)
  end)
end

function F.one_hot(...)
  local labels = ...
  local a = parse_args("one_hot", 1, {"num_classes"}, 1, ...)
  check_tensor("one_hot", "tensor", labels)
  if labels.dtype ~= "int64" then fail("one_hot: tensor must be int64 (1-based labels), got " .. labels.dtype) end
  local num_classes = a.num_classes == nil and -1 or check_integer("one_hot", "num_classes", a.num_classes, -1)
  if labels:numel() > 0 then
    local low, high = labels:min():item(), labels:max():item()
    if low < 1 then fail("one_hot: labels must be >= 1 (1-based), got " .. low) end
    if num_classes == -1 then num_classes = high end
    if high > num_classes then fail(string.format("one_hot: label %d is larger than num_classes = %d", high, num_classes)) end
  elseif num_classes == -1 then
    fail("one_hot: num_classes = -1 (from the labels) needs at least one label")
  end
  return named("one_hot", function()
    return labels:unsqueeze(-1):eq(torch.arange(1, num_classes + 1, {device = labels.device})):long()
  end)
end

function F.normalize(...)
  local input = ...
  local a = parse_args("normalize", 1, {"p", "dim", "eps"}, 3, ...)
  check_tensor("normalize", "input", input)
  local p = check_number("normalize", "p", a.p, 2)
  local dim = a.dim == nil and 2 or check_integer("normalize", "dim", a.dim, math.mininteger)
  local eps = check_number("normalize", "eps", a.eps, 1e-12)
  return named("normalize", function()
    return input / input:norm(p, dim, true):clamp{min = eps}:expand_as(input)
  end)
end

-- The 1-based indices a non-constant pad reads along a dim of size n padded by `before`, `after`.
local function pad_indices(mode, n, before, after)
  local index = {}
  for i = -before, n - 1 + after do
    local j
    if mode == "reflect" then
      j = i < 0 and -i or (i >= n and 2 * (n - 1) - i or i)
    elseif mode == "replicate" then
      j = math.min(math.max(i, 0), n - 1)
    else   -- circular
      j = i % n
    end
    index[#index + 1] = j + 1
  end
  return torch.tensor(index, {dtype = "int64"})
end

function F.pad(...)
  local input, pad = ...
  local a = parse_args("pad", 2, {"mode", "value"}, 2, ...)
  check_tensor("pad", "input", input)
  local pads = size_list("pad", "pad", pad)
  local mode = a.mode == nil and "constant" or a.mode
  if mode ~= "constant" and mode ~= "reflect" and mode ~= "replicate" and mode ~= "circular" then
    fail("pad: mode must be \"constant\", \"reflect\", \"replicate\" or \"circular\", got " .. describe(mode))
  end
  local value = check_number("pad", "value", a.value, 0)
  if mode ~= "constant" and a.value ~= nil and a.value ~= 0 then fail("pad: value is for mode \"constant\" only") end
  if #pads % 2 ~= 0 or #pads / 2 > input:dim() then
    fail(string.format("pad: pad must hold two sizes per dim (the last dim first), at most %d, got %d", 2 * input:dim(), #pads))
  end
  return named("pad", function()
    local x = input
    for k = 1, #pads // 2 do
      local dim, before, after = input:dim() - k + 1, pads[2 * k - 1], pads[2 * k]
      local n = x:size(dim)
      if n + before + after < 0 or (mode ~= "constant" and (before < 0 or after < 0)) then
        fail(string.format("pad: padding (%d, %d) of dim %d (size %d) is not possible in mode %s", before, after, dim, n, mode))
      end
      if mode == "constant" then
        if before < 0 then x, n, before = x:narrow(dim, 1 - before, n + before), n + before, 0 end
        if after < 0 then x, n, after = x:narrow(dim, 1, n + after), n + after, 0 end
        local parts = {}
        local function block(size)
          local shape = x:size()
          shape[dim] = size
          parts[#parts + 1] = torch.full(shape, value, {dtype = x.dtype, device = x.device})
        end
        if before > 0 then block(before) end
        parts[#parts + 1] = x
        if after > 0 then block(after) end
        if #parts > 1 then x = torch.cat(parts, dim) end
      else
        if (mode == "reflect" and (before >= n or after >= n)) or (mode == "circular" and (before > n or after > n)) then
          fail(string.format("pad: padding (%d, %d) of dim %d (size %d) is too large for mode %s", before, after, dim, n, mode))
        end
        x = x:index_select(dim, pad_indices(mode, n, before, after):to(x.device))
      end
    end
    return x
  end)
end

-- A pair of sizes from a number or a list of two (PyTorch's int or tuple).
local function size_pair(fname, what, v, min)
  if math.type(v) == "integer" then v = {v, v} end
  if type(v) == "table" and #v == 2 and math.type(v[1]) == "integer" and math.type(v[2]) == "integer" and v[1] >= min
     and v[2] >= min then
    return v[1], v[2]
  end
  fail(string.format("%s: %s must be an integer >= %d or a list of two, got %s", fname, what, min, describe(v)))
end

function F.avg_pool2d(...)
  local input, kernel_size = ...
  local fname = "avg_pool2d"
  local a = parse_args(fname, 2, {"stride", "padding", "ceil_mode", "count_include_pad", "divisor_override"}, 5, ...)
  check_tensor(fname, "input", input)
  local kh, kw = size_pair(fname, "kernel_size", kernel_size, 1)
  local sh, sw = kh, kw
  if a.stride ~= nil then sh, sw = size_pair(fname, "stride", a.stride, 1) end
  local ph, pw = 0, 0
  if a.padding ~= nil then ph, pw = size_pair(fname, "padding", a.padding, 0) end
  if check_boolean(fname, "ceil_mode", a.ceil_mode, false) then fail(fname .. ": ceil_mode = true is not supported") end
  local include_pad = check_boolean(fname, "count_include_pad", a.count_include_pad, true)
  local divisor = a.divisor_override ~= nil and check_integer(fname, "divisor_override", a.divisor_override, 1) or nil
  if ph * 2 > kh or pw * 2 > kw then fail(fname .. ": padding must be at most half the kernel size") end
  if input:dim() ~= 3 and input:dim() ~= 4 then fail(fname .. ": input must be [N, C, H, W] or [C, H, W], got " .. tostring(input.shape)) end
  local H, W = input:size(-2) + 2 * ph, input:size(-1) + 2 * pw
  if H < kh or W < kw then fail(string.format("%s: the kernel %dx%d is larger than the padded input %dx%d", fname, kh, kw, H, W)) end
  local oh, ow = (H - kh) // sh + 1, (W - kw) // sw + 1
  return named(fname, function()
    -- the sum of the kh * kw strided slices of the zero-padded input, one per offset in the window
    local function window_sum(t)
      local total
      for i = 1, kh do
        for j = 1, kw do
          local rows = t:narrow(-2, i, (oh - 1) * sh + 1)
          local part = rows:narrow(-1, j, (ow - 1) * sw + 1)
          if sh > 1 or sw > 1 then
            local key = {}
            for _ = 1, t:dim() - 2 do key[#key + 1] = {} end
            key[#key + 1] = {1, -1, sh}
            key[#key + 1] = {1, -1, sw}
            part = part[key]
          end
          total = total and total + part or part
        end
      end
      return total
    end
    local padded = (ph > 0 or pw > 0) and F.pad(input, {pw, pw, ph, ph}) or input
    local sums = window_sum(padded)
    if divisor then return sums / divisor end
    if include_pad or (ph == 0 and pw == 0) then return sums / (kh * kw) end
    local ones = torch.ones(input:size(-2), input:size(-1), {dtype = sums.dtype, device = sums.device})
    return sums / window_sum(F.pad(ones, {pw, pw, ph, ph}))
  end)
end

-- ============================================================================================
-- Modules over F [SECTION]: shape layers, activations, normalisation, Embedding, pooling,
-- Dropout, containers, losses. Constructors take PyTorch's arguments (1-based dims), keyword
-- arguments in a trailing options table; extra_repr prints what PyTorch prints.

-- Dims are 1-based: the default start_dim=2 keeps the batch dim, as PyTorch's nn.Flatten (start_dim=1).
nn.Flatten = Module:extend("Flatten")
function nn.Flatten:init(start_dim, end_dim)
  self.start_dim = start_dim == nil and 2 or check_integer("Flatten", "start_dim", start_dim, math.mininteger)
  self.end_dim = end_dim == nil and -1 or check_integer("Flatten", "end_dim", end_dim, math.mininteger)
end
function nn.Flatten:forward(x) return torch.flatten(x, self.start_dim, self.end_dim) end
function nn.Flatten:extra_repr() return string.format("start_dim=%d, end_dim=%d", self.start_dim, self.end_dim) end

-- nn.Unflatten(dim, sizes): dim (1-based) split into sizes ({2, 5}; one may be -1).
nn.Unflatten = Module:extend("Unflatten")
function nn.Unflatten:init(dim, unflattened_size)
  self.dim = check_integer("Unflatten", "dim", dim, math.mininteger)
  if type(unflattened_size) ~= "table" or #unflattened_size == 0 then
    fail("Unflatten: unflattened_size must be a list of sizes like {2, 5}, got " .. describe(unflattened_size))
  end
  for _, n in ipairs(unflattened_size) do check_integer("Unflatten", "unflattened_size", n, -1) end
  rawset(self, "unflattened_size", unflattened_size)
end
function nn.Unflatten:forward(x) return x:unflatten(self.dim, self.unflattened_size) end
function nn.Unflatten:extra_repr()
  return string.format("dim=%d, unflattened_size=%s", self.dim, py_size(self.unflattened_size))
end

-- nn.Identity(...): returns its input; arguments are ignored, as PyTorch's.
nn.Identity = Module:extend("Identity")
function nn.Identity:forward(x) return x end

-- Activations: modules with no parameters around one function.
for name, fn in pairs({ReLU = torch.relu, Tanh = torch.tanh, Sigmoid = torch.sigmoid}) do
  local class = Module:extend(name)
  class.forward = function(_, x) return fn(x) end
  nn[name] = class
end

nn.SiLU = Module:extend("SiLU")
function nn.SiLU:forward(x) return F.silu(x) end

-- nn.LeakyReLU([negative_slope = 0.01]) or {negative_slope =}
nn.LeakyReLU = Module:extend("LeakyReLU")
function nn.LeakyReLU:init(...)
  local a = parse_args("LeakyReLU", 0, {"negative_slope"}, 1, ...)
  self.negative_slope = check_number("LeakyReLU", "negative_slope", a.negative_slope, 0.01)
end
function nn.LeakyReLU:forward(x) return F.leaky_relu(x, self.negative_slope) end
function nn.LeakyReLU:extra_repr() return "negative_slope=" .. py_repr(self.negative_slope) end

-- nn.GELU([approximate = "none"]) or {approximate = "tanh"}
nn.GELU = Module:extend("GELU")
function nn.GELU:init(...)
  local a = parse_args("GELU", 0, {"approximate"}, 1, ...)
  local approximate = a.approximate == nil and "none" or a.approximate
  if approximate ~= "none" and approximate ~= "tanh" then
    fail("GELU: approximate must be \"none\" or \"tanh\", got " .. describe(approximate))
  end
  self.approximate = approximate
end
function nn.GELU:forward(x) return F.gelu(x, {approximate = self.approximate}) end
function nn.GELU:extra_repr() return "approximate='" .. self.approximate .. "'" end

-- nn.Softmax(dim), nn.LogSoftmax(dim): dim 1-based (PyTorch's dim=1 is 2 here).
for name, fn in pairs({Softmax = "softmax", LogSoftmax = "log_softmax"}) do
  local class = Module:extend(name)
  class.init = function(self, dim) self.dim = check_integer(name, "dim", dim, math.mininteger) end
  class.forward = function(self, x) return torch[fn](x, self.dim) end
  class.extra_repr = function(self) return "dim=" .. self.dim end
  nn[name] = class
end

-- nn.Dropout([p = 0.5]) or {p =}: F.dropout in training, the input itself in eval().
nn.Dropout = Module:extend("Dropout")
function nn.Dropout:init(...)
  local a = parse_args("Dropout", 0, {"p"}, 1, ...)
  self.p = check_number("Dropout", "p", a.p, 0.5)
  if self.p < 0 or self.p > 1 then fail("Dropout: p must be in [0, 1], got " .. describe(self.p)) end
end
function nn.Dropout:forward(x) return F.dropout(x, self.p, self.training) end
function nn.Dropout:extra_repr() return "p=" .. py_repr(self.p) .. ", inplace=False" end

-- nn.BatchNorm1d(C) ([N, C] or [N, C, L]) and nn.BatchNorm2d(C) ([N, C, H, W]), options
-- {eps = 1e-5, momentum = 0.1, affine = true, track_running_stats = true, dtype =}.
-- momentum = false is PyTorch's None: the running stats are the cumulative average.
-- Buffers running_mean (zeros), running_var (ones), num_batches_tracked (int64 0-d); weight ones,
-- bias zeros. In training (or without running stats) the batch's statistics normalise and the
-- running stats are updated; in eval() the running stats normalise.
local function batch_norm_class(name, accepted_dims)
  local class = Module:extend(name)
  function class:init(num_features, opts)
    num_features = check_integer(name, "num_features", num_features, 1)
    opts = check_options(name, opts, {eps = true, momentum = true, affine = true, track_running_stats = true, dtype = true},
                         "{momentum = 0.01}")
    local dtype = check_dtype(name, opts.dtype)
    self.num_features = num_features
    self.eps = check_number(name, "eps", opts.eps, 1e-5)
    if opts.momentum == false then self.momentum = false else self.momentum = check_number(name, "momentum", opts.momentum, 0.1) end
    self.affine = check_boolean(name, "affine", opts.affine, true)
    self.track_running_stats = check_boolean(name, "track_running_stats", opts.track_running_stats, true)
    if self.affine then
      self.weight = init_parameter(name, function() return torch.ones(num_features, {dtype = dtype}) end)
      self.bias = init_parameter(name, function() return torch.zeros(num_features, {dtype = dtype}) end)
    end
    if self.track_running_stats then
      self:register_buffer("running_mean", torch.zeros(num_features, {dtype = dtype}))
      self:register_buffer("running_var", torch.ones(num_features, {dtype = dtype}))
      self:register_buffer("num_batches_tracked", torch.zeros({}, {dtype = "int64"}))
    end
  end
  function class:forward(x)
    if not torch.is_tensor(x) or not accepted_dims[x:dim()] then
      fail(string.format("%s: expected %s input, got %s", name, accepted_dims.text, torch.is_tensor(x) and tostring(x.shape) or describe(x)))
    end
    local factor = self.momentum or 0.0
    if self.training and self.track_running_stats then
      torch.no_grad(function() self.num_batches_tracked:add_(1) end)
      if self.momentum == false then factor = 1 / self.num_batches_tracked:item() end
    end
    local use_batch_stats = self.training or not self.track_running_stats
    local tracked = not self.training or self.track_running_stats
    return F.batch_norm(x, tracked and self.running_mean or nil, tracked and self.running_var or nil, self.weight, self.bias,
                        use_batch_stats, factor, self.eps)
  end
  function class:extra_repr()
    return string.format("%d, eps=%s, momentum=%s, affine=%s, track_running_stats=%s", self.num_features, py_repr(self.eps),
                         self.momentum == false and "None" or py_repr(self.momentum), py_repr(self.affine),
                         py_repr(self.track_running_stats))
  end
  nn[name] = class
end
batch_norm_class("BatchNorm1d", {[2] = true, [3] = true, text = "2D or 3D ([N, C] or [N, C, L])"})
batch_norm_class("BatchNorm2d", {[4] = true, text = "4D ([N, C, H, W])"})

-- nn.LayerNorm(normalized_shape [, {eps = 1e-5, elementwise_affine = true, bias = true, dtype =}]):
-- over the last dims; weight ones, bias zeros, of normalized_shape.
nn.LayerNorm = Module:extend("LayerNorm")
function nn.LayerNorm:init(normalized_shape, opts)
  local shape = size_list("LayerNorm", "normalized_shape", normalized_shape)
  opts = check_options("LayerNorm", opts, {eps = true, elementwise_affine = true, bias = true, dtype = true}, "{eps = 1e-6}")
  local dtype = check_dtype("LayerNorm", opts.dtype)
  rawset(self, "normalized_shape", shape)
  self.eps = check_number("LayerNorm", "eps", opts.eps, 1e-5)
  self.elementwise_affine = check_boolean("LayerNorm", "elementwise_affine", opts.elementwise_affine, true)
  if self.elementwise_affine then
    self.weight = init_parameter("LayerNorm", function() return torch.ones(shape, {dtype = dtype}) end)
    if check_boolean("LayerNorm", "bias", opts.bias, true) then
      self.bias = init_parameter("LayerNorm", function() return torch.zeros(shape, {dtype = dtype}) end)
    end
  end
end
function nn.LayerNorm:forward(x) return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps) end
function nn.LayerNorm:extra_repr()
  return string.format("%s, eps=%s, elementwise_affine=%s", py_size(self.normalized_shape), py_repr(self.eps),
                       py_repr(self.elementwise_affine))
end

-- nn.Embedding(num_embeddings, embedding_dim [, {padding_idx =, dtype =}]): weight N(0, 1); the
-- row padding_idx (1-based) starts at zero and gets no gradient, as PyTorch's.
nn.Embedding = Module:extend("Embedding")
function nn.Embedding:init(num_embeddings, embedding_dim, opts)
  num_embeddings = check_integer("Embedding", "num_embeddings", num_embeddings, 1)
  embedding_dim = check_integer("Embedding", "embedding_dim", embedding_dim, 1)
  opts = check_options("Embedding", opts, {padding_idx = true, dtype = true}, "{padding_idx = 1}")
  local dtype = check_dtype("Embedding", opts.dtype)
  self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
  if opts.padding_idx ~= nil then
    local index = check_integer("Embedding", "padding_idx", opts.padding_idx, -num_embeddings)
    if index == 0 or index > num_embeddings then
      fail(string.format("Embedding: padding_idx must be in 1..%d (or negative from the end), got %d", num_embeddings, index))
    end
    self.padding_idx = index < 0 and num_embeddings + 1 + index or index
  end
  self.weight = init_parameter("Embedding", function()
    local w = torch.randn(num_embeddings, embedding_dim, {dtype = dtype})
    if self.padding_idx then w[self.padding_idx]:fill_(0) end
    return w
  end)
end
function nn.Embedding:forward(input)
  local weight = self.weight
  if self.padding_idx then   -- the padding row's values, without its gradient
    local is_padding = torch.arange(1, self.num_embeddings + 1, {device = weight.device}):eq(self.padding_idx):unsqueeze(2)
    weight = torch.where(is_padding, weight:detach(), weight)
  end
  return F.embedding(input, weight)
end
function nn.Embedding:extra_repr()
  return string.format("%d, %d", self.num_embeddings, self.embedding_dim) ..
         (self.padding_idx and ", padding_idx=" .. self.padding_idx or "")
end

-- nn.AvgPool2d(kernel_size [, stride] [, {stride =, padding = 0, ceil_mode =, count_include_pad = true,
-- divisor_override =}]): F.avg_pool2d.
nn.AvgPool2d = Module:extend("AvgPool2d")
function nn.AvgPool2d:init(kernel_size, stride, opts)
  if opts == nil and is_options(stride) then stride, opts = nil, stride end
  check_pair("AvgPool2d", "kernel_size", kernel_size, 1)
  opts = check_options("AvgPool2d", opts, {stride = true, padding = true, ceil_mode = true, count_include_pad = true,
                                           divisor_override = true}, "{stride = 2, padding = 1}")
  if stride ~= nil and opts.stride ~= nil then fail("AvgPool2d: stride is given twice: as argument 2 and as an option") end
  rawset(self, "kernel_size", kernel_size)
  rawset(self, "stride", stride or opts.stride or kernel_size)
  rawset(self, "padding", opts.padding or 0)
  rawset(self, "pool_options", {stride = self.stride, padding = self.padding, ceil_mode = opts.ceil_mode,
                                count_include_pad = opts.count_include_pad, divisor_override = opts.divisor_override})
  check_pair("AvgPool2d", "stride", self.stride, 1)
  check_pair("AvgPool2d", "padding", self.padding, 0)
end
function nn.AvgPool2d:forward(x) return F.avg_pool2d(x, self.kernel_size, self.pool_options) end
function nn.AvgPool2d:extra_repr()
  return string.format("kernel_size=%s, stride=%s, padding=%s", py_size(self.kernel_size), py_size(self.stride),
                       py_size(self.padding))
end

-- F.adaptive_avg_pool2d(x, output_size): output cell (i, j) is the mean of rows
-- floor((i-1) H / oh) + 1 .. ceil(i H / oh) and the same for columns (PyTorch's windows). The mean
-- of a rectangle is the mean over its rows of the means over its columns, so this is oh row means
-- (narrow, mean) joined by cat, then ow column means: oh + ow means, not oh * ow. A size nil (or
-- a missing entry) keeps the input's.
function F.adaptive_avg_pool2d(...)
  local input, output_size = ...
  local fname = "adaptive_avg_pool2d"
  parse_args(fname, 2, {}, 0, ...)
  check_tensor(fname, "input", input)
  if input:dim() ~= 3 and input:dim() ~= 4 then fail(fname .. ": input must be [N, C, H, W] or [C, H, W], got " .. tostring(input.shape)) end
  local sizes = type(output_size) == "table" and output_size or {output_size, output_size}
  local out = {}
  for i, dim in ipairs({-2, -1}) do
    local n = sizes[i] == nil and input:size(dim) or sizes[i]
    if math.type(n) ~= "integer" or n < 1 then
      fail(string.format("%s: output_size must be an integer >= 1 or a list {h, w}, got %s", fname, describe(output_size)))
    end
    out[i] = n
  end
  return named(fname, function()
    local x = input
    for i, dim in ipairs({-2, -1}) do
      local size, n = x:size(dim), out[i]
      if size % n == 0 and size // n > 1 then   -- equal windows: one reshape and mean
        local shape = x:size()
        local d = #shape + dim + 1
        x = x:unflatten(d, {n, size // n}):mean(d + 1)
      elseif size ~= n then
        local parts = {}
        for k = 0, n - 1 do
          local first, last = (k * size) // n, -((-(k + 1) * size) // n)   -- floor and ceil
          parts[#parts + 1] = x:narrow(dim, first + 1, last - first):mean(dim, true)
        end
        x = torch.cat(parts, dim)
      end
    end
    return x
  end)
end

-- nn.AdaptiveAvgPool2d(output_size): F.adaptive_avg_pool2d; output_size a number or {h, w}.
nn.AdaptiveAvgPool2d = Module:extend("AdaptiveAvgPool2d")
function nn.AdaptiveAvgPool2d:init(output_size)
  if type(output_size) == "table" then
    for i = 1, 2 do if output_size[i] ~= nil then check_integer("AdaptiveAvgPool2d", "output_size", output_size[i], 1) end end
  else
    check_integer("AdaptiveAvgPool2d", "output_size", output_size, 1)
  end
  rawset(self, "output_size", output_size)
end
function nn.AdaptiveAvgPool2d:forward(x) return F.adaptive_avg_pool2d(x, self.output_size) end
function nn.AdaptiveAvgPool2d:extra_repr()
  if type(self.output_size) ~= "table" then return "output_size=" .. self.output_size end
  return string.format("output_size=(%s, %s)", py_repr(self.output_size[1]), py_repr(self.output_size[2]))
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
-- Losses as modules: criterion(input, target) calls the F form with the options given to the
-- constructor (positional ones as PyTorch's: nn.CrossEntropyLoss(weight), nn.MultiMarginLoss(p,
-- margin, weight)). Tensors (weight, pos_weight) are buffers, as PyTorch's.

-- {class, F name, the parameters by position, all the parameters}
local loss_modules = {
  {"L1Loss", "l1_loss", 0, {"reduction"}},
  {"MSELoss", "mse_loss", 0, {"reduction"}},
  {"SmoothL1Loss", "smooth_l1_loss", 0, {"reduction", "beta"}},
  {"BCELoss", "binary_cross_entropy", 1, {"weight", "reduction"}},
  {"BCEWithLogitsLoss", "binary_cross_entropy_with_logits", 1, {"weight", "reduction", "pos_weight"}},
  {"CrossEntropyLoss", "cross_entropy", 1, {"weight", "ignore_index", "reduction", "label_smoothing"}},
  {"NLLLoss", "nll_loss", 1, {"weight", "ignore_index", "reduction"}},
  {"MultiMarginLoss", "multi_margin_loss", 3, {"p", "margin", "weight", "reduction"}},
}
for _, spec in ipairs(loss_modules) do
  local name, fname, n_positional, names = table.unpack(spec)
  local class = Module:extend(name)
  function class:init(...)
    local first = ...
    if n_positional == 0 and first ~= nil and type(first) ~= "table" then
      fail(string.format("%s: options must be a table like {reduction = \"sum\"}, got %s", name, describe(first)))
    end
    local a = parse_args(name, 0, names, n_positional, ...)
    self.reduction = check_reduction(name, a.reduction)
    local given = {}
    for _, key in ipairs(names) do
      local value = a[key]
      if key == "weight" or key == "pos_weight" then
        check_tensor(name, key, value, true)
        self:register_buffer(key, value)
      elseif value ~= nil then
        given[key] = value
      end
    end
    rawset(self, "given_options", given)
  end
  function class:forward(input, target)
    local opts = {reduction = self.reduction}
    for key, value in pairs(self.given_options) do opts[key] = value end
    if self.weight then opts.weight = self.weight end
    if self.pos_weight then opts.pos_weight = self.pos_weight end
    return F[fname](input, target, opts)
  end
  nn[name] = class
end

-- ============================================================================================
-- Attention [SECTION]: nn.MultiheadAttention, PyTorch's, written over linear, views (reshape,
-- transpose), bmm, softmax and masked_fill, so each step is a node the debugger can stop at.

-- PyTorch's out_proj is this Linear subclass (its name is what print(model) shows).
local NonDynamicallyQuantizableLinear = nn.Linear:extend("NonDynamicallyQuantizableLinear")

-- Xavier (Glorot) uniform of a [fan_out, fan_in] weight: bound sqrt(6 / (fan_in + fan_out)).
local function xavier_uniform_parameter(fan_out, fan_in, dtype)
  return uniform_parameter({fan_out, fan_in}, math.sqrt(6 / (fan_in + fan_out)), dtype)
end

-- nn.MultiheadAttention(embed_dim, num_heads [, {dropout = 0, bias = true, batch_first = false,
-- kdim = embed_dim, vdim = embed_dim, dtype}]): PyTorch's parameters and names: in_proj_weight
-- [3E, E] and in_proj_bias [3E] (or q_proj_weight, k_proj_weight, v_proj_weight when kdim or vdim
-- differ from E), out_proj.weight and out_proj.bias; PyTorch's init (xavier uniform for the input
-- projections, zeros for the biases, Linear's for out_proj.weight).
nn.MultiheadAttention = Module:extend("MultiheadAttention")
function nn.MultiheadAttention:init(embed_dim, num_heads, opts)
  local class = "MultiheadAttention"
  embed_dim = check_integer(class, "embed_dim", embed_dim, 1)
  num_heads = check_integer(class, "num_heads", num_heads, 1)
  opts = check_options(class, opts, {dropout = true, bias = true, batch_first = true, kdim = true, vdim = true, dtype = true},
                       "{batch_first = true}")
  local dtype = check_dtype(class, opts.dtype)
  if embed_dim % num_heads ~= 0 then
    fail(string.format("%s: embed_dim (%d) must be divisible by num_heads (%d)", class, embed_dim, num_heads))
  end
  self.embed_dim, self.num_heads, self.head_dim = embed_dim, num_heads, embed_dim // num_heads
  self.kdim = opts.kdim == nil and embed_dim or check_integer(class, "kdim", opts.kdim, 1)
  self.vdim = opts.vdim == nil and embed_dim or check_integer(class, "vdim", opts.vdim, 1)
  self.dropout = check_number(class, "dropout", opts.dropout, 0.0)
  if self.dropout < 0 or self.dropout > 1 then fail(class .. ": dropout must be in [0, 1], got " .. describe(self.dropout)) end
  self.batch_first = check_boolean(class, "batch_first", opts.batch_first, false)
  local bias = check_boolean(class, "bias", opts.bias, true)
  self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
  named(class, function()
    if self._qkv_same_embed_dim then
      self.in_proj_weight = xavier_uniform_parameter(3 * embed_dim, embed_dim, dtype)
    else
      self.q_proj_weight = xavier_uniform_parameter(embed_dim, embed_dim, dtype)
      self.k_proj_weight = xavier_uniform_parameter(embed_dim, self.kdim, dtype)
      self.v_proj_weight = xavier_uniform_parameter(embed_dim, self.vdim, dtype)
    end
    if bias then self.in_proj_bias = nn.Parameter(torch.zeros(3 * embed_dim, {dtype = dtype})) end
    self.out_proj = NonDynamicallyQuantizableLinear(embed_dim, embed_dim, {bias = bias, dtype = dtype})
    if bias then torch.no_grad(function() self.out_proj.bias:zero_() end) end
  end)
end

-- A mask as the float tensor added to the attention scores, PyTorch's two kinds: a boolean mask
-- (true: may not attend) gives -inf where set, 0 elsewhere; a float mask is added as it is. There
-- is no bool dtype here, so an int64 mask is the boolean kind (non-zero: true) and a float mask the
-- additive kind. A float mask of only 0s and 1s is refused: that is a boolean mask made by a
-- comparison (float 0/1), which added as it is would silently attend everywhere.
local function additive_mask(fname, what, mask, dtype)
  if mask.dtype == "int64" then
    return torch.zeros(mask:size(), {dtype = dtype, device = mask.device}):masked_fill(mask, -math.huge)
  end
  local zeros_and_ones = (mask:eq(0) + mask:eq(1)):min():item() == 1 and mask:max():item() == 1
  if zeros_and_ones then
    fail(string.format("%s: %s is a float mask of 0s and 1s, which would be added to the scores (PyTorch's float mask); " ..
                       "for a boolean mask (1: may not attend) give it as int64: mask:long()", fname, what))
  end
  return mask.dtype == dtype and mask or mask:to(dtype)
end

local function shape_text(t) return tostring(t.shape) end

-- Checks the ranks PyTorch accepts (_mha_shape_check); returns whether the input is batched.
local function attention_is_batched(fname, query, key, value, key_padding_mask, attn_mask)
  local rank = query:dim()
  if rank ~= 2 and rank ~= 3 then
    fail(string.format("%s: query must be 3-D (batched) or 2-D (unbatched), got %s", fname, shape_text(query)))
  end
  if key:dim() ~= rank or value:dim() ~= rank then
    fail(string.format("%s: key %s and value %s must be %d-D as the query %s", fname, shape_text(key), shape_text(value), rank,
                       shape_text(query)))
  end
  if key_padding_mask and key_padding_mask:dim() ~= rank - 1 then
    fail(string.format("%s: key_padding_mask must be %d-D for a %d-D query, got %s", fname, rank - 1, rank,
                       shape_text(key_padding_mask)))
  end
  if attn_mask and attn_mask:dim() ~= 2 and attn_mask:dim() ~= 3 then
    fail(string.format("%s: attn_mask must be 2-D or 3-D, got %s", fname, shape_text(attn_mask)))
  end
  return rank == 3
end

-- The input projections: q, k, v as [L or S, N, E]. Self-attention (one tensor for all three)
-- makes one linear with the packed weight and chunks its result, as PyTorch.
function nn.MultiheadAttention:project_inputs(query, key, value)
  local bq, bk, bv
  if self.in_proj_bias then bq, bk, bv = table.unpack(self.in_proj_bias:chunk(3)) end
  if not self._qkv_same_embed_dim then
    return torch.linear(query, self.q_proj_weight, bq), torch.linear(key, self.k_proj_weight, bk),
           torch.linear(value, self.v_proj_weight, bv)
  end
  if query == key and key == value then
    return table.unpack(torch.linear(query, self.in_proj_weight, self.in_proj_bias):chunk(3, -1))
  end
  local wq, wk, wv = table.unpack(self.in_proj_weight:chunk(3))
  return torch.linear(query, wq, bq), torch.linear(key, wk, bk), torch.linear(value, wv, bv)
end

-- The one mask added to the [N * heads, L, S] scores (nil when there is none): attn_mask [L, S]
-- or [N * heads, L, S], plus key_padding_mask [N, S] on every head and query; is_causal without
-- an attn_mask is the causal mask (no key after the query).
function nn.MultiheadAttention:merged_mask(fname, attn_mask, key_padding_mask, is_causal, N, L, S, dtype)
  local H = self.num_heads
  local mask
  if attn_mask then
    local expected = attn_mask:dim() == 2 and {L, S} or {N * H, L, S}
    if table.concat(attn_mask:size(), ",") ~= table.concat(expected, ",") then
      fail(string.format("%s: attn_mask must be [%s] (%s), got %s", fname, table.concat(expected, ","),
                         attn_mask:dim() == 2 and "target length, source length" or "batch * num_heads, target, source",
                         shape_text(attn_mask)))
    end
    mask = additive_mask(fname, "attn_mask", attn_mask, dtype)
    if attn_mask:dim() == 2 then mask = mask:unsqueeze(1) end
  elseif is_causal then
    local device = self.out_proj.weight.device
    mask = torch.zeros(1, L, S, {dtype = dtype, device = device}):masked_fill(
      torch.ones(1, L, S, {device = device}):triu(1), -math.huge)
  end
  if key_padding_mask then
    if key_padding_mask:size(1) ~= N or key_padding_mask:size(2) ~= S then
      fail(string.format("%s: key_padding_mask must be [%d, %d] (batch, source length), got %s", fname, N, S,
                         shape_text(key_padding_mask)))
    end
    local padding = additive_mask(fname, "key_padding_mask", key_padding_mask, dtype)
    padding = padding:reshape(N, 1, 1, S):expand(N, H, 1, S):reshape(N * H, 1, S)
    mask = mask and mask + padding or padding
  end
  return mask
end

-- mha(query, key, value [, key_padding_mask [, need_weights = true [, attn_mask [,
-- average_attn_weights = true [, is_causal = false]]]]]) or the same by name in an options table.
-- query [L, N, E], key [S, N, kdim], value [S, N, vdim] ([N, L, E] ... with batch_first), or one
-- sequence [L, E], [S, kdim], [S, vdim]. Returns the output (the query's shape) and the attention
-- weights [N, L, S] averaged over the heads ([N, heads, L, S] with average_attn_weights = false;
-- [L, S] unbatched), or nil with need_weights = false.
function nn.MultiheadAttention:forward(...)
  local fname = "MultiheadAttention"
  local query, key, value = ...
  local a = parse_args(fname, 3, {"key_padding_mask", "need_weights", "attn_mask", "average_attn_weights", "is_causal"}, 5, ...)
  check_tensor(fname, "query", query)
  check_tensor(fname, "key", key)
  check_tensor(fname, "value", value)
  local key_padding_mask = check_tensor(fname, "key_padding_mask", a.key_padding_mask, true)
  local attn_mask = check_tensor(fname, "attn_mask", a.attn_mask, true)
  local need_weights = check_boolean(fname, "need_weights", a.need_weights, true)
  local average = check_boolean(fname, "average_attn_weights", a.average_attn_weights, true)
  local is_causal = check_boolean(fname, "is_causal", a.is_causal, false)
  local batched = attention_is_batched(fname, query, key, value, key_padding_mask, attn_mask)
  return named(fname, function()
    local q_in, k_in, v_in = query, key, value
    if batched and self.batch_first then   -- to [L, N, E], keeping self-attention's one tensor one
      q_in = query:transpose(1, 2)
      k_in = key == query and q_in or key:transpose(1, 2)
      v_in = value == key and k_in or value:transpose(1, 2)
    elseif not batched then
      q_in = query:unsqueeze(2)
      k_in = key == query and q_in or key:unsqueeze(2)
      v_in = value == key and k_in or value:unsqueeze(2)
      if key_padding_mask then key_padding_mask = key_padding_mask:unsqueeze(1) end
    end
    local L, N, E = q_in:size(1), q_in:size(2), q_in:size(3)
    local S = k_in:size(1)
    if E ~= self.embed_dim or k_in:size(3) ~= self.kdim or v_in:size(3) ~= self.vdim then
      fail(string.format("%s: query, key, value must end in embed_dim %d, kdim %d, vdim %d; got %s, %s, %s", fname,
                         self.embed_dim, self.kdim, self.vdim, shape_text(query), shape_text(key), shape_text(value)))
    end
    if k_in:size(2) ~= N or v_in:size(2) ~= N or v_in:size(1) ~= S then
      fail(string.format("%s: query %s, key %s and value %s must have the same batch size, key and value the same length",
                         fname, shape_text(query), shape_text(key), shape_text(value)))
    end
    local H, hd = self.num_heads, self.head_dim
    local mask = self:merged_mask(fname, attn_mask, key_padding_mask, is_causal, N, L, S, query.dtype)
    local q, k, v = self:project_inputs(q_in, k_in, v_in)
    -- heads as batches: [L, N, E] -> [N * H, L, head_dim]
    q = q:reshape(L, N * H, hd):transpose(1, 2)
    k = k:reshape(S, N * H, hd):transpose(1, 2)
    v = v:reshape(S, N * H, hd):transpose(1, 2)
    local scores = (q * math.sqrt(1 / hd)):bmm(k:transpose(2, 3))   -- [N * H, L, S]
    if mask then scores = scores + mask end
    local weights = F.dropout(scores:softmax(3), self.dropout, self.training)
    local output = weights:bmm(v):transpose(1, 2):reshape(L, N, E)
    output = self.out_proj(output)
    if batched and self.batch_first then output = output:transpose(1, 2) elseif not batched then output = output:squeeze(2) end
    if not need_weights then return output, nil end
    weights = weights:reshape(N, H, L, S)
    if average then weights = weights:mean(2) end
    if not batched then weights = weights:squeeze(1) end
    return output, weights
  end)
end

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
-- Helpers for the parts of nn written in other embedded files (nn_recurrent.lua: RNN, LSTM, GRU
-- and their cells), so their checks and errors read as this file's.

nn._helpers = {check_integer = check_integer, check_options = check_options, check_dtype = check_dtype,
               check_boolean = check_boolean, check_number = check_number, named = named,
               uniform_parameter = uniform_parameter, py_repr = py_repr}

return nn
