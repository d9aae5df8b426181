-- A second backward() through one graph, against PyTorch (tests/oracle/make_backward_twice_oracle.py):
-- where a node's rule reads saved values (mul's inputs, tanh's output, a torch.Function's
-- save_for_backward), the first pass releases them unless it was given {retain_graph = true} (or
-- create_graph), and a second pass through it is an error that changes no .grad; a graph whose
-- nodes save nothing runs again and accumulates. (At the prompt such a pass runs with a note:
-- tests/repl/backward_twice.in.)
local here = arg[0]:match("^(.*[/\\])") or "./"
local check = dofile(here .. "check.lua")
local oracle = dofile(here .. "../oracle/backward_twice_oracle_data.lua")

local Square = torch.Function{
  name = "Square",
  forward = function(ctx, v) ctx:save_for_backward(v); return v * v end,
  backward = function(ctx, g) local v = ctx.saved_tensors[1]; return 2 * v * g end,
}

local cases = {
  saves_nothing = function(x) local y = (x + 1):sum(); return {function() y:backward() end, function() y:backward() end} end,
  saves_inputs = function(x) local y = (x * x):sum(); return {function() y:backward() end, function() y:backward() end} end,
  retained = function(x)
    local y = (x * x):sum()
    return {function() y:backward{retain_graph = true} end, function() y:backward() end, function() y:backward() end}
  end,
  shared_subgraph = function(x)
    local h = x:tanh()
    local a, b = h:sum(), (h * 2):sum()
    return {function() a:backward() end, function() b:backward() end}
  end,
  create_graph = function(x)
    local y = (x * x):sum()
    return {function() y:backward{create_graph = true} end, function() y:backward() end}
  end,
  custom_function = function(x) local y = Square(x):sum(); return {function() y:backward() end, function() y:backward() end} end,
}

for name, make in pairs(cases) do
  local expected = oracle[name]
  assert(expected, "no PyTorch row for case " .. name)
  local x = torch.tensor({0.5, -1, 2}, {dtype = torch.float64, requires_grad = true})
  for i, call in ipairs(make(x)) do
    local ok, err = pcall(call)
    local what = ("%s, call %d"):format(name, i)
    check.equal(not ok, expected[i].raised, what .. ": raises as PyTorch does (" .. tostring(err) .. ")")
    if not ok then
      assert(err:find("backward through the graph a second time", 1, true) and err:find("retain_graph = true", 1, true),
             what .. ": the message names the cause and the fix: " .. err)
      assert(err:find("test_backward_twice.lua:%d+%)$"), what .. ": the message ends with the caller's line: " .. err)
    end
    if expected[i].grad then check.close(x.grad, expected[i].grad, 1e-12, what .. ": x.grad")
    else check.equal(x.grad, nil, what .. ": x.grad") end
  end
end

-- torch.autograd.grad frees the graph as backward() does (PyTorch's retain_graph defaults to create_graph).
local x = torch.tensor({0.5, -1, 2}, {dtype = torch.float64, requires_grad = true})
local y = (x * x):sum()
local g = torch.autograd.grad(y, x)
check.close(g, {1, -2, 4}, 1e-12, "autograd.grad")
local ok, err = pcall(torch.autograd.grad, y, x)
assert(not ok and err:find("second time", 1, true), "a second autograd.grad through the freed graph: " .. tostring(err))
y = (x * x):sum()
torch.autograd.grad(y, x, {retain_graph = true})
check.close(torch.autograd.grad(y, x), {1, -2, 4}, 1e-12, "autograd.grad after retain_graph = true")
print("ok")
