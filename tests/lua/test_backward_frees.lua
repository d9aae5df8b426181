-- A backward pass frees each gradient it has used (autograd.cpp, "Freeing gradients once used"),
-- and keeps every gradient something can still see. tests/memory/backward_frees_gradients.lua
-- checks the memory this saves; here: what stays readable, and that the records stay.
local check = dofile((arg[0]:match("^(.*[/\\])") or "") .. "check.lua")
-- A script run without -i keeps no backward nodes after backward(): see the end. These checks are
-- about a pass that keeps them (an interactive session, or asked for).
check.equal(torch.autograd.keep_backward_graph(true), false, "a script starts with the backward graph not kept")

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

-- Not kept (a script's default, as PyTorch): the backward nodes die as the pass lets go of them, the
-- forward graph stays, so a second backward() works (given retain_graph, as PyTorch asks) and accumulates; .grad is right.
do
  check.equal(torch.autograd.keep_backward_graph(false), true, "keep_backward_graph returns the setting it replaces")
  check.equal(torch.autograd.keep_backward_graph(), false, "with no argument it only reads the setting")
  local W = torch.tensor({{0.5, -0.25}, {0.125, 1}}, {requires_grad = true})
  local h = torch.tensor({{1}, {2}})
  for _ = 1, 200 do h = W:mm(h):tanh() end
  local loss = h:sum()
  collectgarbage(); collectgarbage()
  local _, nodes_before = torch.memory()
  loss:backward{retain_graph = true}   -- the passes below go through the graph again
  collectgarbage(); collectgarbage()
  local _, nodes_after = torch.memory()
  local backward_records = 0
  for _, record in ipairs(torch.graph(loss)) do
    if record.phase == "backward" then backward_records = backward_records + 1 end
  end
  check.equal(backward_records, 0, "no backward node outlives the pass")
  -- .grad of W is one node (taken over from the pass, or a copy); nothing else stays.
  check.equal(nodes_after - nodes_before <= 2, true,
              ("live nodes before backward %d, after %d"):format(nodes_before, nodes_after))
  local first = W.grad:clone()
  loss:backward{retain_graph = true}
  check.close(W.grad, first * 2, 1e-6, "a second pass through the retained forward graph accumulates")
  -- The same pass with the graph kept gives the same gradient.
  W.grad = nil
  torch.autograd.keep_backward_graph(true)
  loss:backward()
  check.close(W.grad, first, 1e-6, "kept or not, the same gradient")
  local ok, err = pcall(torch.autograd.keep_backward_graph, "yes")
  check.equal(ok, false, "a non-boolean is refused")
  check.equal(tostring(err):find("keep_backward_graph", 1, true) ~= nil, true, tostring(err))
end

print("test_backward_frees: ok")
