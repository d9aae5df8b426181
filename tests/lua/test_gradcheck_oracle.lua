-- torch.autograd.gradcheck and torch.autograd.numerical_jacobian against PyTorch
-- (tests/oracle/make_gradcheck_oracle.py -> gradcheck_oracle_data.lua): for each function, the
-- verdict (pass or fail) is PyTorch's gradcheck's, and the numerical Jacobian is PyTorch's within
-- 1e-7. Then what the check leaves behind (the inputs exactly as they were, no node on the tape),
-- its sample of a large input, its message, and the errors for bad input.
local here = arg[0]:match("^(.*[/\\])") or ""
local check = dofile(here .. "check.lua")
local oracle = dofile(here .. "../oracle/gradcheck_oracle_data.lua")

-- The same functions as the oracle script's, by case name.
local Cube = torch.Function{
  name = "Cube",
  forward = function(ctx, x) ctx:save_for_backward(x); return x:pow(3) end,
  backward = function(ctx, grad) local x = ctx.saved_tensors[1]; return grad * x:pow(2) * 3 end,
}
local BadCube = torch.Function{
  name = "BadCube",
  forward = function(ctx, x) ctx:save_for_backward(x); return x:pow(3) end,
  backward = function(ctx, grad) local x = ctx.saved_tensors[1]; return grad * x * 3 end,   -- wrong
}
local ScaledSwap = torch.Function{
  name = "ScaledSwap",
  forward = function(ctx, a, b) ctx:save_for_backward(a, b); return b * 2, a * b end,
  backward = function(ctx, g1, g2)
    local a, b = table.unpack(ctx.saved_tensors)
    return g2 * b, g1 * 2 + g2   -- wrong for b: g2 * a
  end,
}
local functions = {
  tanh_mm_sin = function(x, W) return torch.tanh(x:mm(W)) + torch.sin(x):sum() end,
  cube = function(x) return Cube.apply(x) end,
  bad_cube = function(x) return BadCube.apply(x) end,
  scaled_swap = function(a, b) return {ScaledSwap.apply(a, b)} end,
  softmax_and_norm = function(x) return {torch.softmax(x, 2), (x * x):sum()} end,
}

for _, case in ipairs(oracle) do
  local fn = assert(functions[case.name], case.name)
  local inputs = {}
  for i, entry in ipairs(case.inputs) do inputs[i] = check.entry_tensor(entry):requires_grad_() end
  local ok, message = torch.autograd.gradcheck(fn, inputs, {raise_exception = false})
  check.equal(ok, case.passes, case.name .. ": the verdict (PyTorch's gradcheck)")
  if not ok then assert(message:find("Jacobian mismatch for output", 1, true), message) end
  local J = torch.autograd.numerical_jacobian(fn, inputs)
  check.equal(#J, #case.inputs, case.name .. ": one Jacobian list per input")
  for i, per_input in ipairs(case.numerical) do
    check.equal(#J[i], #case.outputs, case.name .. ": one Jacobian per output")
    for j, values in ipairs(per_input) do
      local rows = inputs[i]:numel()
      local columns = #values // rows
      check.shape(J[i][j], {rows, columns}, case.name .. ": Jacobian " .. i .. "," .. j)
      check.close(J[i][j], values, 1e-7, case.name .. ": numerical Jacobian " .. i .. "," .. j)
    end
  end
end

-- The check puts every element back exactly, and leaves no node on the tape.
torch.manual_seed(3)
local x = torch.randn(4, 5, {dtype = torch.float64, requires_grad = true})
local W = torch.randn(5, 3, {dtype = torch.float64, requires_grad = true})
local x_before, W_before = x:clone(), W:clone()
collectgarbage(); collectgarbage()
local _, nodes_before = torch.memory()
assert(torch.autograd.gradcheck(functions.tanh_mm_sin, {x, W}))
collectgarbage(); collectgarbage()
local _, nodes_after = torch.memory()
check.equal(nodes_after, nodes_before, "live nodes after gradcheck")
check.equal(x:eq(x_before):sum():item(), 20, "x's elements restored exactly")
check.equal(W:eq(W_before):sum():item(), 15, "W's elements restored exactly")
check.equal(x.grad, nil, "gradcheck leaves .grad alone")

-- One tensor as inputs, extra non-tensor arguments, a table result, an int64 output skipped.
assert(torch.autograd.gradcheck(function(t) return t:exp() end, x))
assert(torch.autograd.gradcheck(function(t, s) return t * s end, {x, 2.5}))
assert(torch.autograd.gradcheck(function(t) return {t:tanh(), t:max(2)} end, x))

-- A wrong gradient fails whatever the input's values, with its worst element named (1-based).
local ok, message = torch.autograd.gradcheck(functions.bad_cube, x, {raise_exception = false})
check.equal(ok, false, "bad_cube fails")
assert(message:find("with respect to input 1: worst at d output[", 1, true), message)
assert(message:find("elements differ", 1, true), message)
check.fails("gradcheck", "Jacobian mismatch for output 1 with respect to input 1", function() torch.autograd.gradcheck(functions.bad_cube, {x}) end)
-- the tolerances are PyTorch's: a loose enough one lets a small error through
local Off = torch.Function{name = "Off", forward = function(ctx, t) return t * 1 end,
                           backward = function(ctx, g) return g * 1.005 end}
check.equal(torch.autograd.gradcheck(Off.apply, x, {raise_exception = false}), false, "0.5% off fails at rtol 1e-3")
check.equal(torch.autograd.gradcheck(Off.apply, x, {rtol = 1e-2}), true, "0.5% off passes at rtol 1e-2")

-- A large input: a sample of its elements within max_evaluations (said on stderr).
local big = torch.randn(3000, {dtype = torch.float64, requires_grad = true})
assert(torch.autograd.gradcheck(function(t) return t:sin() end, big, {max_evaluations = 2000}))
check.equal(torch.autograd.gradcheck(BadCube.apply, big, {max_evaluations = 2000, raise_exception = false}), false,
            "a sample still finds a wrong gradient")

-- Bad input.
check.fails("gradcheck", "at least one input tensor to require grad", function() torch.autograd.gradcheck(torch.exp, torch.randn(3)) end)
check.fails("gradcheck", "must return a tensor or a table of tensors", function() torch.autograd.gradcheck(function() return 1 end, x) end)
check.fails("gradcheck", "the function failed", function() torch.autograd.gradcheck(function() error("boom") end, x) end)
check.fails("torch.autograd.gradcheck", "unknown option 'fast_mode'", function() torch.autograd.gradcheck(torch.exp, x, {fast_mode = true}) end)
check.fails("gradcheck", "fn must be a function", function() torch.autograd.gradcheck(3, x) end)
check.fails("gradcheck", "inputs must be a tensor or a table", function() torch.autograd.gradcheck(torch.exp, "x") end)
check.fails("numerical_jacobian", "max_evaluations", function() torch.autograd.numerical_jacobian(torch.exp, big, {max_evaluations = 10}) end)
print("gradcheck oracle: ok")
