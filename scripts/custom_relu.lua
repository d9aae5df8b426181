-- custom_relu.lua: the lecture's MyReLU as a torch.Function, used in the two-layer network
-- (PyTorch: New Autograd Functions), lr 1e-6, 500 steps. On the tape each call is one MyReLU
-- node, and each backward one MyReLU.backward node; `:break bwd MyReLU` stops there.
--   tapedeck scripts/custom_relu.lua [steps] [print_every]

local steps = tonumber(arg and arg[1]) or 500
local print_every = tonumber(arg and arg[2]) or 50

MyReLU = torch.Function{
  name = "MyReLU",
  forward = function(ctx, x)
    ctx:save_for_backward(x)
    return x:clamp{min = 0}
  end,
  backward = function(ctx, grad_y)
    local x = ctx.saved_tensors[1]
    local grad_input = grad_y:clone()
    grad_input[x:lt(0)] = 0
    return grad_input
  end,
}

local function my_relu(x) return MyReLU.apply(x) end

torch.manual_seed(0)
local N, D_in, H, D_out = 64, 1000, 100, 10
local x = torch.randn(N, D_in)
local y = torch.randn(N, D_out)
w1 = torch.randn(D_in, H, {requires_grad = true})
w2 = torch.randn(H, D_out, {requires_grad = true})

local learning_rate = 1e-6
for t = 1, steps do
  local y_pred = my_relu(x:mm(w1)):mm(w2)
  loss = (y_pred - y):pow(2):sum()
  if t == 1 or t % print_every == 0 or t == steps then
    print(("step %5d  loss %.6g"):format(t, loss:item()))
  end
  loss:backward()
  torch.no_grad(function()
    w1:sub_(w1.grad, learning_rate)
    w2:sub_(w2.grad, learning_rate)
    w1.grad:zero_()
    w2.grad:zero_()
  end)
end
