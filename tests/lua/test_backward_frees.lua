-- A backward pass frees each gradient it has used (autograd.cpp, "Freeing gradients once used"),
-- and keeps every gradient something can still see. tests/memory/backward_frees_gradients.lua
-- checks the memory this saves; here: what stays readable, and that the records stay.
local check = dofile((arg[0]:match("^(.*[/\\])") or "") .. "check.lua")

-- A tensor sliced per step (as nn.LSTM slices its input projection): the gradients each select
-- makes are summed and freed, .grad and retain_grad() gradients stay readable.
do
  local x = torch.tensor({{1, 2}, {3, 4}, {5, 6}}, {requires_grad = true})
  local y = x * 2
  y:retain_grad()
  local total = y[1]:sum() * 1 + y[2]:sum() * 2 + y[3]:sum() * 3
  total:backward()
  check.close(y.grad, {{1, 1}, {2, 2}, {3, 3}}, 1e-12, "retain_grad: the summed padded gradients")
  check.close(x.grad, {{2, 2}, {4, 4}, {6, 6}}, 1e-12, ".grad of the leaf")
  -- The records of the pass stay, with their shapes: the graph still shows the backward nodes.
  local backward_nodes, shaped = 0, 0
  for _, record in ipairs(torch.graph(total)) do
    if record.phase == "backward" then
      backward_nodes = backward_nodes + 1
      if record.shape then shaped = shaped + 1 end
    end
  end
  check.equal(backward_nodes > 10, true, "the backward nodes are still on record")
  check.equal(shaped, backward_nodes, "each backward record keeps its shape")
  -- A second pass through the same graph reads the forward values, which were not freed.
  total:backward()
  check.close(x.grad, {{4, 4}, {8, 8}, {12, 12}}, 1e-12, "a second pass adds the same gradient again")
end

-- Gradients a hook sees and keeps in a Lua variable, and the one it returns, stay readable.
do
  local x = torch.tensor({1, 2, 3}, {requires_grad = true})
  local h = x * x
  local seen, returned
  h:register_hook(function(g) seen = g; returned = g * 10; return returned end)
  ;(h * 3):sum():backward()
  check.close(seen, {3, 3, 3}, 1e-12, "the gradient the hook kept")
  check.close(returned, {30, 30, 30}, 1e-12, "the gradient the hook returned")
  check.close(x.grad, {60, 120, 180}, 1e-12, ".grad through the hooked gradient")
end

-- torch.autograd.grad's results, and a create_graph pass's gradients (a graph of their own).
do
  local x = torch.tensor({1, 2, 3}, {requires_grad = true})
  local y = (x * x * x):sum()
  local g = torch.autograd.grad(y, x, {create_graph = true})
  check.close(g, {3, 12, 27}, 1e-12, "autograd.grad: 3x^2")
  g:sum():backward()
  check.close(x.grad, {6, 12, 18}, 1e-12, "second derivative through the kept gradients: 6x")
  local z = x:select(1, 2) * 5
  local gz = torch.autograd.grad(z, x)
  check.close(gz, {0, 5, 0}, 1e-12, "autograd.grad without create_graph: its result is kept")
end

print("test_backward_frees: ok")
