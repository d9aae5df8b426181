-- optim.lua: optimizers (PyTorch's torch.optim) written in Lua over in-place ops. Embedded in
-- tapedeck and loaded as the global `optim` (also require "optim").
--
--   local opt = optim.Adam(model:parameters(), {lr = 1e-4})   -- or optim.Adam(model, ...)
--   opt:zero_grad(); loss:backward(); opt:step()
--
-- The update rules are PyTorch's, step for step, so the numbers match a PyTorch run of the same
-- problem. Updates run under torch.no_grad (they are recorded on the tape, outside any graph).
local optim = {}

-- Errors name the function the user called and end with the user's file:line, as the bindings':
-- "SGD: lr must be a number >= 0, got -1 (train.lua:9)".
local errors = require "tapedeck.errors"
local fail, describe = errors.fail, errors.describe

local Optimizer = {}
Optimizer.__index = Optimizer

-- What each option must be: a check returning true when the value is fine, and its description.
local function number_at_least(low)
  return function(v) return type(v) == "number" and v >= low end, "a number >= " .. low
end
local OPTION_RULES = {
  lr = {number_at_least(0)},
  momentum = {number_at_least(0)},
  dampening = {function(v) return type(v) == "number" and v == v end, "a number"},
  weight_decay = {number_at_least(0)},
  nesterov = {function(v) return type(v) == "boolean" end, "true or false"},
  eps = {number_at_least(0)},
  betas = {function(v)
    return type(v) == "table" and type(v[1]) == "number" and type(v[2]) == "number" and v[1] >= 0 and v[1] < 1 and
           v[2] >= 0 and v[2] < 1
  end, "two numbers in [0, 1), as {0.9, 0.999}"},
}

-- params: a list of tensors, or a module (its parameters()).
local function new_optimizer(class, name, params, opts, defaults)
  if nn and nn.is_module(params) then params = params:parameters() end
  if type(params) ~= "table" or #params == 0 then
    fail(name .. ": expects a list of parameters (model:parameters()), got " ..
         (type(params) == "table" and "an empty list" or describe(params)))
  end
  for i, p in ipairs(params) do
    if not torch.is_tensor(p) then fail(name .. ": parameter " .. i .. " is " .. describe(p) .. ", not a tensor") end
  end
  local self = setmetatable({params = params, state = {}, name = name}, class)
  if opts ~= nil and type(opts) ~= "table" then
    fail(name .. ": options must be a table like {lr = 0.01}, got " .. describe(opts))
  end
  opts = opts or {}
  for key in pairs(opts) do
    if defaults[key] == nil then fail(name .. ": unknown option '" .. tostring(key) .. "'") end
  end
  for key, default in pairs(defaults) do
    local value = opts[key]
    if value == nil then value = default end
    self[key] = value
  end
  if type(self.lr) ~= "number" then fail(name .. ": lr must be a number >= 0, got " .. describe(opts.lr)) end
  for key in pairs(defaults) do
    local rule = OPTION_RULES[key]
    if rule and not rule[1](self[key]) then fail(name .. ": " .. key .. " must be " .. rule[2] .. ", got " .. describe(self[key])) end
  end
  return self
end

-- self must be an optimizer: opt:step(), not opt.step().
local function check_self(self, method)
  if type(self) ~= "table" or getmetatable(self) == nil or rawget(self, "params") == nil then
    fail(method .. ": call it on an optimizer, as opt:" .. method .. "(), got " .. describe(self))
  end
end

function Optimizer:zero_grad()
  check_self(self, "zero_grad")
  for _, p in ipairs(self.params) do p.grad = nil end
end

-- ============================================================================================
-- SGD: d = g + weight_decay * p; with momentum, buf = momentum * buf + (1 - dampening) * d
-- (buf = d the first time) and d = buf (or g + momentum * buf for nesterov); p = p - lr * d.

optim.SGD = {}
optim.SGD.__index = optim.SGD

function optim.SGD.new(params, opts)
  return new_optimizer(optim.SGD, "SGD", params, opts,
                       {lr = false, momentum = 0, dampening = 0, weight_decay = 0, nesterov = false})
end
setmetatable(optim.SGD, {__index = Optimizer, __call = function(_, ...) return optim.SGD.new(...) end})

function optim.SGD:step()
  check_self(self, "step")
  torch.no_grad(function()
    for i, p in ipairs(self.params) do
      local g = p.grad
      if g then
        if self.weight_decay ~= 0 then g = g + p * self.weight_decay end
        if self.momentum ~= 0 then
          local buf = self.state[i]
          if not buf then
            buf = g:clone()
            self.state[i] = buf
          else
            buf:mul_(self.momentum):add_(g, 1 - self.dampening)
          end
          g = self.nesterov and (g + buf * self.momentum) or buf
        end
        p:add_(g, -self.lr)
      end
    end
  end)
end

-- ============================================================================================
-- Adam: m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;
-- p = p - lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps).

optim.Adam = {}
optim.Adam.__index = optim.Adam
setmetatable(optim.Adam, {__index = Optimizer, __call = function(_, ...) return optim.Adam.new(...) end})

function optim.Adam.new(params, opts)
  local self = new_optimizer(optim.Adam, "Adam", params, opts, {lr = 1e-3, betas = {0.9, 0.999}, eps = 1e-8,
                                                                weight_decay = 0})
  self.step_count = 0
  return self
end

function optim.Adam:step()
  check_self(self, "step")
  self.step_count = self.step_count + 1
  local beta1, beta2 = self.betas[1], self.betas[2]
  local bias_correction1 = 1 - beta1 ^ self.step_count
  local bias_correction2 = 1 - beta2 ^ self.step_count
  local step_size = self.lr / bias_correction1
  torch.no_grad(function()
    for i, p in ipairs(self.params) do
      local g = p.grad
      if g then
        if self.weight_decay ~= 0 then g = g + p * self.weight_decay end
        local s = self.state[i]
        if not s then
          s = {m = torch.zeros(p.shape, {dtype = p.dtype}), v = torch.zeros(p.shape, {dtype = p.dtype})}
          self.state[i] = s
        end
        s.m:mul_(beta1):add_(g, 1 - beta1)
        s.v:mul_(beta2):add_(g * g, 1 - beta2)
        local denom = s.v:sqrt() / math.sqrt(bias_correction2) + self.eps
        p:add_(s.m / denom, -step_size)
      end
    end
  end)
end

return optim
