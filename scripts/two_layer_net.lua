-- two_layer_net.lua: the lecture's two-layer ReLU network trained with autograd and a manual
-- SGD step under no_grad (PyTorch: Autograd, lr 1e-6, 500 steps).
--   tapedeck scripts/two_layer_net.lua [steps] [print_every]

local steps = tonumber(arg and arg[1]) or 500
local print_every = tonumber(arg and arg[2]) or 50
torch.manual_seed(0)

local N, D_in, H, D_out = 64, 1000, 100, 10
local x = torch.randn(N, D_in)
local y = torch.randn(N, D_out)
local w1 = torch.randn(D_in, H, {requires_grad = true})
local w2 = torch.randn(H, D_out, {requires_grad = true})

local learning_rate = 1e-6
for t = 1, steps do
  local y_pred = x:mm(w1):clamp{min = 0}:mm(w2)
  local loss = (y_pred - y):pow(2):sum()
  if t == 1 or t % print_every == 0 or t == steps then
    print(("step %5d  loss %.6g"):format(t, loss:item()))
  end

  loss:backward()

  torch.no_grad(function()
    w1:sub_(w1.grad, learning_rate)   -- w1 -= learning_rate * w1.grad
    w2:sub_(w2.grad, learning_rate)
    w1.grad:zero_()
    w2.grad:zero_()
  end)
end
