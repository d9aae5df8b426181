-- test_diff_steps.lua: dbg.diff on real models (docs/debugger.md, ":diff"). Identical training
-- steps report no structural change; a parameter's value change is its update, computed exactly
-- for a tensor of at most 32 elements; a step with another sequence length reports its shapes.
local here = arg[0]:match("^(.*[/\\])") or "./"
local check = dofile(here .. "check.lua")
local spiral = dofile(here .. "../../scripts/models/spiral_mlp_model.lua")
local M = dofile(here .. "../../scripts/models/char_lstm_model.lua")

local function find(list, field, value)
  for _, item in ipairs(list) do
    if item[field] == value then return item end
  end
end

-- Off at first: nothing is observed, nothing is kept.
check.equal(dbg.hooks().engine_observed, false, "diff off: no observer")
local t, why = dbg.diff()
check.equal(t, nil, "first dbg.diff")
assert(why:find("keeping step summaries from now on", 1, true), why)
check.equal(dbg.hooks().engine_observed, true, "diff on: its observer")
t, why = dbg.diff()
assert(why:find("no step recorded yet", 1, true), why)

-- The spiral MLP, the same 300 points at every step: three identical steps.
torch.manual_seed(0)
local x, labels = spiral.dataset(100, 3)
model = spiral.model(16, 3)
local optimizer = optim.Adam(model, {lr = 0.01})
local train_step = spiral.train_step(model, optimizer)
local bias = model[3].bias            -- 3 elements: its change is exact
local before = {}
for step = 1, 3 do
  before[step] = bias:detach():clone()
  train_step(x, labels)
  t, why = dbg.diff()
  if step == 1 then assert(why:find("one step recorded so far", 1, true), why) end
end
check.equal(t.partial, false, "partial")
check.equal(t.step - t.previous, 1, "consecutive passes")
check.equal(#t.new, 0, "identical steps: no new node")
check.equal(#t.missing, 0, "identical steps: no missing node")
check.equal(#t.shapes, 0, "identical steps: no shape changed")
-- Step 3 saw the bias after update 2, step 2 after update 1.
local moved = find(t.values, "name", "model.2.bias")
assert(moved, "the bias moved")
check.equal(moved.parameter, true, "a parameter")
local update = (before[3] - before[2]):norm():item() / before[2]:norm():item()
check.close(moved.change, update, 1e-5, "bias change = its update")
check.close(moved.norm, before[3]:norm():item(), 1e-5, "bias norm now")
check.close(moved.norm_before, before[2]:norm():item(), 1e-5, "bias norm before")
assert(find(t.grads, "name", "model.0.weight") or find(t.grads, "name", "model.2.weight"),
             "a weight's gradient moved")
for i = 2, #t.values do assert(t.values[i - 1].change >= t.values[i].change, "values sorted") end
for i = 2, #t.grads do assert(t.grads[i - 1].change >= t.grads[i].change, "grads sorted") end

-- The character LSTM: batches of one shape (identical structure), then a longer sequence.
local data = torch.randint(1, 20, {400}, {dtype = "int64"})
local function batch(B, T)
  local starts = torch.randint(1, 400 - T, {B, 1})
  local positions = (starts + torch.arange(0, T)):reshape(-1)
  return data:index_select(1, positions):reshape{B, T}, data:index_select(1, positions + 1):reshape{B, T}
end
local lstm = M.CharLSTM(20, {embed_dim = 8, hidden_size = 16, num_layers = 1})
local lstm_optimizer = optim.Adam(lstm:parameters(), {lr = 0.01})
local lstm_step = M.make_train_step(lstm, lstm_optimizer, 1.0)
for _ = 1, 3 do lstm_step(batch(4, 12)) end
t = dbg.diff()
check.equal(#t.new + #t.missing + #t.shapes, 0, "identical LSTM steps: no structural change")
assert(#t.values > 0 and #t.grads > 0, "LSTM values and gradients moved")
lstm_step(batch(4, 20))
t = dbg.diff()
check.equal(#t.new + #t.missing, 0, "a longer sequence: the same ops")
assert(#t.shapes > 0, "a longer sequence: shapes changed")
local layer = find(t.shapes, "op", "lstm")   -- the fused layer: [T, B, hidden]
assert(layer, "the LSTM layer's output changed shape")
check.equal(layer.before, "[12,4,16]", "before")
check.equal(layer.after, "[20,4,16]", "after")

-- Off: the observer goes, the summaries are dropped.
check.equal(dbg.diff("off"), true, "was on")
check.equal(dbg.hooks().engine_observed, false, "diff off: no observer")
check.equal(dbg.diff("off"), false, "was off")
assert(not pcall(dbg.diff, "sideways"), "unknown option")

-- Turned on at a stop in the middle of a step: that step is not kept (only its end was seen).
dbg.break_on{op = "relu", phase = "fwd", once = true}
dbg.on_stop(function() dbg.diff("on"); dbg.continue() end)
train_step(x, labels)
dbg.on_stop(nil)
t, why = dbg.diff()
assert(t == nil and why:find("no step recorded yet", 1, true), tostring(why))
train_step(x, labels)
train_step(x, labels)
t = dbg.diff()
check.equal(#t.new + #t.missing + #t.shapes, 0, "whole steps after it: no structural change")
dbg.diff("off")

-- A parameter made while summaries are on is recorded before {requires_grad = true} applies, in
-- the first step only: it is still the same parameter in the next one, not a new node.
dbg.diff("on")
local v = torch.ones(3, {requires_grad = true})
local function v_step() (v * v):sum():backward() end   -- one line for the ops of every step
for _ = 1, 2 do v_step() end
t = dbg.diff()
check.equal(#t.new + #t.missing, 0, "a parameter made in the first step")
-- A backward pass abandoned at a stop: that step and the next are not kept; then whole steps again.
dbg.on_stop(function() dbg.abort() end)
dbg.break_on{op = "mul", phase = "bwd", once = true}
assert(not pcall(v_step), "abandoned")
dbg.on_stop(nil)
for _ = 1, 2 do v_step() end
t = dbg.diff()
check.equal(#t.new + #t.missing + #t.shapes, 0, "after an abandoned pass")
dbg.diff("off")
print("ok")
