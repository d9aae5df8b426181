-- freeze and the Lua values its function reads that are not its arguments: upvalues, globals,
-- fields of the tables it reaches, and functions whose result varies from call to call. None may
-- be replayed stale: a frozen function equals its eager twin call for call, or says why, by name.
local check = dofile((arg[0]:match("^(.*[/\\])") or "") .. "check.lua")

-- The parameters' values, flattened, for comparing two models.
local function values_of(params)
  local out = {}
  for _, p in ipairs(params) do for _, v in ipairs(check.flatten(p)) do out[#out + 1] = v end end
  return out
end

-- ------------------------------------------------------------------------------------------------
-- 1. micrograd's demo: an MLP trained with a max-margin loss and a learning rate that decays every
-- step (1.0 - 0.9 * k / 100), a Lua number in an upvalue of the step. Frozen, every call must
-- equal the eager twin; the lr guard re-records, and after 3 changes in a row the step runs eagerly.
local function make_moons(n)
  torch.manual_seed(1)
  local t = torch.rand(n, 1) * math.pi
  local upper = torch.cat({t:cos(), t:sin()}, 2)
  local lower = torch.cat({1 - t:cos(), 0.5 - t:sin()}, 2)
  local X = torch.cat({upper, lower}, 1) + torch.randn(2 * n, 2) * 0.1
  local y = torch.cat({torch.ones(n, 1), -torch.ones(n, 1)}, 1)
  return X, y
end
local X, Y = make_moons(50)

local function make_mlp()
  torch.manual_seed(1337)
  return nn.Sequential(nn.Linear(2, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 1))
end

-- The step of micrograd's demo over `model`; `lr()` gives the learning rate it reads.
local function micrograd_step(model, lr)
  return function(x, y)
    local scores = model(x)
    local data_loss = (1 - y * scores):relu():mean()
    local reg_loss = 0
    for _, p in ipairs(model:parameters()) do reg_loss = reg_loss + (p * p):sum() end
    local loss = data_loss + 1e-4 * reg_loss
    model:zero_grad()
    loss:backward()
    torch.no_grad(function()
      for _, p in ipairs(model:parameters()) do p:sub_(lr() * p.grad) end
    end)
    return loss
  end
end

local eager_model, frozen_model = make_mlp(), make_mlp()
local learning_rate = 1.0
local eager_step = micrograd_step(eager_model, function() return learning_rate end)
local frozen_fn = micrograd_step(frozen_model, function() return learning_rate end)
local step = torch.freeze{frozen_fn, name = "step", verbose = false}
for k = 0, 99 do
  learning_rate = 1.0 - 0.9 * k / 100
  local le = eager_step(X, Y)
  local lf = step(X, Y)
  check.close(lf, le, 0, "micrograd loss at step " .. k)
end
check.close(values_of(frozen_model:parameters()), values_of(eager_model:parameters()), 0, "micrograd parameters")
check.equal(step.eager, true, "an lr that changes every call: the step runs eagerly")
local reason = step:stats().last_reason
assert(reason:find("learning_rate (an upvalue, ", 1, true) and reason:find("test_freeze_lua_values.lua:53)", 1, true) and
       reason:find("was 0.982 when recorded, now 0.973", 1, true), reason)
check.equal(step:stats().records, 3, "recorded at calls 1-3, eager from call 4")

-- The fix the message names: the learning rate as a tensor argument. One plan serves every value.
eager_model, frozen_model = make_mlp(), make_mlp()
local lr_tensor = torch.tensor(1.0)
eager_step = micrograd_step(eager_model, function() return lr_tensor end)
local with_tensor = function(x, y, lr)
  return micrograd_step(frozen_model, function() return lr end)(x, y)
end
step = torch.freeze{with_tensor, name = "step"}
for k = 0, 99 do
  lr_tensor = torch.tensor(1.0 - 0.9 * k / 100)
  local le = eager_step(X, Y)
  local lf = step(X, Y, lr_tensor)
  check.close(lf, le, 1e-5, "micrograd (lr a tensor argument) loss at step " .. k)
end
check.close(values_of(frozen_model:parameters()), values_of(eager_model:parameters()), 1e-4, "parameters, lr a tensor")
check.equal(step:stats().records, 1, "lr a tensor argument: recorded once")
check.equal(step:stats().replays, 99, "and replayed")

-- ------------------------------------------------------------------------------------------------
-- 2. "Learning PyTorch with Examples", DynamicNet: forward draws its loop count with the language's
-- random. Frozen as written it is refused, naming math.random, its line and the tensor way;
-- with the count drawn outside and passed as an argument, each count is a plan of its own.
local DynamicNet = nn.Module:extend("DynamicNet")
function DynamicNet:init()
  self.a = nn.Parameter(torch.randn({}))
  self.b = nn.Parameter(torch.randn({}))
  self.c = nn.Parameter(torch.randn({}))
  self.d = nn.Parameter(torch.randn({}))
  self.e = nn.Parameter(torch.randn({}))
end
function DynamicNet:forward(x, count)
  local y = self.a + self.b * x + self.c * x ^ 2 + self.d * x ^ 3
  count = count or math.random(4, 6)
  for exp = 4, count - 1 do y = y + self.e * x ^ exp end
  return y
end
local random_line = 100

local x = torch.linspace(-math.pi, math.pi, 2000)
local y = torch.sin(x)
local function train_step(model, optimizer)
  return function(x, y, count)
    local loss = (model(x, count) - y):pow(2):sum()
    optimizer:zero_grad()
    loss:backward()
    optimizer:step()
    return loss
  end
end

torch.manual_seed(0)
local net = DynamicNet()
local opt = torch.optim.SGD(net:parameters(), {lr = 1e-8, momentum = 0.9})
local ok, message = pcall(torch.freeze, train_step(net, opt), x, y)
assert(not ok and message:find("calls math.random at ", 1, true) and
       message:find("test_freeze_lua_values.lua:" .. random_line, 1, true) and message:find("torch.randint", 1, true) and
       message:find("pass it as an argument", 1, true), message)

-- The count passed as an argument: frozen equals eager on the same seeds, a plan per count.
torch.manual_seed(0)
local eager_net = DynamicNet()
local eager_opt = torch.optim.SGD(eager_net:parameters(), {lr = 1e-8, momentum = 0.9})
torch.manual_seed(0)
net = DynamicNet()
opt = torch.optim.SGD(net:parameters(), {lr = 1e-8, momentum = 0.9})
local dynamic_eager = train_step(eager_net, eager_opt)
local dynamic = torch.freeze{train_step(net, opt), name = "dynamic", verbose = false}
local counts = {}
math.randomseed(42)
for t = 1, 60 do
  local count = math.random(4, 6)
  counts[count] = true
  local le = dynamic_eager(x, y, count)
  local lf = dynamic(x, y, count)
  check.close(lf, le, 1e-5, "DynamicNet loss at step " .. t)
end
check.close(values_of(net:parameters()), values_of(eager_net:parameters()), 1e-5, "DynamicNet parameters")
local distinct = 0
for _ in pairs(counts) do distinct = distinct + 1 end
check.equal(dynamic:stats().records, distinct, "one plan per loop count")
check.equal(dynamic.eager, false, "the counts are cached plans, never given up on")

-- ------------------------------------------------------------------------------------------------
-- 3. A global Lua number read inside the frozen function (a temperature): a new value re-records,
-- and the plans of values seen before are cached.
temperature = 1.0
local logits = torch.randn(4, 5)
local function sample_probs(z) return (z / temperature):softmax(2) end
local sample = torch.freeze{sample_probs, logits, name = "sample", verbose = false}
for call, t in ipairs({1.0, 1.0, 2.0, 2.0, 0.5, 1.0, 2.0}) do
  temperature = t
  check.close(sample(logits), sample_probs(logits), 0, "temperature " .. t .. " at call " .. call)
end
check.equal(sample:stats().records, 3, "one plan per temperature")
local listed = sample:stats().lua_values
assert(#listed == 1 and listed[1]:find("^temperature %(a global, .*test_freeze_lua_values.lua:155%)$"), listed[1])
reason = sample:stats().last_reason
assert(reason:find("temperature (a global, ", 1, true) and reason:find("test_freeze_lua_values.lua:155)", 1, true) and
       reason:find("was 2.0 when recorded, now 0.5", 1, true), reason)
-- Strict mode refuses with the same words.
local strict = torch.freeze{sample_probs, logits, strict = true}
temperature = 3.0
ok, message = pcall(strict, logits)
assert(not ok and message:find("guard failed: temperature (a global, ", 1, true) and
       message:find("was 2.0 when recorded, now 3.0", 1, true), message)

-- ------------------------------------------------------------------------------------------------
-- Fields of the tables the function reaches (an upvalue's, a module's, an argument's), strings,
-- booleans and a nil flag are guarded too.
local cfg = {scale = 2, mode = "sum"}
local function reduce(z)
  local s = z * cfg.scale
  if cfg.mode == "sum" then return s:sum() end
  return s:mean()
end
local r = torch.freeze{reduce, logits, name = "reduce", verbose = false}
for call, change in ipairs({{}, {scale = 3}, {mode = "mean"}, {}, {mode = "sum"}}) do
  for k, v in pairs(change) do cfg[k] = v end
  check.close(r(logits), reduce(logits), 1e-6, "cfg field, call " .. call)
end
check.equal(r:stats().records, 3, "scale 2 sum, 3 sum, 3 mean recorded; 3 sum again replayed")

settings = {gain = 2}   -- a global table's field
local gained = torch.freeze{function(z) return z * settings.gain end, logits, verbose = false}
settings.gain = 5
check.close(gained(logits), logits * 5, 0, "a global table's field")
check.equal(gained:stats().records, 2)

package.preload.test_config = function() return {gain = 2} end
local required = require "test_config"   -- a module the user requires is the user's table
local by_module = torch.freeze{function(z) return z * required.gain end, logits, verbose = false}
required.gain = 6
check.close(by_module(logits), logits * 6, 0, "a required module's field")
-- The libraries' tables (torch, math, nn, F) are not the user's values: nothing to compare per call.
local plain = torch.freeze(function(z) return torch.relu(z) * math.pi + F.relu(z) end, logits)
check.equal(#plain:stats().lua_values, 0, "torch, math and F are not guarded")

local Scaled = nn.Module:extend("Scaled")
function Scaled:init() self.factor = 2; self.inner = nn.Linear(5, 1) end
function Scaled:forward(z) return self.inner(z) * self.factor end
local scaled = Scaled()
local sm = torch.freeze{function(z) return scaled(z) end, logits, verbose = false}
scaled.factor = 5
check.close(sm(logits), scaled(logits), 1e-6, "a module's field (self.factor)")

-- The fields of every module the call runs, however deep in the model (a module's self, seen by
-- the call hook): a sub-module's training flag (model[2]:eval() alone), a LeakyReLU's slope or a
-- Dropout's p changed after freezing re-record; the replay equals eager.
torch.manual_seed(3)
local net = nn.Sequential(nn.Linear(5, 4), nn.Dropout(0.5), nn.LeakyReLU(0.1))
local frozen_net = torch.freeze{function(z) return net(z) end, logits, verbose = false}
net[2]:eval()
check.close(frozen_net(logits), net(logits), 1e-6, "model[2]:eval() alone (a sub-module's training flag)")
net[3].negative_slope = 0.5
check.close(frozen_net(logits), net(logits), 1e-6, "model[3].negative_slope changed after freezing")
check.equal(frozen_net:stats().records, 3, "each change re-recorded")
local said = table.concat(frozen_net:stats().lua_values, "; ")
check.equal(said:find("LeakyReLU.negative_slope", 1, true) ~= nil, true, "the slope is listed: " .. said)

local function by_options(z, options) return z * options.gain end
local opts = {gain = 2}
local bo = torch.freeze{by_options, logits, opts, verbose = false}
opts.gain = 4
check.close(bo(logits, opts), logits * 4, 0, "a table argument's field")

local debug_shift   -- nil: a flag that may be set later
local flagged = torch.freeze{function(z) if debug_shift then return z + 1 end return z end, logits, verbose = false}
debug_shift = true
check.close(flagged(logits), logits + 1, 0, "a nil upvalue that became true")

local nan_scale = 0 / 0
local nan_fn = torch.freeze{function(z) return z * nan_scale end, logits}
nan_fn(logits); nan_fn(logits)
check.equal(nan_fn:stats().records, 1, "NaN equals NaN for a guard: no re-record")

-- A value the function changes itself (a counter) is not guarded: it would fail every call. The
-- freeze says so (stderr); the tensors still equal eager's.
local calls = 0
local counted = torch.freeze{function(z) calls = calls + 1; return z * 2 end, logits, verbose = false}
counted(logits); counted(logits)
check.equal(counted:stats().records, 1, "a counter the function increments is not a guard")

-- A closure made inside the frozen function reads its locals (fresh each call) and its upvalues
-- (guarded through it): a local the closure changes is neither a guard nor a note.
local shift = 1
local nested = torch.freeze{function(z)
  local seen = 0
  local out
  torch.no_grad(function() seen = seen + 1; out = z + shift end)
  return out
end, logits, verbose = false}
check.close(nested(logits), logits + 1, 0)
shift = 2
check.close(nested(logits), logits + 2, 0, "an upvalue read only inside a nested closure")
check.equal(nested:stats().records, 2)

-- Functions whose result varies from call to call are refused, naming the call and line.
local clock_line = debug.getinfo(1, "l").currentline + 1
ok, message = pcall(torch.freeze, function(z) return z * os.clock() end, logits)
assert(not ok and message:find("calls os.clock at ", 1, true) and
       message:find("test_freeze_lua_values.lua:" .. clock_line .. ",", 1, true), message)
local random = math.random   -- a local alias is seen too: the hook sees the call, not the name
ok, message = pcall(torch.freeze, function(z) return z * random() end, logits)
assert(not ok and message:find("calls math.random at ", 1, true), message)

-- Recording puts everything back: the globals, the hook.
assert(getmetatable(_ENV) == nil and rawget(_ENV, "temperature") == 3.0, "the globals are the globals again")
assert(debug.gethook() == nil, "no hook left behind")

print("test_freeze_lua_values: ok")
