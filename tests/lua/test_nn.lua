-- nn: modules, parameters in registration order, Linear against values computed by hand.
local check = dofile((arg[0]:match("^(.*[/\\])") or "") .. "check.lua")

-- Linear with fixed weights: y = x wᵀ + b.
local linear = nn.Linear(2, 3, {dtype = "float64"})
torch.no_grad(function()
  linear.weight:copy_(torch.tensor({{1, 2}, {3, 4}, {5, 6}}, {dtype = "float64"}))
  linear.bias:copy_(torch.tensor({0.1, 0.2, 0.3}, {dtype = "float64"}))
end)
local x = torch.tensor({{1, -1}, {2, 0.5}}, {dtype = "float64"})
local y = linear(x)
check.close(y, {{-0.9, -0.8, -0.7}, {3.1, 8.2, 13.3}}, 1e-12)
y:sum():backward()
check.close(linear.weight.grad, {{3, -0.5}, {3, -0.5}, {3, -0.5}}, 1e-12)   -- column sums of x
check.close(linear.bias.grad, {2, 2, 2}, 1e-12)
assert(tostring(linear) == "Linear(in_features=2, out_features=3, bias=true)", tostring(linear))

-- PyTorch's default init: uniform in [-1/sqrt(in), 1/sqrt(in)].
torch.manual_seed(1)
local big = nn.Linear(400, 50)
local bound = 1 / math.sqrt(400)
assert(big.weight:max():item() <= bound and (-big.weight):max():item() <= bound)
assert(big.weight:max():item() > 0.9 * bound, "the init fills its range")
assert(big.weight.requires_grad and big.weight.is_leaf and big.weight.dtype == "float32")
assert(nn.Linear(3, 2, {bias = false}).bias == nil)

-- A user module: parameters in the order init assigned them (not pairs() order), children first.
local Net = nn.Module:extend("Net")
function Net:init()
  self.zeta = nn.Linear(2, 2)
  self.alpha = nn.Linear(2, 3)
  self.scale = nn.Parameter(torch.ones(1))
  self.config = {note = "plain values are not parameters"}
  self.steps = 0
  self.blocks = {nn.Linear(3, 3), nn.Linear(3, 1)}
end
function Net:forward(input)
  local h = self.alpha(self.zeta(input)):relu() * self.scale
  for _, block in ipairs(self.blocks) do h = block(h) end
  return h
end
local net = Net()
local names = {}
for _, pair in ipairs(net:named_parameters()) do names[#names + 1] = pair[1] end
check.equal(table.concat(names, " "),
            "zeta.weight zeta.bias alpha.weight alpha.bias scale blocks.1.weight blocks.1.bias blocks.2.weight blocks.2.bias")
assert(#net:parameters() == 9 and #net:children() == 4)
local out = net(torch.ones(4, 2))
check.shape(out, {4, 1})
out:sum():backward()
for _, p in ipairs(net:parameters()) do assert(p.grad, "every parameter got a gradient") end
net:zero_grad()
for _, p in ipairs(net:parameters()) do assert(p.grad == nil, "zero_grad drops gradients") end
net:eval()
assert(net.training == false and net.zeta.training == false and net.blocks[1].training == false)
net:train()
assert(net.training and net.alpha.training)

-- A subclass of a user class runs its parent's init when it asks.
local Wider = Net:extend("Wider")
function Wider:init() Net.init(self); self.extra = nn.Linear(1, 1) end
assert(#Wider():parameters() == 11)

-- Sequential, activations and printing.
local seq = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2), nn.Tanh(), nn.Sigmoid())
check.shape(seq(torch.ones(5, 4)), {5, 2})
check.equal(tostring(seq), [[Sequential(
  (1): Linear(in_features=4, out_features=3, bias=true)
  (2): ReLU()
  (3): Linear(in_features=3, out_features=2, bias=true)
  (4): Tanh()
  (5): Sigmoid()
)]])
assert(#seq:parameters() == 4)
local shared = nn.Linear(2, 2)
assert(#nn.Sequential(shared, shared):parameters() == 2, "a module used twice counts once")

-- Errors say what is wrong.
local ok, message = pcall(nn.Sequential, nn.ReLU(), 3)
assert(not ok and message:find("Sequential: argument 2 is not a module", 1, true), message)
local NoForward = nn.Module:extend("NoForward")
ok, message = pcall(function() return NoForward()(torch.ones(1)) end)
assert(not ok and message:find("NoForward: forward is not defined", 1, true), message)
-- An op error inside a library module names the user's line, not nn.lua's.
check.fails("linear", "does not match weight [3,2]", function() nn.Linear(2, 3)(torch.ones(4, 5)) end)

-- Every node records the module call that made it: nested scopes named field:Class.
do
  local model = nn.Sequential(nn.Linear(3, 2), nn.ReLU())
  local out = model(torch.ones(1, 3)):sum()
  local scope_of = {}
  for _, n in ipairs(torch.graph(out)) do scope_of[n.op] = n.scope end
  check.equal(scope_of.mm, "Sequential/1:Linear")
  check.equal(scope_of.relu, "Sequential/2:ReLU")
  check.equal(scope_of.sum, "")
  -- an error inside a module leaves the scope too
  pcall(model, torch.ones(1, 5))
  check.equal(torch.graph(torch.ones(1) * 2)[2].scope, "")
end

-- F is nn.functional, PyTorch's names for the torch functions.
assert(F == nn.functional and F.relu == torch.relu and F.linear == torch.linear)
assert(require("nn") == nn and require("optim") == optim)

print("test_nn: ok")
