-- two_layer_net_manual.lua: the lecture's two-layer ReLU network with the gradients written by
-- hand (PyTorch: Tensors, no autograd), lr 1e-6, 500 steps.
--   tapedeck scripts/two_layer_net_manual.lua [steps] [print_every]

local steps = tonumber(arg and arg[1]) or 500
local print_every = tonumber(arg and arg[2]) or 50
torch.manual_seed(0)

local N, D_in, H, D_out = 64, 1000, 100, 10
local x = torch.randn(N, D_in)
local y = torch.randn(N, D_out)
local w1 = torch.randn(D_in, H)
local w2 = torch.randn(H, D_out)

local learning_rate = 1e-6
for t = 1, steps do
  local h = x:mm(w1)
  local h_relu = h:clamp{min = 0}
  local y_pred = h_relu:mm(w2)
  local loss = (y_pred - y):pow(2):sum()
  if t == 1 or t % print_every == 0 or t == steps then
    print(("step %5d  loss %.6g"):format(t, loss:item()))
  end

  local grad_y_pred = (y_pred - y) * 2.0
  local grad_w2 = h_relu:t():mm(grad_y_pred)
  local grad_h_relu = grad_y_pred:mm(w2:t())
  local grad_h = grad_h_relu:clone()
  grad_h[h:lt(0)] = 0
  local grad_w1 = x:t():mm(grad_h)

  w1:sub_(grad_w1, learning_rate)
  w2:sub_(grad_w2, learning_rate)
end
