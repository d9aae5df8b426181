-- The native code lesson (docs/freeze.md, "Native code"): one RNN step, frozen to C++.
torch.manual_seed(0)
W_h = torch.randn(4, 4, {requires_grad = true})
W_x = torch.randn(4, 3, {requires_grad = true})
x = torch.randn(3, 1)
h = torch.randn(4, 1)
step = function(x, h)
  local pre = W_h:mm(h) + W_x:mm(x)
  local next_h = pre:tanh()
  local loss = (next_h * next_h):sum()
  loss:backward()
  return loss
end
f = torch.freeze{step, x, h, name = "f", native = true}   -- compiled to C++ and loaded (needs g++)
