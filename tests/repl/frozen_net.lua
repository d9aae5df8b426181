-- frozen_net.lua: the lecture's two-layer net (small), its training step frozen with torch.freeze
torch.manual_seed(0)
x, y = torch.randn(4, 5), torch.randn(4, 2)
w1 = torch.randn(5, 3, {requires_grad = true})
w2 = torch.randn(3, 2, {requires_grad = true})
function train_step(x, y)
  local h = x:mm(w1):tanh()
  local loss = (h:mm(w2) - y):pow(2):sum()
  loss:backward()
  return loss
end
f = torch.freeze{train_step, x, y, name = "f"}
