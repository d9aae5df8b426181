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
  if message:find("%([^()]*:%d+%)$") then error(class .. ": " .. message, 0) end
  fail(class .. ": " .. message)
end

-- ============================================================================================
-- Module

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

-- Remember the order fields are first assigned in; the value itself is stored as usual.
local function register_field(self, key, value)
  if is_module(value) and rawget(value, "_field") == nil then rawset(value, "_field", tostring(key)) end
  if is_module(value) or is_parameter(value) or (type(value) == "table" and not getmetatable(value)) then
    local order = rawget(self, "_order")
    order[#order + 1] = key
  end
  rawset(self, key, value)
end

-- module(...) runs module:forward(...) inside a scope named after the module ("linear1:Linear",
-- nested in its parent's), so every node it records says which module call made it.
local function call_in_scope(module, ...)
  local field = rawget(module, "_field")
  local name = getmetatable(module).__name
  return torch.scope(field and (field .. ":" .. name) or name, module.forward, module, ...)
end

-- Class:extend(name): a new module class; instances are made by calling the class.
function Module:extend(name)
  if type(name) ~= "string" then
    fail("Module:extend: give the class a name, e.g. nn.Module:extend(\"TwoLayerNet\"), got " .. describe(name))
  end
  local class = setmetatable({__name = name}, {__index = self, __call = function(class, ...) return class:new(...) end})
  class.__index = class
  class.__newindex = register_field
  class.__call = call_in_scope
  class.__tostring = function(module) return module:describe("") end
  class.__is_module = true
  return class
end

-- Class:new(...): an instance, set up, then the class's init(...) runs.
function Module:new(...)
  local module = setmetatable({_order = {}, training = true}, self)
  module:init(...)
  return module
end

function Module:init() end

function Module:forward()
  local name = type(self) == "table" and getmetatable(self) and getmetatable(self).__name or "Module"
  fail(name .. ": forward is not defined (define " .. name .. ":forward(x))")
end

-- Visits the registered fields in order: fn(name, value) for modules, parameters and plain tables'
-- items (named "field.1", ...).
local function each_registered(module, fn)
  for _, key in ipairs(rawget(module, "_order")) do
    local value = rawget(module, key)
    if type(value) == "table" and not is_module(value) then
      for i, item in ipairs(value) do fn(tostring(key) .. "." .. i, item) end
    else
      fn(tostring(key), value)
    end
  end
end

-- The parameters as {name, tensor} pairs, depth first in registration order ("linear1.weight").
function Module:named_parameters()
  local list, seen = {}, {}
  local function visit(module, prefix)
    each_registered(module, function(name, value)
      if is_module(value) then
        visit(value, prefix .. name .. ".")
      elseif is_parameter(value) and not seen[value] then
        seen[value] = true
        list[#list + 1] = {prefix .. name, value}
      end
    end)
  end
  visit(self, "")
  return list
end

function Module:parameters()
  local list = {}
  for i, pair in ipairs(self:named_parameters()) do list[i] = pair[2] end
  return list
end

-- The direct child modules, in registration order.
function Module:children()
  local list = {}
  each_registered(self, function(_, value) if is_module(value) then list[#list + 1] = value end end)
  return list
end

-- Gradients are dropped (PyTorch's set_to_none): the next backward starts them afresh.
function Module:zero_grad()
  for _, p in ipairs(self:parameters()) do p.grad = nil end
end

function Module:train(mode)
  if mode == nil then mode = true end
  rawset(self, "training", mode)
  for _, child in ipairs(self:children()) do child:train(mode) end
  return self
end

function Module:eval() return self:train(false) end

-- What tostring prints between the parentheses, e.g. "in_features=2, out_features=3".
function Module:extra_repr() return "" end

function Module:describe(indent)
  local name = getmetatable(self).__name
  local lines = {}
  each_registered(self, function(key, value)
    if is_module(value) then lines[#lines + 1] = indent .. "  (" .. key .. "): " .. value:describe(indent .. "  ") end
  end)
  if #lines == 0 then return name .. "(" .. self:extra_repr() .. ")" end
  return name .. "(\n" .. table.concat(lines, "\n") .. "\n" .. indent .. ")"
end

-- ============================================================================================
-- Parameters and initialisation

-- A leaf that requires grad, with t's values.
function nn.Parameter(t)
  if not torch.is_tensor(t) then fail("Parameter: expects a tensor, got " .. describe(t)) end
  return named("Parameter", function() return t:detach():clone():requires_grad_(true) end)
end

-- Uniform on [-bound, bound), as PyTorch's default init of Linear and Conv2d.
local function uniform_parameter(shape, bound, dtype)
  return nn.Parameter(torch.rand(shape, {dtype = dtype}) * (2 * bound) - bound)
end

-- ============================================================================================
-- Layers

nn.Linear = Module:extend("Linear")
function nn.Linear:init(in_features, out_features, opts)
  in_features = check_integer("Linear", "in_features", in_features, 0)
  out_features = check_integer("Linear", "out_features", out_features, 0)
  opts = check_options("Linear", opts, {bias = true, dtype = true}, "{bias = false}")
  self.in_features, self.out_features = in_features, out_features
  local bound = 1 / math.sqrt(in_features)
  self.weight = named("Linear", uniform_parameter, {out_features, in_features}, bound, opts.dtype)
  if opts.bias ~= false then self.bias = named("Linear", uniform_parameter, {out_features}, bound, opts.dtype) end
end
function nn.Linear:forward(x) return torch.linear(x, self.weight, self.bias) end
function nn.Linear:extra_repr()
  return string.format("in_features=%d, out_features=%d, bias=%s", self.in_features, self.out_features,
                       tostring(self.bias ~= nil))
end

nn.Conv2d = Module:extend("Conv2d")
function nn.Conv2d:init(in_channels, out_channels, kernel_size, opts)
  in_channels = check_integer("Conv2d", "in_channels", in_channels, 1)
  out_channels = check_integer("Conv2d", "out_channels", out_channels, 1)
  kernel_size = check_integer("Conv2d", "kernel_size", kernel_size, 1)
  opts = check_options("Conv2d", opts, {stride = true, padding = true, bias = true, dtype = true}, "{stride = 1, padding = 0}")
  self.in_channels, self.out_channels, self.kernel_size = in_channels, out_channels, kernel_size
  self.stride = opts.stride == nil and 1 or check_integer("Conv2d", "stride", opts.stride, 1)
  self.padding = opts.padding == nil and 0 or check_integer("Conv2d", "padding", opts.padding, 0)
  local bound = 1 / math.sqrt(in_channels * kernel_size * kernel_size)
  self.weight = named("Conv2d", uniform_parameter, {out_channels, in_channels, kernel_size, kernel_size}, bound, opts.dtype)
  if opts.bias ~= false then self.bias = named("Conv2d", uniform_parameter, {out_channels}, bound, opts.dtype) end
end
function nn.Conv2d:forward(x)
  return torch.conv2d(x, self.weight, self.bias, {stride = self.stride, padding = self.padding})
end
function nn.Conv2d:extra_repr()
  return string.format("%d, %d, kernel_size=%d, stride=%d, padding=%d", self.in_channels, self.out_channels,
                       self.kernel_size, self.stride, self.padding)
end

nn.MaxPool2d = Module:extend("MaxPool2d")
function nn.MaxPool2d:init(kernel_size, stride)
  self.kernel_size = check_integer("MaxPool2d", "kernel_size", kernel_size, 1)
  self.stride = stride == nil and self.kernel_size or check_integer("MaxPool2d", "stride", stride, 1)
end
function nn.MaxPool2d:forward(x) return torch.max_pool2d(x, self.kernel_size, self.stride) end
function nn.MaxPool2d:extra_repr() return string.format("kernel_size=%d, stride=%d", self.kernel_size, self.stride) end

-- Dims are 1-based: the default start_dim=2 keeps the batch dim, as PyTorch's nn.Flatten (start_dim=1).
nn.Flatten = Module:extend("Flatten")
function nn.Flatten:init(start_dim, end_dim)
  self.start_dim = start_dim == nil and 2 or check_integer("Flatten", "start_dim", start_dim, math.mininteger)
  self.end_dim = end_dim == nil and -1 or check_integer("Flatten", "end_dim", end_dim, math.mininteger)
end
function nn.Flatten:forward(x) return torch.flatten(x, self.start_dim, self.end_dim) end
function nn.Flatten:extra_repr() return string.format("start_dim=%d, end_dim=%d", self.start_dim, self.end_dim) end

-- Activations: modules with no parameters around one op.
for name, method in pairs({ReLU = "relu", Tanh = "tanh", Sigmoid = "sigmoid"}) do
  local class = Module:extend(name)
  class.forward = function(_, x) return torch[method](x) end
  nn[name] = class
end

nn.Softmax = Module:extend("Softmax")
function nn.Softmax:init(dim) self.dim = check_integer("Softmax", "dim", dim, math.mininteger) end
function nn.Softmax:forward(x) return torch.softmax(x, self.dim) end

nn.Sequential = Module:extend("Sequential")
function nn.Sequential:init(...)
  local modules = {...}
  for i = 1, select("#", ...) do   -- a nil in the middle is an error too, not the end of the list
    local module = modules[i]
    if not is_module(module) then fail("Sequential: argument " .. i .. " is not a module, got " .. describe(module)) end
    self[i] = module
  end
end
function nn.Sequential:forward(x)
  for _, module in ipairs(self) do x = module(x) end
  return x
end

-- Losses as modules: criterion(prediction, target).
for name, fn in pairs({MSELoss = "mse_loss", CrossEntropyLoss = "cross_entropy", NLLLoss = "nll_loss",
                       MultiMarginLoss = "multi_margin_loss"}) do
  local class = Module:extend(name)
  class.init = function(self, opts)
    opts = check_options(name, opts, {reduction = true}, "{reduction = \"sum\"}")
    local reduction = opts.reduction or "mean"
    if reduction ~= "mean" and reduction ~= "sum" then
      fail(name .. ": reduction must be \"mean\" or \"sum\", got " .. describe(reduction))
    end
    self.reduction = reduction
  end
  class.forward = function(self, input, target) return torch[fn](input, target, {reduction = self.reduction}) end
  class.extra_repr = function(self) return "reduction=" .. self.reduction end
  nn[name] = class
end

-- ============================================================================================
-- nn.functional (F): the torch functions, under PyTorch's names

nn.functional = {}
for _, name in ipairs({"relu", "tanh", "sigmoid", "softmax", "log_softmax", "linear", "conv2d", "max_pool2d",
                       "flatten", "mse_loss", "cross_entropy", "nll_loss", "multi_margin_loss"}) do
  nn.functional[name] = torch[name]
end

return nn
