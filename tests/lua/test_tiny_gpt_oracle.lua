-- The tiny GPT (scripts/models/tiny_gpt_model.lua) against its PyTorch twin
-- (tests/oracle/make_tiny_gpt_oracle.py): weights loaded from the PyTorch-made
-- tests/oracle/tiny_gpt/weights.npz (nanoGPT's names, lm_head tied to wte), one training step on a
-- fixed batch (forward, cross_entropy, backward, AdamW with nanoGPT's decay groups), eager and
-- through torch.freeze, in float32 and float64: the loss, logits, every gradient and every
-- parameter after the step vs PyTorch's.
--
-- Tolerances: float32 1e-5 relative (check.close: |a - b| <= 1e-5 (1 + |b|)); float64 1e-10.
-- Adam's first step moves a parameter by about lr * sign(grad), so where a gradient is zero up to
-- rounding its float32 sign is noise and the float32 update is not comparable: those elements
-- (|grad| < 1e-6 in PyTorch's float64 run) are left out of the float32 "after" check, and the
-- float64 run, which checks every element, covers them. They are the key part of each block's
-- c_attn.bias (exactly zero in exact arithmetic: softmax ignores a constant added to all of a
-- query's scores, and q . b_k is one) and the position rows T+1..block_size of wpe (unused): 32.
local here = arg[0]:match("^(.*[/\\])") or ""
local check = dofile(here .. "check.lua")
local gpt = dofile(here .. "../../scripts/models/tiny_gpt_model.lua")
local weights_file = here .. "../oracle/tiny_gpt/weights.npz"
local expected = torch.load(here .. "../oracle/tiny_gpt/expected.npz")

local CONFIG = gpt.config{block_size = 8, vocab_size = 11, n_layer = 2, n_head = 2, n_embd = 8}   -- the script's CONFIG
local LR, BETAS, WEIGHT_DECAY = 1e-2, {0.9, 0.95}, 0.1
local NOISE = 1e-6   -- gradients below this (in float64) are zero up to rounding
local idx, targets = expected.idx + 1, expected.targets + 1   -- 1-based tokens

-- A model with the PyTorch weights in dtype, its optimizer, and the training step.
local function make_problem(dtype)
  local model = gpt.GPT(CONFIG)
  model:load_state_dict(torch.load(weights_file))
  if dtype == "float64" then model:double() end
  local optimizer = model:configure_optimizers(WEIGHT_DECAY, LR, BETAS)
  local problem = {model = model, optimizer = optimizer}
  function problem.train_step(x, y)
    optimizer:zero_grad()
    local logits, loss = model(x, y)
    loss:backward()
    optimizer:step()
    problem.grads = {}   -- (Lua state: set when recording, not by a replay)
    return loss, logits
  end
  return problem
end

-- The model's state as PyTorch's first step starts it: the file's weights, zero optimizer state.
local function reset(problem)
  problem.model:load_state_dict(torch.load(weights_file))
  torch.no_grad(function()
    for _, state in pairs(problem.optimizer.state) do
      for _, t in pairs(state) do t:zero_() end
    end
  end)
end

local function compare(problem, loss, logits, dtype, how)
  local tol = dtype == "float32" and 1e-5 or 1e-10
  local what = dtype .. " " .. how
  check.close(loss, expected[dtype .. ".loss"], tol, what .. ": loss")
  check.close(logits, expected[dtype .. ".logits"], tol, what .. ": logits")
  local n, skipped = 0, 0
  for _, pair in ipairs(problem.model:named_parameters()) do
    local name, p = pair[1], pair[2]
    local grad = expected[dtype .. ".grad." .. name]
    assert(grad, what .. ": PyTorch has no parameter " .. name)
    check.equal(p.dtype, dtype, what .. ": dtype of " .. name)
    check.close(p.grad, grad, tol, what .. ": grad " .. name)
    local after = expected[dtype .. ".after." .. name]
    if dtype == "float32" then
      local comparable = expected["float64.grad." .. name]:abs():ge(NOISE):to("float32")
      skipped = skipped + (1 - comparable):sum():item()
      check.close(p:detach() * comparable, after * comparable, tol, what .. ": " .. name .. " after the step")
    else
      check.close(p, after, tol, what .. ": " .. name .. " after the step")
    end
    n = n + 1
  end
  check.equal(n, 28, what .. ": parameters (lm_head.weight is transformer.wte.weight)")
  return skipped
end

for _, dtype in ipairs({"float32", "float64"}) do
  local x, y = idx, targets
  -- eager
  local eager = make_problem(dtype)
  local loss, logits = eager.train_step(x, y)
  local skipped = compare(eager, loss, logits, dtype, "eager")
  if dtype == "float32" then check.equal(skipped, 32, "float32: updates left out (gradients zero up to rounding)") end
  -- frozen: torch.freeze records (and runs) one step; reset to the file's weights and zero
  -- optimizer state, the replay is the first step again
  local frozen = make_problem(dtype)
  local step = torch.freeze{frozen.train_step, x, y, strict = true}
  reset(frozen)
  loss, logits = step(x, y)
  check.equal(step:stats().replays, 1, dtype .. ": the second call replays the plan")
  compare(frozen, loss, logits, dtype, "frozen")
end

-- The state_dict's keys are nanoGPT's (lm_head.weight and transformer.wte.weight, one tensor).
local model = gpt.GPT(CONFIG)
local keys = {}
for key in pairs(model:state_dict()) do keys[#keys + 1] = key end
local file_keys = {}
for key in pairs(torch.load(weights_file)) do file_keys[#file_keys + 1] = key end
table.sort(keys)
table.sort(file_keys)
check.equal(table.concat(keys, " "), table.concat(file_keys, " "), "state_dict keys vs the PyTorch file")
assert(model.lm_head.weight == model.transformer.wte.weight, "lm_head is tied to wte")
print("test_tiny_gpt_oracle: ok")
