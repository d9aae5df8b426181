-- diff_steps.lua: a training step whose forward takes a branch and a sequence length given as
-- arguments, for :diff (tests/repl/diff_steps.in, docs/debugger.md ":diff").
torch.manual_seed(0)
w = torch.randn(4, 4, {requires_grad = true})
b = torch.zeros(1, 4, {requires_grad = true})
local optimizer = optim.SGD({w, b}, {lr = 0.1})

function step(T, gate)
  optimizer:zero_grad()
  local x = torch.randn(T, 4)
  local h = x:mm(w) + b
  if gate then
    h = h:relu()
  else
    h = h:tanh()
  end
  loss = h:pow(2):mean()
  loss:backward()
  optimizer:step()
  return loss:item()
end
