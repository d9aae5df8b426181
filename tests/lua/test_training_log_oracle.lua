-- The training log against PyTorch: the loss, the gradient norms and the update ratios an Adam
-- optimizer's step() logs on a small MLP (float32, fixed weights and data) equal PyTorch's, from
-- tests/oracle/training_log_oracle_data.lua (made by tests/oracle/make_training_log_oracle.py).
local here = arg[0]:match("^(.*[/\\])") or "./"
local oracle = dofile(here .. "../oracle/training_log_oracle_data.lua")

local function close(a, b, tol, what)
  assert(math.abs(a - b) <= tol * math.max(1e-3, math.abs(b)), string.format("%s: %.9g vs PyTorch's %.9g", what, a, b))
end

viewer.log_clear()
-- A script run on its own logs nothing by itself until it asks (or calls viewer.log).
assert(viewer.log_options().automatic == "watched" and not viewer.log_options().logging)
viewer.log_options{automatic = true}
model = nn.Sequential(nn.Linear(3, 5), nn.Tanh(), nn.Linear(5, 2))   -- a global: model.0.weight, ...
torch.no_grad(function()
  for i, pair in ipairs(model:named_parameters()) do
    assert(pair[1] == oracle.names[i], pair[1])
    pair[2]:copy_(torch.tensor(oracle.initial[i]):reshape(oracle.shapes[i]))
  end
end)
local x, y = torch.tensor(oracle.x), torch.tensor(oracle.y)
local opt = optim.Adam(model:parameters(), {lr = 0.05, weight_decay = 0.01})
for _ = 1, #oracle.loss do
  opt:zero_grad()
  F.mse_loss(model(x), y):backward()
  opt:step()
end

local loss = viewer.series("loss")
for step, expected in ipairs(oracle.loss) do
  assert(loss.steps[step] == step - 1)
  close(loss.values[step], expected, 1e-6, "loss at step " .. (step - 1))
end
for i, name in ipairs(oracle.names) do
  local grad = viewer.series("grad_norm/model." .. name)
  local ratio = viewer.series("update_ratio/model." .. name)
  for step = 1, #oracle.loss do
    close(grad.values[step], oracle.grad_norm[i][step], 1e-5, "grad norm of " .. name .. " at step " .. (step - 1))
    close(ratio.values[step], oracle.update_ratio[i][step], 1e-5, "update ratio of " .. name .. " at step " .. (step - 1))
  end
end
print("test_training_log_oracle: ok (" .. #oracle.names .. " parameters, " .. #oracle.loss .. " steps)")
