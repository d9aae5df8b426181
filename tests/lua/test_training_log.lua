-- The training log (docs/viewer.md, The Training window), headless: no display needed.
-- The spiral MLP of scripts/models/spiral_mlp.lua trains a few Adam steps with viewer.log; the
-- optimizer's automatic gradient norms, update ratios and loss must equal what this script
-- computes by hand; the plots must be PNGs of the asked size that are not blank; the series stay
-- bounded. (test_training_log_oracle.lua compares the same numbers with PyTorch's.)
local here = arg[0]:match("^(.*[/\\])") or "./"
local check = dofile(here .. "check.lua")
local spiral = dofile(here .. "../../scripts/models/spiral_mlp_model.lua")

local function same_list(actual, expected, what)
  local a, e = table.concat(actual, ", "), table.concat(expected, ", ")
  assert(a == e, string.format("%s: got {%s}, expected {%s}", what, a, e))
end

local function close(a, b, tol, what)
  assert(math.abs(a - b) <= tol * math.max(1, math.abs(b)), string.format("%s: %.9g vs %.9g", what, a, b))
end

-- ------------------------------------------------------------------------------------------
-- A fresh log; nothing logged, :plot's errors say so.
viewer.log_clear()
assert(viewer.step() == 0)
local ok, message = pcall(viewer.plot, "loss", "never.png")
assert(not ok and message:find("nothing was logged yet", 1, true), message)
-- A script run on its own: an optimizer's step() logs nothing by itself (the bench pays nothing)
-- until the script logs something (viewer.log, below) or asks (viewer.log_options{automatic = true}).
assert(viewer.log_options().automatic == "watched" and not viewer.log_options().logging)

torch.manual_seed(0)
local x, labels = spiral.dataset(50, 3)
model = spiral.model(32, 3)   -- a global: the parameters are named model.0.weight, ...
local optimizer = optim.Adam(model, {lr = 0.01})
local params = optimizer.params
local STEPS = 6
local expected = {loss = {}, grad = {}, ratio = {}}
for step = 1, STEPS do
  optimizer:zero_grad()
  local hidden = model[2](model[1](x))
  local loss = F.cross_entropy(model[3](hidden), labels)
  loss:backward()
  viewer.log("hidden", hidden)
  expected.loss[step] = loss:item()
  local before = {}
  for i, p in ipairs(params) do
    expected.grad[i] = expected.grad[i] or {}
    expected.grad[i][step] = p.grad:norm():item()
    before[i] = p:detach():clone()
  end
  optimizer:step()
  for i, p in ipairs(params) do
    expected.ratio[i] = expected.ratio[i] or {}
    expected.ratio[i][step] = (p:detach() - before[i]):norm():item() / before[i]:norm():item()
  end
end

-- The step counter and the names (the debugger's: the module path under the global `model`).
assert(viewer.step() == STEPS, "step " .. viewer.step())
local listing = viewer.series()
same_list(listing.parameters, {"model.0.weight", "model.0.bias", "model.2.weight", "model.2.bias"}, "parameter names")
same_list(listing.histograms, {"hidden"}, "histogram series")

-- The loss: the root of each backward(), at steps 0..5 (the weights after that many updates).
local loss_series = viewer.series("loss")
same_list(loss_series.steps, {0, 1, 2, 3, 4, 5}, "loss steps")
for step = 1, STEPS do close(loss_series.values[step], expected.loss[step], 1e-6, "loss at step " .. step) end
-- Each parameter's gradient norm and update ratio equal the hand-computed ones.
for i, name in ipairs(listing.parameters) do
  local grad = viewer.series("grad_norm/" .. name)
  local ratio = viewer.series("update_ratio/" .. name)
  assert(#grad.values == STEPS and #ratio.values == STEPS, name)
  for step = 1, STEPS do
    close(grad.values[step], expected.grad[i][step], 1e-5, "grad norm of " .. name .. " at step " .. step)
    close(ratio.values[step], expected.ratio[i][step], 1e-4, "update ratio of " .. name .. " at step " .. step)
    assert(ratio.values[step] > 0)
  end
end

-- The histogram of a tensor: per step, counts over its [min, max] summing to its elements; its
-- norm a scalar series.
local hidden = viewer.series("hidden")
assert(#hidden.steps == STEPS)
local total = 0
for _, c in ipairs(hidden.counts[1]) do total = total + c end
assert(total == 150 * 32, "histogram counts sum to " .. total)
assert(hidden.lo[1] == 0, "relu output's minimum " .. hidden.lo[1])
assert(hidden.hi[1] > 0)
assert(#viewer.series("hidden/norm").values == STEPS)

-- A number or a one-element tensor is a scalar; a step given by the caller is kept.
viewer.log("accuracy", torch.no_grad(spiral.accuracy, model, x, labels), 100)
viewer.log("one", torch.tensor({2.5}))
same_list(viewer.series("accuracy").steps, {100}, "given step")
assert(viewer.series("one").values[1] == 2.5, "1-element tensor")
same_list(viewer.series("one").steps, {STEPS}, "default step: the optimizer steps so far")

-- ------------------------------------------------------------------------------------------
-- The plots: PNGs of the asked size, not blank; an unknown name lists the series there are.
local out = os.tmpname()
os.remove(out)
for _, what in ipairs{"loss", "grad_norm", "update_ratio", "flow", "hist hidden", "grad_norm/model.0.bias"} do
  local path = out .. "_" .. what:gsub("[ /]", "_") .. ".png"
  assert(viewer.plot(what, path, {width = 640, height = 360}) == true)
  local w, h, colours = viewer.png_stats(path)
  assert(w == 640 and h == 360, what .. ": " .. tostring(w) .. "x" .. tostring(h))
  assert(colours > 20, what .. " looks blank: " .. colours .. " colours")
  os.remove(path)
end
assert(viewer.plot("loss", out .. ".png") and select(1, viewer.png_stats(out .. ".png")) == 800, "default size")
os.remove(out .. ".png")
ok, message = pcall(viewer.plot, "los", out .. ".png")
assert(not ok and message:find("no series 'los'", 1, true) and message:find("grad_norm (4 series)", 1, true) and
       message:find("hist hidden", 1, true), message)
ok, message = pcall(viewer.plot, "loss", "/no/such/dir/x.png")
assert(not ok and message:find("cannot write", 1, true), message)
assert(viewer.png_stats("/no/such/file.png") == nil)

-- ------------------------------------------------------------------------------------------
-- Automatic logging off: step() logs nothing and still counts.
viewer.log_options{automatic = false}
local before_count = #viewer.series("loss").values
optimizer:zero_grad()
F.cross_entropy(model(x), labels):backward()
optimizer:step()
assert(#viewer.series("loss").values == before_count and viewer.step() == STEPS + 1)
viewer.log_options{automatic = true}
assert(viewer.log_options().logging)
viewer.log_options{automatic = "watched"}
assert(viewer.log_options().logging, "the script logged with viewer.log: it looks")
ok, message = pcall(viewer.log_options, {automatic = 1})
assert(not ok and message:find('"watched"', 1, true), message)
ok, message = pcall(viewer.log_options, {auto = true})
assert(not ok and message:find("unknown option 'auto'", 1, true), message)

-- A loss the script logs itself at a step is not logged again by step().
viewer.log_clear()
optimizer:zero_grad()
local loss = F.cross_entropy(model(x), labels)
loss:backward()
viewer.log("loss", 42)
optimizer:step()
assert(#viewer.series("loss").values == 1 and viewer.series("loss").values[1] == 42, "the script's loss kept")

-- ------------------------------------------------------------------------------------------
-- Bounded memory: 5,000 points fold into fewer than 2,048, each the mean of its values (here the
-- value is the step, so each point's value equals its step); 600 histograms into at most 256.
viewer.log_clear()
for i = 0, 4999 do viewer.log("ramp", i, i) end
local ramp = viewer.series("ramp")
assert(#ramp.values < 2048 and #ramp.values >= 1024, #ramp.values .. " points")
assert(ramp.per_point == 4 and ramp.logged == 5000, ramp.per_point)
for k = 1, #ramp.values do assert(ramp.values[k] == ramp.steps[k], "point " .. k) end
close(ramp.values[1], 1.5, 0, "first point: the mean of 0..3")
local t = torch.randn({100})
for i = 1, 600 do viewer.log("h", t, i) end
local h = viewer.series("h")
assert(#h.steps <= 256 and #h.steps >= 128 and h.keep_every == 4, #h.steps .. " histograms")
assert(h.steps[1] == 1 and h.steps[2] == 5, "every 4th kept: " .. h.steps[2])

-- Bad input: clear errors naming the function.
for _, case in ipairs{
  {function() viewer.log("x", "text") end, "must be a number or a tensor"},
  {function() viewer.log("", 1) end, "the name is empty"},
  {function() viewer.log("x", 1, -1) end, "step must be a number >= 0"},
  {function() viewer.log("x", torch.zeros({0})) end, "is empty"},
  {function() viewer.plot("loss", "x.png", {width = 4}) end, "16..8192"},
  {function() viewer.series("nope") end, "no series 'nope'"},
} do
  ok, message = pcall(case[1])
  assert(not ok and message:find(case[2], 1, true), tostring(message))
end
print("test_training_log: ok")
