-- A layer whose locals name its tensors (tests/repl/debug_backward_names.in stops in its backward).
function layer(x, w)
  local h = x:mm(w)
  local act = h:tanh()
  return act:sum()
end

torch.manual_seed(0)
x = torch.randn(2, 3)
w = torch.randn(3, 2, {requires_grad = true})
loss = layer(x, w)
