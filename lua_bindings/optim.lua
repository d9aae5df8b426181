-- optim.lua: optimizers and learning-rate schedulers (PyTorch's torch.optim) written in Lua over
-- tensor ops. Embedded in tapedeck and loaded as the global `optim` (also require "optim").
--
--   local opt = optim.Adam(model:parameters(), {lr = 1e-4})   -- or optim.Adam(model, ...)
--   opt:zero_grad(); loss:backward(); opt:step()
--
-- The update rules are PyTorch's single-tensor rules, step for step, so the numbers match a PyTorch
-- run of the same problem. Updates run under torch.no_grad (recorded on the tape, outside any graph).
--
-- Freezing: every number an update reads that can change between steps lives in a tensor — the
-- step counts (0-d float64), each group's lr (0-d float64, filled in place when `group.lr` is
-- assigned), the moments — and bias corrections are tensor ops on the step tensor. So a frozen
-- training step that calls opt:step() replays exactly as eager. Every other option (betas, momentum,
-- ...) is a Lua number baked into a plan; changing one bumps the optimizer's options version, a 0-d
-- tensor that step() reads with :item(), which a frozen plan guards (it re-records).
--
-- [SECTION] options and errors      [SECTION] optimizer: groups, state, step
-- [SECTION] state_dict              [SECTION] the five update rules
-- [SECTION] lr_scheduler
local optim = {}

-- Errors name the function the user called and end with the user's file:line, as the bindings':
-- "SGD: lr must be a number >= 0, got -1 (train.lua:9)".
local errors = require "tapedeck.errors"
local fail, describe = errors.fail, errors.describe

-- ============================================================================================
-- [SECTION] options and errors

-- What each option must be: a check returning true when the value is fine, and its description.
local function number_at_least(low)
  return {function(v) return type(v) == "number" and v >= low end, "a number >= " .. low}
end
local boolean = {function(v) return type(v) == "boolean" end, "true or false"}
local OPTION_RULES = {
  lr = number_at_least(0),
  momentum = number_at_least(0),
  dampening = {function(v) return type(v) == "number" and v == v end, "a number"},
  weight_decay = number_at_least(0),
  nesterov = boolean, maximize = boolean, amsgrad = boolean, centered = boolean,
  eps = number_at_least(0),
  alpha = number_at_least(0),
  lr_decay = number_at_least(0),
  initial_accumulator_value = number_at_least(0),
  betas = {function(v)
    return type(v) == "table" and type(v[1]) == "number" and type(v[2]) == "number" and v[1] >= 0 and v[1] < 1 and
           v[2] >= 0 and v[2] < 1
  end, "two numbers in [0, 1), as {0.9, 0.999}"},
}

-- Edit distance, for "did you mean" on a misspelled option.
local function edit_distance(a, b)
  local previous = {}
  for j = 0, #b do previous[j] = j end
  for i = 1, #a do
    local current = {[0] = i}
    for j = 1, #b do
      local cost = a:sub(i, i) == b:sub(j, j) and 0 or 1
      current[j] = math.min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost)
    end
    previous = current
  end
  return previous[#b]
end

-- " (did you mean 'betas'?)" when a known name is close to `name`, else "".
local function did_you_mean(name, known)
  local best, best_distance = nil, 3
  for candidate in pairs(known) do
    local d = edit_distance(tostring(name), candidate)
    if d < best_distance or (d == best_distance and best and candidate < best) then best, best_distance = candidate, d end
  end
  if not best then
    local names = {}
    for candidate in pairs(known) do names[#names + 1] = candidate end
    table.sort(names)
    return " (options: " .. table.concat(names, ", ") .. ")"
  end
  return " (did you mean '" .. best .. "'?)"
end

-- The keys of `known` (a table key -> anything), sorted, as one space-separated string.
local function key_list(known)
  local keys = {}
  for key in pairs(known) do keys[#keys + 1] = key end
  table.sort(keys)
  return table.concat(keys, " ")
end

-- Fails with the options check's message (torch._options, the C bindings' check) when `key` is not
-- among `known`'s keys; `called` is the name the user called ("optim.SGD").
local function check_known_key(called, known, key)
  if known[key] ~= nil then return end
  if type(key) ~= "string" then fail(called .. ": unknown option " .. describe(key) .. did_you_mean(key, known)) end
  torch._options.check(called, {[key] = true}, key_list(known))
end

-- Fails unless `value` is a valid `key` option of optimizer `name`.
local function check_option(name, defaults, key, value)
  check_known_key("optim." .. name, defaults, key)
  local rule = OPTION_RULES[key]
  if rule and not rule[1](value) then fail(name .. ": " .. key .. " must be " .. rule[2] .. ", got " .. describe(value)) end
end

-- ============================================================================================
-- [SECTION] optimizer: groups, state, step

local Optimizer = {}
Optimizer.__index = Optimizer
optim.Optimizer = Optimizer

local function is_optimizer(v) return type(v) == "table" and rawget(v, "_groups") ~= nil end

-- self must be an optimizer: opt:step(), not opt.step().
local function check_self(self, method)
  if not is_optimizer(self) then
    fail(method .. ": call it on an optimizer, as opt:" .. method .. "(), got " .. describe(self))
  end
end

local function scalar_tensor(value) return torch.tensor(value, {dtype = "float64"}) end

-- Tells frozen plans that an option other than lr (or the parameter set) changed: step() reads the
-- version with :item(), a value a frozen plan guards, so the next frozen call re-records.
local function bump_options_version(opt) opt._options_version:add_(1) end

-- Sets option `key` of the group record (validated); lr goes into the group's lr tensor in place.
local function set_group_option(opt, record, key, value)
  if key == "params" then fail(opt.name .. ": a group's params cannot be reassigned; use add_param_group") end
  if key == "initial_lr" then   -- the schedulers' base lr, as PyTorch keeps it in the group
    if type(value) ~= "number" then fail(opt.name .. ": initial_lr must be a number, got " .. describe(value)) end
    record.values.initial_lr = value
    return
  end
  check_option(opt.name, opt.defaults, key, value)
  if key == "betas" then value = {value[1], value[2]} end
  record.values[key] = value
  if key == "lr" then
    record.lr_tensor:fill_(value)
  else
    opt._class.check_options(opt.name, record.values)
    for _, p in ipairs(record.values.params) do opt._class.init_state(opt.state[p], p, record.values) end
    bump_options_version(opt)
  end
end

-- A param group as the user sees it (opt.param_groups[i]): reads and writes like PyTorch's dict.
local function group_proxy(opt, record)
  return setmetatable({}, {
    __index = record.values,
    __newindex = function(_, key, value) set_group_option(opt, record, key, value) end,
    __pairs = function() return next, record.values, nil end,
  })
end

-- The list of parameter tensors in `params` (a list or a module), checked. `group` names the group
-- in messages ("param group 2"), nil for a plain list.
local function parameter_list(name, params, group)
  local of = group and (" of " .. group) or ""
  if nn and nn.is_module(params) then params = params:parameters() end
  if torch.is_tensor(params) then params = {params} end
  if type(params) ~= "table" or #params == 0 then
    fail(name .. ": expects a list of parameters (model:parameters())" .. (group and (" in " .. group) or "") .. ", got " ..
         (type(params) == "table" and "an empty list" or describe(params)))
  end
  for i, p in ipairs(params) do
    if not torch.is_tensor(p) then fail(name .. ": parameter " .. i .. of .. " is " .. describe(p) .. ", not a tensor") end
    if not p.is_leaf then
      fail(name .. ": parameter " .. i .. of .. " is not a leaf (it was computed from other tensors); " ..
           "optimize the tensors it was made from, or detach() it")
    end
  end
  return params
end

-- Adds a group {params = ..., option = ...}; options not given fall back to the defaults.
local function add_group(opt, group, group_label)
  local what = group_label or "params"
  if type(group) ~= "table" or group.params == nil then
    fail(opt.name .. ": " .. what .. " has no params (a group is {params = {...}, lr = ...}), got " .. describe(group))
  end
  local values = {params = {}}
  for i, p in ipairs(parameter_list(opt.name, group.params, group_label)) do values.params[i] = p end
  for key, value in pairs(group) do
    if key ~= "params" then
      if key == "initial_lr" then values.initial_lr = value else check_option(opt.name, opt.defaults, key, value) end
    end
  end
  for key, default in pairs(opt.defaults) do
    local value = group[key]
    if value == nil then value = default end
    if type(value) == "table" then value = {value[1], value[2]} end
    values[key] = value
  end
  if values.lr == false then fail(opt.name .. ": lr must be a number >= 0, got nil (it has no default: " .. opt.name .. "(params, {lr = 0.1}))") end
  check_option(opt.name, opt.defaults, "lr", values.lr)
  opt._class.check_options(opt.name, values)
  for i, p in ipairs(values.params) do
    for g, other in ipairs(opt._groups) do
      for _, q in ipairs(other.values.params) do
        if rawequal(p, q) then
          fail(opt.name .. ": parameter " .. i .. (group_label and (" of " .. group_label) or "") .. " is already in param group " .. g ..
               " (a parameter may appear in one group only)")
        end
      end
    end
    for j = 1, i - 1 do
      if rawequal(p, values.params[j]) then fail(opt.name .. ": parameters " .. j .. " and " .. i .. (group_label and (" of " .. group_label) or "") .. " are the same tensor") end
    end
  end
  local record = {values = values, lr_tensor = scalar_tensor(values.lr)}
  opt._groups[#opt._groups + 1] = record
  opt.param_groups[#opt.param_groups + 1] = group_proxy(opt, record)
  for _, p in ipairs(values.params) do
    opt.state[p] = {}
    opt._class.init_state(opt.state[p], p, values)
  end
  bump_options_version(opt)
end

-- A list of group tables {{params = ...}, ...} rather than a list of tensors?
local function is_group_list(params)
  return type(params) == "table" and not (nn and nn.is_module(params)) and type(params[1]) == "table" and
         not torch.is_tensor(params[1])
end

-- The optimizer of `class` over `params` (a list of tensors, a module, or a list of group tables).
local function new_optimizer(class, params, opts)
  local name = class.name
  if opts ~= nil and type(opts) ~= "table" then
    fail(name .. ": options must be a table like {lr = 0.01}, got " .. describe(opts))
  end
  local defaults = {}
  for key, value in pairs(class.defaults) do defaults[key] = value end
  for key, value in pairs(opts or {}) do
    check_option(name, class.defaults, key, value)
    defaults[key] = value
  end
  local self = setmetatable({name = name, defaults = defaults, _class = class, _groups = {}, param_groups = {},
                             state = {}, _options_version = scalar_tensor(0)}, class)
  if is_group_list(params) then
    for i, group in ipairs(params) do add_group(self, group, "param group " .. i) end
  else
    add_group(self, {params = parameter_list(name, params, nil)}, nil)
  end
  return self
end

-- Every parameter of every group, in order (the order PyTorch numbers them in a state_dict).
function Optimizer:_parameters()
  local list = {}
  for _, record in ipairs(self._groups) do
    for _, p in ipairs(record.values.params) do list[#list + 1] = p end
  end
  return list
end

-- opt.params: all parameters (kept for scripts written before param groups).
function Optimizer:__index(key)
  if key == "params" then return Optimizer._parameters(self) end
  return getmetatable(self)[key] or Optimizer[key]
end

function Optimizer:add_param_group(group)
  check_self(self, "add_param_group")
  add_group(self, group, "param group " .. (#self._groups + 1))
end

-- Drops every parameter's gradient (PyTorch 2's default, set_to_none = true). With
-- {set_to_none = false} the gradients are zeroed in place instead.
torch._options.declare("opt:zero_grad", "set_to_none")
function Optimizer:zero_grad(opts)
  check_self(self, "zero_grad")
  if opts ~= nil then torch._options.check("opt:zero_grad", opts, "set_to_none") end
  local to_none = not (type(opts) == "table" and opts.set_to_none == false)
  for _, p in ipairs(self:_parameters()) do
    if to_none then
      p.grad = nil
    elseif p.grad then
      torch.no_grad(function() p.grad:zero_() end)
    end
  end
end

-- The training log (viewer.log; docs/viewer.md, The Training window): each step() logs, per
-- parameter with a gradient, its gradient norm and update/weight ratio, and the latest backward
-- pass's loss, then counts the step. The viewer's C side reads the values directly (no ops, nothing
-- on the tape). Only while someone looks (the REPL, -i, the viewer, a breakpoint, or the script
-- logged with viewer.log), unless viewer.log_options{automatic = true/false} says otherwise. Returns what training_log_end needs,
-- or nil when not logging.
-- Names for parameters the debugger's walk left unnamed (it gives up in scripts whose locals hold
-- big tables before the model): the modules among the callers' locals and the globals, by their
-- variable and named_parameters() path ("model.lstm.weight_hh_l0"). names: parameter -> name.
local function name_from_modules(params, names)
  local wanted = {}
  for _, p in ipairs(params) do wanted[p] = true end
  local function offer(variable, value)
    if type(value) ~= "table" or not (nn and nn.is_module(value)) then return end
    local ok, list = pcall(value.named_parameters, value)
    if not ok then return end
    for _, pair in ipairs(list) do
      if wanted[pair[2]] and names[pair[2]] == nil then names[pair[2]] = variable .. "." .. pair[1] end
    end
  end
  for level = 3, 40 do   -- the callers of step(), innermost first
    if not debug.getinfo(level, "S") then break end
    for i = 1, 200 do
      local name, value = debug.getlocal(level, i)
      if not name then break end
      if name:sub(1, 1) ~= "(" then offer(name, value) end
    end
  end
  for name, value in pairs(_G) do if type(name) == "string" then offer(name, value) end end
end

local function training_log_begin(opt)
  local viewer = rawget(_G, "viewer")
  if type(viewer) ~= "table" or not viewer._logs_steps then return nil end
  if not viewer._logs_steps() then viewer._step_counted(); return nil end
  local params, grads = {}, {}
  for _, p in ipairs(opt:_parameters()) do
    local g = p.grad
    if g then params[#params + 1], grads[#grads + 1] = p, g end
  end
  local names = rawget(opt, "_log_names")   -- parameter -> name, looked up once per parameter
  if not names then names = {}; rawset(opt, "_log_names", names) end
  local missing = {}
  for _, p in ipairs(params) do if names[p] == nil then missing[#missing + 1] = p end end
  if #missing > 0 then
    local index = {}   -- an unnamed parameter is "param<i>", i its place in the optimizer's list
    for i, p in ipairs(opt:_parameters()) do index[p] = i end
    local unnamed = {}
    for i, name in ipairs(viewer._param_names(missing)) do
      if name:match("^param%d+$") then unnamed[#unnamed + 1] = missing[i] else names[missing[i]] = name end
    end
    if #unnamed > 0 then name_from_modules(unnamed, names) end
    for _, p in ipairs(unnamed) do names[p] = names[p] or ("param" .. index[p]) end
  end
  local list = {}
  for i, p in ipairs(params) do list[i] = names[p] end
  viewer._step_begin(params)
  return {viewer = viewer, params = params, grads = grads, names = list}
end

local function training_log_end(logged)
  logged.viewer._step_end(logged.params, logged.grads, logged.names)
end

-- One optimizer step: each parameter with a gradient is updated by the class's rule. closure, if
-- given, is called first with gradients enabled and its result returned (PyTorch's closure).
function Optimizer:step(closure)
  check_self(self, "step")
  local loss
  if closure ~= nil then
    if type(closure) ~= "function" then fail(self.name .. ": step's closure must be a function, got " .. describe(closure)) end
    loss = torch.enable_grad(closure)
  end
  self._options_version:item()   -- a frozen plan guards it: re-records when an option changed
  local logged = training_log_begin(self)
  local update = self._class.update
  torch.no_grad(function()
    for _, record in ipairs(self._groups) do
      local group = record.values
      for _, p in ipairs(group.params) do
        local g = p.grad
        if g then update(p, g, self.state[p], group, record.lr_tensor) end
      end
    end
  end)
  if logged then training_log_end(logged) end
  return loss
end

function Optimizer:__tostring()
  local lines = {self.name .. " ("}
  for i, record in ipairs(self._groups) do
    lines[#lines + 1] = "Parameter Group " .. (i - 1)
    local keys = {}
    for key in pairs(record.values) do if key ~= "params" then keys[#keys + 1] = key end end
    table.sort(keys)
    for _, key in ipairs(keys) do
      local value = record.values[key]
      if type(value) == "table" then value = "(" .. value[1] .. ", " .. value[2] .. ")" end
      lines[#lines + 1] = "    " .. key .. ": " .. tostring(value)
    end
  end
  lines[#lines + 1] = ")"
  return table.concat(lines, "\n")
end

-- Defines optimizer class `name`: its defaults, the state one parameter keeps, the option checks
-- across options, and the update rule update(p, grad, state, group, lr_tensor).
local function define_optimizer(name, spec)
  local class = {name = name, defaults = spec.defaults, init_state = spec.init_state, update = spec.update,
                 exported_state = spec.exported_state, check_options = spec.check_options or function() end}
  class.__index = Optimizer.__index
  class.__tostring = Optimizer.__tostring
  class.new = function(params, opts) return new_optimizer(class, params, opts) end
  setmetatable(class, {__index = Optimizer, __call = function(_, ...) return class.new(...) end})
  torch._options.declare("optim." .. name, key_list(spec.defaults))
  optim[name] = class
  return class
end

-- Puts a zero-filled tensor like p at state[key] unless one is there (fill: its initial value).
local function ensure_buffer(state, key, p, fill)
  if state[key] == nil then state[key] = torch.full(p.shape, fill or 0, {dtype = p.dtype, device = p.device}) end
end
local function ensure_step(state)
  if state.step == nil then state.step = scalar_tensor(0) end
end

-- ============================================================================================
-- [SECTION] state_dict
--
-- opt:state_dict() = {state = {[0] = {step = t, exp_avg = t, ...}, ...}, param_groups = {{lr = ...,
-- params = {0, 1, ...}}, ...}}: PyTorch's layout, parameters numbered from 0 across groups in order,
-- so the table saves to the same file PyTorch writes. Tensors are copies (PyTorch returns references).

-- The state PyTorch would show for one parameter (nil before its first step), as copies.
local function exported_state(class, state, group)
  local keys = class.exported_state(group, state)
  if not keys then return nil end
  local out = {}
  for _, key in ipairs(keys) do out[key] = state[key]:clone() end
  return out
end

function Optimizer:state_dict()
  check_self(self, "state_dict")
  local state, groups, index = {}, {}, 0
  for g, record in ipairs(self._groups) do
    local packed = {}
    for key, value in pairs(record.values) do
      packed[key] = type(value) == "table" and {value[1], value[2]} or value
    end
    packed.params = {}
    for i, p in ipairs(record.values.params) do
      packed.params[i] = index
      state[index] = exported_state(self._class, self.state[p], record.values)
      index = index + 1
    end
    groups[g] = packed
  end
  return {state = state, param_groups = groups}
end

-- Sorted keys of a table (messages and loading in a fixed order).
local function sorted_keys(t)
  local keys = {}
  for key in pairs(t) do keys[#keys + 1] = key end
  table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
  return keys
end

-- Fails unless `saved` (state[index] of a state_dict, or nil) fits parameter p's live state:
-- known keys only, tensors (or numbers) of the live tensors' shapes.
local function check_parameter_state(opt, p, index, saved)
  if saved == nil then return end
  local prefix = opt.name .. ": load_state_dict: state[" .. tostring(index) .. "]"
  if type(saved) ~= "table" then fail(prefix .. " is " .. describe(saved) .. ", not a table") end
  local live = opt.state[p]
  for _, key in ipairs(sorted_keys(saved)) do
    local value, target = saved[key], live[key]
    if target == nil then
      fail(prefix .. " has '" .. tostring(key) .. "', which " .. opt.name .. " with these options does not keep")
    end
    if type(value) ~= "number" and not torch.is_tensor(value) then
      fail(prefix .. "." .. key .. " is " .. describe(value) .. ", not a tensor")
    end
    if torch.is_tensor(value) and tostring(value.shape) ~= tostring(target.shape) then
      fail(prefix .. "." .. key .. " has shape " .. tostring(value.shape) .. ", the parameter's state has shape " ..
           tostring(target.shape))
    end
  end
end

-- Copies the (checked) saved entry into parameter p's live state; tensors keep their identity, so a
-- frozen plan holding them sees the loaded values. A parameter absent from the file starts afresh.
local function load_parameter_state(opt, p, saved, group)
  local live = opt.state[p]
  local fresh = {}
  opt._class.init_state(fresh, p, group)
  torch.no_grad(function()
    for key, tensor in pairs(fresh) do live[key]:copy_(tensor) end
    for key, value in pairs(saved or {}) do live[key]:copy_(value) end
  end)
  if saved and opt._class.after_load then opt._class.after_load(live, saved, group) end
end

-- Loads a state_dict made by state_dict() here or by PyTorch (same layout). Checks the group count,
-- each group's parameter count and each state tensor's shape; options in the saved groups replace
-- the current ones (as PyTorch), keys this optimizer does not know (foreach, capturable...) are skipped.
function Optimizer:load_state_dict(sd)
  check_self(self, "load_state_dict")
  local name = self.name .. ": load_state_dict"
  if type(sd) ~= "table" or type(sd.param_groups) ~= "table" or type(sd.state) ~= "table" then
    fail(name .. " expects {state = {...}, param_groups = {...}} (from opt:state_dict()), got " .. describe(sd))
  end
  if #sd.param_groups ~= #self._groups then
    fail(name .. ": the state dict has " .. #sd.param_groups .. " param groups, the optimizer has " .. #self._groups)
  end
  for g, saved in ipairs(sd.param_groups) do
    local have = #self._groups[g].values.params
    local got = type(saved) == "table" and type(saved.params) == "table" and #saved.params or -1
    if got ~= have then
      fail(name .. ": param group " .. g .. " of the state dict has " .. (got < 0 and "no params list" or got .. " parameters") ..
           ", the optimizer's has " .. have)
    end
  end
  for _, saved in ipairs(sd.param_groups) do   -- every option checked before any is set
    for key, value in pairs(saved) do
      if key ~= "params" and self.defaults[key] ~= nil then check_option(self.name, self.defaults, key, value) end
    end
  end
  for g, saved in ipairs(sd.param_groups) do
    local record = self._groups[g]
    for _, key in ipairs(sorted_keys(saved)) do
      if key ~= "params" and (self.defaults[key] ~= nil or key == "initial_lr") then
        set_group_option(self, record, key, saved[key])   -- (checked; may add state buffers, e.g. amsgrad)
      end
    end
  end
  for g, saved in ipairs(sd.param_groups) do
    for i, p in ipairs(self._groups[g].values.params) do check_parameter_state(self, p, saved.params[i], sd.state[saved.params[i]]) end
  end
  for g, saved in ipairs(sd.param_groups) do
    local record = self._groups[g]
    for i, p in ipairs(record.values.params) do load_parameter_state(self, p, sd.state[saved.params[i]], record.values) end
  end
  bump_options_version(self)
end

-- ============================================================================================
-- [SECTION] the five update rules
--
-- Each follows PyTorch's _single_tensor_<name> (torch/optim/<name>.py): the same ops in the same
-- order, with lr a 0-d float64 tensor (PyTorch: a Python float) and, for Adam and Adagrad, the
-- step-dependent factors computed as tensor ops on the 0-d float64 step tensor.

-- grad, negated when maximizing and with weight decay added: PyTorch's d_p.
local function decayed_gradient(p, g, group)
  if group.maximize then g = -g end
  if group.weight_decay ~= 0 then g = g + p * group.weight_decay end
  return g
end

-- SGD: d = g + wd p; with momentum, buf = momentum buf + (1 - dampening) d (buf = d at the first
-- step) and d = buf (nesterov: d + momentum buf); p = p - lr d.
-- The first step's "buf = d" is the general rule on a zero buffer with factor 1 instead of
-- 1 - dampening: state.buffer_factor is 1 until the first step, then 1 - dampening (no Lua branch
-- on the step, so a frozen step replays the same ops from any step on).
define_optimizer("SGD", {
  defaults = {lr = false, momentum = 0, dampening = 0, weight_decay = 0, nesterov = false, maximize = false},
  check_options = function(name, group)
    if group.nesterov and (group.momentum <= 0 or group.dampening ~= 0) then
      fail(name .. ": nesterov needs momentum > 0 and dampening = 0, got momentum " .. group.momentum ..
           ", dampening " .. group.dampening)
    end
  end,
  init_state = function(state, p, group)
    ensure_step(state)
    if group.momentum ~= 0 then
      ensure_buffer(state, "momentum_buffer", p)
      if state.buffer_factor == nil then state.buffer_factor = scalar_tensor(1) end
    end
  end,
  update = function(p, g, state, group, lr)
    local d = decayed_gradient(p, g, group)
    local momentum = group.momentum
    if momentum ~= 0 then
      local buf = state.momentum_buffer
      buf:mul_(momentum)
      if group.dampening ~= 0 then
        buf:add_(d * state.buffer_factor)
        state.buffer_factor:fill_(1 - group.dampening)
      else
        buf:add_(d)
      end
      d = group.nesterov and d + buf * momentum or buf
    end
    state.step:add_(1)
    p:sub_(d * lr)
  end,
  -- PyTorch 2 keeps momentum_buffer only (and only with momentum); the step count is ours.
  exported_state = function(group, state)
    if group.momentum == 0 or state.step:item() == 0 then return nil end
    return {"momentum_buffer"}
  end,
})
-- A loaded momentum_buffer counts as "after the first step".
optim.SGD.after_load = function(state, saved, group)
  if saved.momentum_buffer ~= nil and group.momentum ~= 0 then
    state.step:fill_(math.max(1, state.step:item()))
    state.buffer_factor:fill_(1 - group.dampening)
  end
end

-- Adam / AdamW: m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2 (amsgrad: vmax = max(vmax, v));
-- p = p - lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps). Adam adds wd p to g; AdamW
-- multiplies p by 1 - lr wd first (decoupled weight decay).
local function adam_init_state(state, p, group)
  ensure_step(state)
  ensure_buffer(state, "exp_avg", p)
  ensure_buffer(state, "exp_avg_sq", p)
  if group.amsgrad then ensure_buffer(state, "max_exp_avg_sq", p) end
end

local function adam_exported_state(group, state)
  if state.step:item() == 0 then return nil end
  local keys = {"step", "exp_avg", "exp_avg_sq"}
  if group.amsgrad then keys[4] = "max_exp_avg_sq" end
  return keys
end

local function adam_update(p, g, state, group, lr, decoupled)
  if group.maximize then g = -g end
  local step = state.step:add_(1)
  if decoupled then
    p:mul_(lr * (-group.weight_decay) + 1)
  elseif group.weight_decay ~= 0 then
    g = g + p * group.weight_decay
  end
  local beta1, beta2 = group.betas[1], group.betas[2]
  state.exp_avg:mul_(beta1):add_(g, 1 - beta1)
  state.exp_avg_sq:mul_(beta2):add_(g * g, 1 - beta2)
  local step_size = lr / (1 - beta1 ^ step)
  local bias_correction2_sqrt = (1 - beta2 ^ step):sqrt()
  local second = state.exp_avg_sq
  if group.amsgrad then
    state.max_exp_avg_sq:copy_(torch.maximum(state.max_exp_avg_sq, second))
    second = state.max_exp_avg_sq
  end
  local denom = second:sqrt() / bias_correction2_sqrt + group.eps
  p:sub_(state.exp_avg / denom * step_size)
end

define_optimizer("Adam", {
  defaults = {lr = 1e-3, betas = {0.9, 0.999}, eps = 1e-8, weight_decay = 0, amsgrad = false, maximize = false},
  init_state = adam_init_state,
  exported_state = adam_exported_state,
  update = function(p, g, state, group, lr) adam_update(p, g, state, group, lr, false) end,
})

define_optimizer("AdamW", {
  defaults = {lr = 1e-3, betas = {0.9, 0.999}, eps = 1e-8, weight_decay = 1e-2, amsgrad = false, maximize = false},
  init_state = adam_init_state,
  exported_state = adam_exported_state,
  update = function(p, g, state, group, lr) adam_update(p, g, state, group, lr, true) end,
})

-- RMSprop: g += wd p; s = alpha s + (1 - alpha) g^2; centered: a = alpha a + (1 - alpha) g and
-- avg = sqrt(s - a^2) + eps, else avg = sqrt(s) + eps; momentum: buf = momentum buf + g / avg and
-- p = p - lr buf, else p = p - lr g / avg.
define_optimizer("RMSprop", {
  defaults = {lr = 1e-2, alpha = 0.99, eps = 1e-8, weight_decay = 0, momentum = 0, centered = false, maximize = false},
  init_state = function(state, p, group)
    ensure_step(state)
    ensure_buffer(state, "square_avg", p)
    if group.momentum > 0 then ensure_buffer(state, "momentum_buffer", p) end
    if group.centered then ensure_buffer(state, "grad_avg", p) end
  end,
  exported_state = function(group, state)
    if state.step:item() == 0 then return nil end
    local keys = {"step", "square_avg"}
    if group.momentum > 0 then keys[#keys + 1] = "momentum_buffer" end
    if group.centered then keys[#keys + 1] = "grad_avg" end
    return keys
  end,
  update = function(p, g, state, group, lr)
    g = decayed_gradient(p, g, group)
    local alpha = group.alpha
    state.step:add_(1)
    state.square_avg:mul_(alpha):add_(g * g, 1 - alpha)
    local avg
    if group.centered then
      state.grad_avg:mul_(alpha):add_(g, 1 - alpha)
      avg = (state.square_avg - state.grad_avg * state.grad_avg):sqrt() + group.eps
    else
      avg = state.square_avg:sqrt() + group.eps
    end
    if group.momentum > 0 then
      state.momentum_buffer:mul_(group.momentum):add_(g / avg)
      p:sub_(state.momentum_buffer * lr)
    else
      p:sub_(g / avg * lr)
    end
  end,
})

-- Adagrad: g += wd p; clr = lr / (1 + (t - 1) lr_decay); sum += g^2; p = p - clr g / (sqrt(sum) + eps).
-- Its state exists from the start (as PyTorch's), sum filled with initial_accumulator_value.
define_optimizer("Adagrad", {
  defaults = {lr = 1e-2, lr_decay = 0, weight_decay = 0, initial_accumulator_value = 0, eps = 1e-10, maximize = false},
  init_state = function(state, p, group)
    ensure_step(state)
    ensure_buffer(state, "sum", p, group.initial_accumulator_value)
  end,
  exported_state = function() return {"step", "sum"} end,
  update = function(p, g, state, group, lr)
    local step = state.step:add_(1)
    g = decayed_gradient(p, g, group)
    local clr = lr
    if group.lr_decay ~= 0 then clr = lr / ((step - 1) * group.lr_decay + 1) end
    state.sum:add_(g * g)
    local std = state.sum:sqrt() + group.eps
    p:sub_(g / std * clr)
  end,
})

-- ============================================================================================
-- [SECTION] lr_scheduler
--
-- PyTorch's schedulers: made on an optimizer, they set every group's lr at construction (epoch 0)
-- and at each scheduler:step() (the next epoch), with PyTorch's recursive ("chainable") formulas.
-- Assigning group.lr fills the group's lr tensor in place, so frozen steps see the new lr.

local lr_scheduler = {}
optim.lr_scheduler = lr_scheduler

local Scheduler = {}
Scheduler.__index = Scheduler

local function check_scheduler(self, method)
  if type(self) ~= "table" or rawget(self, "optimizer") == nil then
    fail(method .. ": call it on a scheduler, as scheduler:" .. method .. "(), got " .. describe(self))
  end
end

-- The scheduler `class` on optimizer `opt`; fields are its own settings (checked by the caller).
local function new_scheduler(class, name, opt, fields)
  if not is_optimizer(opt) then fail(name .. ": expects an optimizer (optim.SGD(...)), got " .. describe(opt)) end
  local self = setmetatable(fields, class)
  self.name, self.optimizer = name, opt
  self.base_lrs = {}
  for i, group in ipairs(opt.param_groups) do
    if group.initial_lr == nil then group.initial_lr = group.lr end
    self.base_lrs[i] = group.initial_lr
  end
  self.last_epoch, self._step_count = -1, 0
  self:step()
  return self
end

-- Advances one epoch and writes the new lr into every group.
function Scheduler:step()
  check_scheduler(self, "step")
  self._step_count = self._step_count + 1
  self.last_epoch = self.last_epoch + 1
  local lrs = self:get_lr()
  for i, group in ipairs(self.optimizer.param_groups) do group.lr = lrs[i] end
  self._last_lr = lrs
end

-- The lr of each group that the last step() set (a list, one per group).
function Scheduler:get_last_lr()
  check_scheduler(self, "get_last_lr")
  local copy = {}
  for i, lr in ipairs(self._last_lr) do copy[i] = lr end
  return copy
end

-- A plain copy of a saved field (numbers, booleans, strings, and lists of them).
local function copy_field(value)
  if type(value) ~= "table" then return value end
  local copy = {}
  for k, v in pairs(value) do copy[k] = copy_field(v) end
  return copy
end

-- PyTorch's: every field of the scheduler but its optimizer, copied (LambdaLR's functions are not
-- state: they are left out, as PyTorch leaves out plain functions).
function Scheduler:state_dict()
  check_scheduler(self, "state_dict")
  local sd = {}
  for key, value in pairs(self) do
    if key ~= "optimizer" and key ~= "name" and key ~= "lr_lambdas" then sd[key] = copy_field(value) end
  end
  return sd
end

-- Restores what state_dict() gave (the optimizer's own lrs come from its load_state_dict, as in
-- PyTorch). Only the fields this scheduler has are taken; another scheduler's table is an error.
function Scheduler:load_state_dict(sd)
  check_scheduler(self, "load_state_dict")
  if type(sd) ~= "table" or type(sd.last_epoch) ~= "number" then
    fail(self.name .. ": load_state_dict expects a table from scheduler:state_dict(), got " .. describe(sd))
  end
  local unknown = {}
  for key in pairs(sd) do
    if rawget(self, key) == nil or key == "optimizer" or key == "name" or key == "lr_lambdas" then
      unknown[#unknown + 1] = "'" .. tostring(key) .. "'"
    end
  end
  if #unknown > 0 then
    table.sort(unknown)
    fail(self.name .. ": load_state_dict: " .. table.concat(unknown, ", ") .. (#unknown == 1 and " is not a field" or " are not fields") ..
         " of " .. self.name .. " (a state_dict of another scheduler?)")
  end
  for key, value in pairs(sd) do self[key] = copy_field(value) end
end

-- fn(current lr, base lr, group index) for each group: the list of new lrs.
local function each_group_lr(self, fn)
  local out = {}
  for i, group in ipairs(self.optimizer.param_groups) do out[i] = fn(group.lr, self.base_lrs[i], i) end
  return out
end

local function define_scheduler(name, make, option_keys)
  torch._options.declare("optim.lr_scheduler." .. name, option_keys or "")
  local class = setmetatable({}, {__index = Scheduler})
  class.__index = class
  lr_scheduler[name] = setmetatable(class, {__index = Scheduler, __call = function(_, ...) return make(class, ...) end})
  return class
end

-- Checks an options table of a scheduler: known keys only, with did-you-mean.
local function scheduler_options(name, opts, known)
  if opts == nil then return {} end
  if type(opts) ~= "table" then fail(name .. ": options must be a table like {gamma = 0.1}, got " .. describe(opts)) end
  for key in pairs(opts) do check_known_key("optim.lr_scheduler." .. name, known, key) end
  return opts
end

-- StepLR(opt, step_size, {gamma = 0.1}): lr times gamma every step_size epochs.
local StepLR = define_scheduler("StepLR", function(class, opt, step_size, opts)
  opts = scheduler_options("StepLR", opts, {gamma = true})
  if math.type(step_size) ~= "integer" or step_size < 1 then fail("StepLR: step_size must be an integer >= 1, got " .. describe(step_size)) end
  local gamma = opts.gamma == nil and 0.1 or opts.gamma
  if type(gamma) ~= "number" or gamma < 0 then fail("StepLR: gamma must be a number >= 0, got " .. describe(gamma)) end
  return new_scheduler(class, "StepLR", opt, {step_size = step_size, gamma = gamma})
end, "gamma")
function StepLR:get_lr()
  if self.last_epoch == 0 or self.last_epoch % self.step_size ~= 0 then return each_group_lr(self, function(lr) return lr end) end
  return each_group_lr(self, function(lr) return lr * self.gamma end)
end

-- CosineAnnealingLR(opt, T_max, {eta_min = 0}): lr follows half a cosine from the base lr to
-- eta_min over T_max epochs (and back up after, as PyTorch's).
local CosineAnnealingLR = define_scheduler("CosineAnnealingLR", function(class, opt, T_max, opts)
  opts = scheduler_options("CosineAnnealingLR", opts, {eta_min = true})
  if math.type(T_max) ~= "integer" or T_max < 1 then fail("CosineAnnealingLR: T_max must be an integer >= 1, got " .. describe(T_max)) end
  local eta_min = opts.eta_min or 0
  if type(eta_min) ~= "number" or eta_min < 0 then fail("CosineAnnealingLR: eta_min must be a number >= 0, got " .. describe(eta_min)) end
  return new_scheduler(class, "CosineAnnealingLR", opt, {T_max = T_max, eta_min = eta_min})
end, "eta_min")
function CosineAnnealingLR:get_lr()
  local epoch, T_max, eta_min, pi = self.last_epoch, self.T_max, self.eta_min, math.pi
  if epoch == 0 then return each_group_lr(self, function(lr) return lr end) end
  if (epoch - 1 - T_max) % (2 * T_max) == 0 then
    return each_group_lr(self, function(lr, base) return lr + (base - eta_min) * (1 - math.cos(pi / T_max)) / 2 end)
  end
  return each_group_lr(self, function(lr)
    return (1 + math.cos(pi * epoch / T_max)) / (1 + math.cos(pi * (epoch - 1) / T_max)) * (lr - eta_min) + eta_min
  end)
end

-- LambdaLR(opt, fn) or LambdaLR(opt, {fn1, fn2, ...}) (one per group): lr = base lr * fn(epoch),
-- epoch counted from 0 as PyTorch's.
local LambdaLR = define_scheduler("LambdaLR", function(class, opt, lr_lambda, opts)
  scheduler_options("LambdaLR", opts, {})
  local lambdas = {}
  if is_optimizer(opt) then
    for i = 1, #opt.param_groups do
      lambdas[i] = type(lr_lambda) == "table" and lr_lambda[i] or lr_lambda
      if type(lambdas[i]) ~= "function" then
        fail("LambdaLR: lr_lambda must be a function (or one per param group, " .. #opt.param_groups ..
             " here), got " .. describe(lr_lambda))
      end
    end
    if type(lr_lambda) == "table" and #lr_lambda ~= #opt.param_groups then
      fail("LambdaLR: expected " .. #opt.param_groups .. " lr_lambda functions (one per param group), got " .. #lr_lambda)
    end
  end
  return new_scheduler(class, "LambdaLR", opt, {lr_lambdas = lambdas})
end)
function LambdaLR:get_lr()
  return each_group_lr(self, function(_, base, i)
    local factor = self.lr_lambdas[i](self.last_epoch)
    if type(factor) ~= "number" then fail("LambdaLR: lr_lambda(" .. self.last_epoch .. ") returned " .. describe(factor) .. ", not a number") end
    return base * factor
  end)
end

-- Methods that take no arguments: PyTorch's keywords given to them are errors naming them, not
-- dropped (scheduler:step(epoch) is deprecated in PyTorch: here an error).
nn._helpers.takes_no_arguments(Optimizer, "opt:", {"state_dict"})
nn._helpers.takes_no_arguments(Scheduler, "scheduler:", {"step", "get_last_lr", "state_dict"})

return optim
