-- gradcheck_functions.lua: two torch.Functions for the gradcheck transcript, one with a correct
-- backward and one with a wrong one (d/dx x^3 taken as 3 x instead of 3 x^2).
Cube = torch.Function{
  name = "Cube",
  forward = function(ctx, x)
    ctx:save_for_backward(x)
    return x:pow(3)
  end,
  backward = function(ctx, grad)
    local x = ctx.saved_tensors[1]
    return grad * x:pow(2) * 3
  end,
}

BadCube = torch.Function{
  name = "BadCube",
  forward = function(ctx, x)
    ctx:save_for_backward(x)
    return x:pow(3)
  end,
  backward = function(ctx, grad)
    local x = ctx.saved_tensors[1]
    return grad * x * 3          -- wrong: the derivative of x^3 is 3 x^2
  end,
}

torch.manual_seed(1)
x = torch.randn(2, 3, {requires_grad = true})
w = torch.randn(3, 2, {requires_grad = true})
loss = (Cube(x):mm(w):sum() + BadCube(x):sin():sum())
