-- sigmoid_neuron.lua: the lecture's exercise, f(w, x) = 1 / (1 + exp(-(w0*x0 + w1*x1 + w2)))
-- with w0 = 1, w1 = -2, w2 = 1, x0 = -1, x1 = 1. Prints the forward value, every gradient, and
-- the value and gradient at each node of the graph, as students compute them by hand
-- (upstream gradient 1).
--   tapedeck scripts/sigmoid_neuron.lua

local function scalar(v) return torch.tensor(v, {requires_grad = true, dtype = "float64"}) end
w0, w1, w2 = scalar(1), scalar(-2), scalar(1)
x0, x1 = scalar(-1), scalar(1)

-- The graph one op per node, as drawn on the slide.
local nodes = {}
local function node(label, t)
  t:retain_grad()
  nodes[#nodes + 1] = {label, t}
  return t
end
local w0x0 = node("w0 * x0", w0 * x0)
local w1x1 = node("w1 * x1", w1 * x1)
local s = node("w0*x0 + w1*x1", w0x0 + w1x1)
local z = node("... + w2", s + w2)
local neg = node("* -1", -z)
local e = node("exp", neg:exp())
local d = node("+ 1", e + 1)
f = node("1 / x", 1 / d)

f:backward()   -- upstream gradient 1

print(("f(w, x) = %.4f"):format(f:item()))
print()
print(("%-16s %10s %10s"):format("node", "value", "gradient"))
for _, entry in ipairs(nodes) do
  print(("%-16s %10.4f %10.4f"):format(entry[1], entry[2]:item(), entry[2].grad:item()))
end
print()
for _, name in ipairs({"w0", "x0", "w1", "x1", "w2"}) do
  print(("df/d%s = %7.4f"):format(name, _G[name].grad:item()))
end

-- The sigmoid shortcut: df/dz = f (1 - f).
local shortcut = f:item() * (1 - f:item())
print(("\nsigmoid shortcut: df/dz = f(1-f) = %.4f"):format(shortcut))
assert(math.abs(shortcut - z.grad:item()) < 1e-12)
