-- scripts/models/char_lstm_model.lua against PyTorch (tests/oracle/make_char_lstm_oracle.py ->
-- tests/oracle/char_lstm/): the model at a tiny size (vocabulary 11, embedding 5, hidden 8, two
-- LSTM layers), PyTorch's initial weights from weights.npz, two training steps (cross_entropy,
-- backward, clip_grad_norm_ that clips, Adam) on fixed batches. After each step the loss, the
-- clipped gradients and the updated weights are PyTorch's: float32 within 1e-5, float64 within
-- 1e-10; eagerly and frozen (torch.freeze records step 1, step 2 replays the plan).
local here = arg[0]:match("^(.*[/\\])") or "./"
local check = dofile(here .. "check.lua")
local M = dofile(here .. "../../scripts/models/char_lstm_model.lua")
local folder = here .. "../oracle/char_lstm/"
local weights = torch.load(folder .. "weights.npz")
local expected = torch.load(folder .. "expected.npz")
local batches = {{expected.x1, expected.y1}, {expected.x2, expected.y2}}

-- A fresh model with PyTorch's weights, in dtype, its optimizer and training step.
local function make(dtype)
  local model = M.CharLSTM(11, {embed_dim = 5, hidden_size = 8, num_layers = 2})
  model:to(dtype)
  model:load_state_dict(weights)   -- strict: the names are PyTorch's
  local optimizer = optim.Adam(model:parameters(), {lr = 0.01})
  return model, M.make_train_step(model, optimizer, 0.1)
end

local function compare(model, loss, prefix, tol, what)
  check.close(loss, expected[prefix .. "loss"], tol, what .. ": loss")
  for _, pair in ipairs(model:named_parameters()) do
    local name, p = pair[1], pair[2]
    check.close(p.grad, expected[prefix .. "grad." .. name], tol, what .. ": clipped gradient of " .. name)
    check.close(p, expected[prefix .. "param." .. name], tol, what .. ": " .. name .. " after Adam's step")
  end
end

for _, run in ipairs({{"float32", 1e-5}, {"float64", 1e-10}}) do
  local dtype, tol = run[1], run[2]
  -- eager
  local model, train_step = make(dtype)
  for step, batch in ipairs(batches) do
    local loss = train_step(batch[1], batch[2])
    compare(model, loss, dtype .. "." .. step .. ".", tol, dtype .. " eager, step " .. step)
  end
  -- frozen: step 1 is recorded (and run), step 2 replays the plan
  local frozen_model, frozen_step = make(dtype)
  local f, loss = M.freeze(frozen_step, batches[1][1], batches[1][2])
  compare(frozen_model, loss, dtype .. ".1.", tol, dtype .. " frozen, step 1 (recording)")
  loss = f(batches[2][1], batches[2][2])
  compare(frozen_model, loss, dtype .. ".2.", tol, dtype .. " frozen, step 2 (replay)")
  check.equal(f:stats().replays, 1, dtype .. ": step 2 was a replay")
end

print("test_char_lstm_oracle: ok")
