-- A frozen step whose gradient is a strided view (Linear on a 3-D input: the weight's gradient is
-- the transpose of an mm) gives the eager .grad when the plan creates .grad (nil before the
-- call: zero_grad inside the step, or outside it). Before, the new .grad kept the view's strides
-- over row-major bytes: the weight's gradient came back transposed element for element.
local check = dofile((arg[0]:match("^(.*[/\\])") or "") .. "check.lua")

torch.manual_seed(0)
local lin = nn.Linear(3, 2)
local x = torch.randn(2, 4, 3)
local function step(a)
  lin:zero_grad()
  local loss = lin(a):pow(2):sum()
  loss:backward()
  return loss
end
step(x)
local eager = lin.weight.grad:clone()
local f = torch.freeze{step, x, strict = true}
for call = 1, 2 do
  f(x)
  check.close(lin.weight.grad, eager, 0, "replay " .. call .. ": weight grad")
end
local no_passes = torch.freeze{step, x, strict = true, passes = {fuse = false, inplace = false, reuse = false}}
no_passes(x)
check.close(lin.weight.grad, eager, 0, "replay without passes: weight grad")
-- the .grad cleared outside the frozen function
local function backward_only(a)
  local loss = lin(a):pow(2):sum()
  loss:backward()
  return loss
end
lin:zero_grad()
local g = torch.freeze{backward_only, x}
lin:zero_grad()
g(x)
check.close(lin.weight.grad, eager, 0, "nil before the replay: weight grad")
print("test_freeze_grad_layout: ok")
