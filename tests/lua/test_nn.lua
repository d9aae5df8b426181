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
check.equal(tostring(linear), "Linear(in_features=2, out_features=3, bias=True)")

-- PyTorch's default init: uniform in [-1/sqrt(in), 1/sqrt(in)].
torch.manual_seed(1)
local big = nn.Linear(400, 50)
local bound = 1 / math.sqrt(400)
assert(big.weight:max():item() <= bound and (-big.weight):max():item() <= bound)
assert(big.weight:max():item() > 0.9 * bound, "the init fills its range")
assert(big.weight.requires_grad and big.weight.is_leaf and big.weight.dtype == "float32")
assert(nn.Linear(3, 2, {bias = false}).bias == nil)

-- A user module: parameters in the order init assigned them (not pairs() order): as PyTorch, a
-- module's own parameters first, then its children's; a plain list's items named from 0.
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
            "scale zeta.weight zeta.bias alpha.weight alpha.bias blocks.0.weight blocks.0.bias blocks.1.weight blocks.1.bias")
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
  (0): Linear(in_features=4, out_features=3, bias=True)
  (1): ReLU()
  (2): Linear(in_features=3, out_features=2, bias=True)
  (3): Tanh()
  (4): Sigmoid()
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
  check.equal(scope_of.mm, "Sequential/0:Linear")   -- the names state_dict keys use
  check.equal(scope_of.relu, "Sequential/1:ReLU")
  check.equal(scope_of.sum, "")
  -- an error inside a module leaves the scope too
  pcall(model, torch.ones(1, 5))
  check.equal(torch.graph(torch.ones(1) * 2)[2].scope, "")
end

-- F is nn.functional, PyTorch's names for the torch functions (the same bindings, registered under
-- F so that their errors say F.relu).
assert(F == nn.functional)
local v = torch.tensor({-1, 2})
check.close(F.relu(v), torch.relu(v), 0, "F.relu is torch.relu")
check.close(F.linear(v, torch.ones(1, 2)), torch.linear(v, torch.ones(1, 2)), 0, "F.linear is torch.linear")
assert(require("nn") == nn and require("optim") == optim)

-- Module behaviour (values against PyTorch: test_nn_modules.lua).
do
  torch.manual_seed(7)
  local a = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.ReLU(), nn.Linear(4, 2))
  torch.manual_seed(7)
  local b = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.ReLU(), nn.Linear(4, 2))
  check.close(a[4].weight, b[4].weight, 0, "manual_seed makes the init reproducible")
  assert(a[1].weight.is_leaf and a[1].weight.grad_fn == nil, "parameters are leaves with no history")
  -- buffers are state, not parameters
  check.equal(#a:parameters(), 6)
  local buffer_names = {}
  for i, pair in ipairs(a:named_buffers()) do buffer_names[i] = pair[1] end
  check.equal(table.concat(buffer_names, " "), "1.running_mean 1.running_var 1.num_batches_tracked")
  check.equal(#a:buffers(), 3)
  check.equal(a:num_parameters(), 3 * 4 + 4 + 4 + 4 + 4 * 2 + 2)
  check.equal(#a:modules(), 5); check.equal(a:named_modules()[3][1], "1")
  check.equal(a:named_children()[4][1], "3"); check.equal(a[4], a:children()[4], "model[4] is the child named 3")
  -- state_dict: detached, sharing storage
  local sd = a:state_dict()
  check.equal(sd["3.bias"].requires_grad, false)
  torch.no_grad(function() a[4].bias:fill_(0.5) end)
  check.close(sd["3.bias"], {0.5, 0.5}, 0, "the state_dict shares the parameters' storage")
  -- load_state_dict copies in place, converting the dtype as copy_ does
  local source = b:double():state_dict()
  check.equal(source["0.weight"].dtype, "float64")
  local result = a:load_state_dict(source)
  check.equal(#result.missing_keys + #result.unexpected_keys, 0)
  check.close(a[4].bias, b[4].bias, 1e-7); check.equal(a[4].bias.dtype, "float32")
  check.equal(a[2].num_batches_tracked.dtype, "int64", "double() leaves int64 buffers alone")
  check.equal(b[2].running_var.dtype, "float64", "double() converts buffers")
  -- strict errors list every problem at once; strict = false returns the key lists
  local bad = {["0.weight"] = torch.zeros(2, 2), extra = torch.zeros(1)}
  local message = check.fails("load_state_dict", "unexpected keys: \"extra\"", function() a:load_state_dict(bad) end)
  assert(message:find('missing keys: "0.bias", "1.weight"', 1, true) and message:find("size mismatch for 0.weight: [2,2] in the state_dict, [4,3] in the model", 1, true), message)
  check.fails("load_state_dict", "size mismatch for 0.weight", function() a:load_state_dict(bad, {strict = false}) end)
  local partial = a:load_state_dict({["3.bias"] = torch.zeros(2), extra = torch.zeros(1)}, {strict = false})
  check.equal(#partial.missing_keys, 8); check.equal(partial.unexpected_keys[1], "extra")
  check.close(a[4].bias, {0, 0}, 0, "strict = false loads what matches")
  check.fails("m:load_state_dict", "unknown option 'strct'", function() a:load_state_dict(sd, {strct = false}) end)
  -- freezing: requires_grad_(false) keeps them parameters
  a[1]:requires_grad_(false)
  check.equal(#a:parameters(), 6); check.equal(a[1].weight.requires_grad, false)
  check.equal(a:num_parameters{only_trainable = true}, 4 + 4 + 4 * 2 + 2)
  a:requires_grad_()
  -- apply visits children before the parent; train/eval recurse
  local visited = {}
  a:apply(function(m) visited[#visited + 1] = getmetatable(m).__name end)
  check.equal(table.concat(visited, " "), "Linear BatchNorm1d ReLU Linear Sequential")
  a:eval(); check.equal(a[2].training, false); a:train(); check.equal(a[2].training, true)
  -- zero_grad(false) zeroes in place, zero_grad() drops
  a(torch.randn(5, 3)):sum():backward()
  a:zero_grad(false); check.close(a[1].weight.grad, torch.zeros(4, 3), 0)
  a:zero_grad(); check.equal(a[1].weight.grad, nil)
  -- dtypes: the option, to(), float(); a shared parameter stays shared
  check.equal(nn.LayerNorm(3, {dtype = "float64"}).weight.dtype, "float64")
  check.equal(nn.Embedding(3, 2, {dtype = torch.double}).weight.dtype, "float64")
  local shared = nn.Linear(2, 2)
  local tied = nn.Sequential(shared, shared):to("float64")
  check.equal(tied[1].weight.dtype, "float64"); check.equal(tied[1].weight, tied[2].weight)
  check.equal(#tied:state_dict()["1.weight"]:size(), 2, "state_dict lists a shared module under both names")
  check.equal(tied:float()[1].bias.dtype, "float32")
  check.equal(tied:to{dtype = "float64"}[1].bias.dtype, "float64")
  check.fails("to", "got \"float16\"", function() tied:to("float16") end)
  check.fails("Linear", "dtype must be \"float32\" or \"float64\", got \"int64\"", function() nn.Linear(2, 2, {dtype = "int64"}) end)
  -- Dropout: identity in eval(), inverted dropout in training
  local drop = nn.Dropout(0.5)
  local ones = torch.ones(1000)
  local kept = drop(ones)
  check.equal(kept:max():item(), 2.0); assert(kept:sum():item() > 800 and kept:sum():item() < 1200)
  drop:eval(); check.equal(drop(ones), ones, "eval(): the input itself")
  -- BatchNorm: wrong ranks are errors naming the module
  check.fails("BatchNorm2d", "expected 4D ([N, C, H, W]) input, got [2,3]", function() nn.BatchNorm2d(3)(torch.ones(2, 3)) end)
  check.fails("ModuleDict", "'train' would hide", function() nn.ModuleDict({train = nn.ReLU()}) end)
  -- ModuleDict and ModuleList
  local d = nn.ModuleDict({b = nn.ReLU(), a = nn.Tanh()})
  check.equal(table.concat(d:keys(), " "), "a b", "a Lua table's keys, sorted"); check.equal(#d, 2)
  check.equal(getmetatable(d.b).__name, "ReLU")
  local list = nn.ModuleList({nn.Linear(1, 1)}):append(nn.Linear(1, 2))
  check.equal(#list, 2); check.equal(list[2].out_features, 2)
  check.equal(list:state_dict()["1.weight"]:size(1), 2)
  -- a buffer registered by a user module
  local Scaled = nn.Module:extend("Scaled")
  function Scaled:init() self.lin = nn.Linear(2, 2); self:register_buffer("scale", torch.ones(2)); self:register_buffer("tmp", torch.ones(1), false) end
  function Scaled:forward(x) return self.lin(x) * self.scale end
  local keys = {}
  for key in pairs(Scaled():double():state_dict()) do keys[#keys + 1] = key end
  check.equal(table.concat(keys, " "), "scale lin.weight lin.bias", "own buffers before children; non-persistent left out")
  check.equal(Scaled():double().scale.dtype, "float64")
end


-- nn.utils.clip_grad_norm_: PyTorch's rule, every gradient times min(1, max_norm / (total + 1e-6))
do
  local a = torch.tensor({3.0}, {requires_grad = true, dtype = "float64"})
  local b = torch.tensor({0.0, 4.0}, {requires_grad = true, dtype = "float64"})
  a.grad = torch.tensor({3.0}, {dtype = "float64"}); b.grad = torch.tensor({0.0, 4.0}, {dtype = "float64"})
  local total = nn.utils.clip_grad_norm_({a, b}, 1.0)
  check.close(total, 5, 1e-12)
  check.close(b.grad, {0, 4 / (5 + 1e-6)}, 1e-12)
  check.close(nn.utils.clip_grad_norm_({a, b}, 10), 1, 1e-5, "already small: unchanged")
  check.close(b.grad, {0, 4 / (5 + 1e-6)}, 1e-12)
  check.close(nn.utils.clip_grad_norm_({a, b}, 0.1, math.huge), 4 / (5 + 1e-6), 1e-12, "inf-norm")
  check.fails("clip_grad_norm_", "max_norm must be a number", function() nn.utils.clip_grad_norm_({a}, "1") end)
end


-- A member given a value of another kind is no longer a member (Lua cannot refuse the assignment,
-- where PyTorch raises): the module still lists, saves, converts and prints (found by the API
-- fuzzer: `M.extra = nn.Linear(2, 2)` then `M.extra = 5` made parameters() index a number).
do
  local m = nn.Sequential(nn.Linear(2, 2))
  m.extra = nn.Linear(2, 2)
  check.equal(#m:parameters(), 4, "a child module's parameters are listed")
  m.extra = 5
  check.equal(#m:parameters(), 2, "a member replaced by a number is not listed")
  local keys = {}
  for k in pairs(m:state_dict()) do keys[#keys + 1] = k end
  check.equal(table.concat(keys, " "), "0.weight 0.bias", "nor saved")
  check.equal(tostring(m), "Sequential(\n  (0): Linear(in_features=2, out_features=2, bias=True)\n)", "nor printed")
  m:double()
  check.equal(m[1].weight.dtype, "float64", "the others convert")
  check.equal(m.extra, 5, "the field keeps what was assigned")
end
print("test_nn: ok")
