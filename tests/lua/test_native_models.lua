-- The four models of scripts/models/ (spiral_mlp, shapes_cnn, char_lstm, tiny_gpt), at a tiny
-- size: 20 training steps frozen with native = true against 20 eager steps from the same initial
-- weights and batches give the same losses and, after the 20 steps, the same parameters within
-- TOLERANCE, relative to each tensor's largest magnitude. And native code did run: f:stats()
-- says native, with steps and calls, and no call fell back to the interpreted steps.
--
-- The tolerance: native code adds products and sums in another order than the interpreted
-- kernels, and takes exp, tanh, ... from glibc rather than Eigen (tests/engine/test_plan_native.cpp):
-- a float32 rounding here and there, which Adam's 20 updates carry on. Measured (the worst over
-- the four models, x86-64 with AVX-512, GCC 12): losses 1.1e-7, parameters 3.4e-7 relative; the
-- tolerances are 1e-6 and 1e-5. Left out: parameters whose gradient is rounding noise (checked to
-- be below 1e-6), which Adam moves by +-lr whatever its size (`noise` below).
--
-- ctest sets XDG_CACHE_HOME to a folder of the build (tests/lua/CMakeLists.txt): the user's cache
-- of native objects is neither read nor written.
local check = dofile((arg[0]:match("^(.*[/\\])") or "") .. "check.lua")
local here = arg[0]:match("^(.*[/\\])") or "./"
local models = here .. "../../scripts/models/"
local spiral = dofile(models .. "spiral_mlp_model.lua")
local shapes = dofile(models .. "shapes_cnn_model.lua")
local lstm = dofile(models .. "char_lstm_model.lua")
local gpt = dofile(models .. "tiny_gpt_model.lua")

local cache = os.getenv("XDG_CACHE_HOME")
assert(cache and cache ~= "", "test_native_models: run it through ctest, which sets XDG_CACHE_HOME to a folder of its own")

local STEPS = 20
local TOLERANCE = {loss = 1e-6, parameters = 1e-5}

-- The worst difference between a and b (tensors) relative to b's largest magnitude.
local function relative_difference(a, b)
  local fa, fb = check.flatten(a), check.flatten(b)
  assert(#fa == #fb, "relative_difference: sizes differ")
  local largest, worst = 0, 0
  for i = 1, #fb do largest = math.max(largest, math.abs(fb[i])) end
  for i = 1, #fb do
    local gap = math.abs(fa[i] - fb[i])
    if gap ~= gap then return math.huge end
    worst = math.max(worst, gap)
  end
  return worst / math.max(largest, 1e-30)
end

-- Each model: make() builds it (seeded: the same weights each time), its optimizer and its
-- training step; batch(i) gives the i-th batch's arguments (the same in both runs).
local MODELS = {
  {name = "spiral_mlp", make = function()
    local model = spiral.model(16, 3)
    return model, spiral.train_step(model, optim.Adam(model:parameters(), {lr = 0.01}))
  end, data = function() return {spiral.dataset(10, 3)} end},
  {name = "shapes_cnn", make = function()
    local model = shapes.model{channels = {2, 3}, size = 8, dropout = 0}
    return model, shapes.train_step(model, optim.Adam(model:parameters(), {lr = 3e-3}))
  end, data = function() return {shapes.dataset(6, 8)} end,
  -- The BatchNorm right after each conv normalises the conv's bias away: its gradient is zero up
  -- to rounding, and Adam's update of that noise is +-lr whatever its size; the running mean of
  -- the next step carries the bias.
  noise = {["0.bias"] = {}, ["4.bias"] = {}, ["1.running_mean"] = {}, ["5.running_mean"] = {}}},
  {name = "char_lstm", make = function()
    local model = lstm.CharLSTM(12, {embed_dim = 8, hidden_size = 16, num_layers = 1})
    return model, lstm.make_train_step(model, optim.Adam(model:parameters(), {lr = 0.01}), 1.0)
  end, data = function()
    return {torch.randint(1, 13, {4, 8}), torch.randint(1, 13, {4, 8})}
  end},
  {name = "tiny_gpt", make = function()
    local model = gpt.GPT(gpt.config{vocab_size = 16, block_size = 8, n_layer = 1, n_head = 2, n_embd = 16})
    return model, gpt.train_step(model, model:configure_optimizers(0.1, 3e-3, {0.9, 0.95}))
  end, data = function()
    return {torch.randint(1, 17, {2, 8}), torch.randint(1, 17, {2, 8})}
  end,
  -- c_attn's bias of the keys (its middle third) adds the same score to every key a query
  -- sees: softmax ignores it, its gradient is zero up to rounding, Adam's update of it +-lr.
  noise = {["transformer.h.0.attn.c_attn.bias"] = {from = 17, length = 16, keep = {{1, 16}, {33, 16}}}}},
}

-- The losses of STEPS training steps, and the model after them; `freeze` makes the step frozen
-- with native code (the first call records it, running it eagerly; the others replay it).
local function train(entry, batches, freeze)
  torch.manual_seed(7)
  local model, step = entry.make()
  model:train()
  local losses, frozen = {}, nil
  if freeze then
    local recorded
    local args = {function(...) recorded = step(...); return recorded end, table.unpack(batches[1])}
    args.strict, args.native = true, true
    frozen = torch.freeze(args)
    losses[1] = recorded:item()
    step = frozen
  end
  for i = #losses + 1, STEPS do losses[i] = step(table.unpack(batches[i])):item() end
  return losses, model, frozen
end

local worst = {loss = 0, parameters = 0}
for _, entry in ipairs(MODELS) do
  local batches = {}
  torch.manual_seed(11)
  for i = 1, STEPS do batches[i] = entry.data() end
  local eager_losses, eager_model = train(entry, batches, false)
  local started = os.clock()
  local losses, model, f = train(entry, batches, true)
  local seconds = os.clock() - started

  local stats = f:stats()
  local what = entry.name .. " native"
  check.equal(stats.native, true, what .. ": f:stats().native (" .. tostring(stats.native) .. ")")
  check.equal(stats.native_steps > 0 and stats.native_segments > 0, true, what .. ": native steps and segments")
  check.equal(stats.native_calls >= (STEPS - 1) * stats.native_segments, true,
              what .. ": each replay ran each segment natively (" .. stats.native_calls .. " calls)")
  check.equal(stats.native_fallbacks, 0, what .. ": no segment fell back to the interpreted steps")
  check.equal(stats.replays, STEPS - 1, what .. ": every step after the first replayed the plan")
  check.equal(#losses, STEPS, what .. ": losses")
  for i = 1, STEPS do
    local d = math.abs(losses[i] - eager_losses[i]) / math.abs(eager_losses[i])
    worst.loss = math.max(worst.loss, d)
    check.equal(d <= TOLERANCE.loss, true, string.format("%s: step %d's loss %.9g, eager %.9g", what, i, losses[i], eager_losses[i]))
  end
  local eager_parameters, noise = eager_model:state_dict(), entry.noise or {}
  local eager_named = {}
  for _, pair in ipairs(eager_model:named_parameters()) do eager_named[pair[1]] = pair[2] end
  for key, part in pairs(noise) do   -- a parameter left out (or part of one): a gradient of rounding noise
    local p = eager_named[key]
    if p then
      local grad = part.from and p.grad:narrow(1, part.from, part.length) or p.grad
      local largest = grad:abs():max():item()
      check.equal(largest < 1e-6, true, string.format("%s: %s's gradient is zero up to rounding (%.3g)", what, key, largest))
    end
  end
  for key, p in pairs(model:state_dict()) do
    local part = noise[key]
    local d = part == nil and relative_difference(p, eager_parameters[key]) or 0
    if part and part.keep then
      for _, range in ipairs(part.keep) do
        d = math.max(d, relative_difference(p:narrow(1, range[1], range[2]), eager_parameters[key]:narrow(1, range[1], range[2])))
      end
    end
    worst.parameters = math.max(worst.parameters, d)
    check.equal(d <= TOLERANCE.parameters, true, string.format("%s: %s after %d steps differs by %.3g (relative)", what, key, STEPS, d))
  end
  print(string.format("%s: %d of %d steps native in %d segments, compiled in %.2f s%s; the 20 frozen steps in %.2f s CPU",
                      entry.name, stats.native_steps, stats.steps, stats.native_segments, stats.native_compile_seconds,
                      stats.native_cache_hit and " (cached)" or "", seconds))
end
print(string.format("worst relative difference: losses %.3g, parameters %.3g", worst.loss, worst.parameters))
print("test_native_models: ok")
