-- The script's names for its tensors (engine/core/node_names.h, lua_bindings/lua_names.cpp): what
-- torch.graph's records, :graph, DOT and the debugger show. Variables (globals and the running
-- frames' locals), modules' parameters by their PyTorch paths, fields of plain tables; the best
-- kind of name wins (module path, then variable, then field), then the first seen.
local check = dofile((arg[0]:match("^(.*[/\\])") or "") .. "check.lua")

local function names_of(t)
  local names = {}
  for _, r in ipairs(torch.graph(t)) do names[r.id] = r.name end
  return names
end

-- locals of the main chunk, and a global
torch.manual_seed(0)
local x = torch.randn(3, 4)
W = torch.randn(5, 4, {requires_grad = true})
local h = torch.mm(W, x:t())
local out = h:tanh():sum()
local names = names_of(out)
check.equal(names[x.node], "x")
check.equal(names[W.node], "W")
check.equal(names[h.node], "h")
check.equal(names[out.node], "out")

-- locals of a function that is running now, and of the frames that called it
local function inner(a)
  local doubled = a * 2
  local n = names_of(doubled:sum())
  check.equal(n[doubled.node], "doubled")
  -- the caller's variable, not the helper's parameter: outer frames are looked at first
  check.equal(n[a.node], "x")
  return n
end
inner(x)

-- a module's parameters by PyTorch's keys, under the variable holding the module
model = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2))
local y = model(x):sum()
names = names_of(y)
check.equal(names[model[1].weight.node], "model.0.weight")
check.equal(names[model[1].bias.node], "model.0.bias")
check.equal(names[model[3].weight.node], "model.2.weight")

-- named children: model.fc1.weight; a module path beats a variable holding the same tensor
local Net = nn.Module:extend("Net")
function Net:init() self.fc1 = nn.Linear(4, 2) end
function Net:forward(v) return self.fc1(v) end
local net = Net()
local w_alias = net.fc1.weight
local z = net(x):sum()
names = names_of(z)
check.equal(names[net.fc1.weight.node], "net.fc1.weight")
check.equal(names[net.fc1.bias.node], "net.fc1.bias")
assert(w_alias)

-- a module seen first by a callback of apply() while the model was being built ("module.weight",
-- the callback's parameter) is named by the model's path once a variable holds the model: the
-- longer module path goes through the module holding the other
local Outer = nn.Module:extend("Outer")
function Outer:init()
  self.body = nn.Sequential(nn.Linear(4, 2))
  self:apply(function(module)
    if getmetatable(module).__name == "Linear" then names_of(module.weight:sum()) end
  end)
end
local outer = Outer()
names = names_of(outer.body[1].weight:sum())
check.equal(names[outer.body[1].weight.node], "outer.body.0.weight")

-- fields of plain tables; keys starting with '_' are skipped
local cache = {state = {h = torch.ones(2)}, _private = torch.zeros(2), list = {torch.ones(1)}}
local s = (cache.state.h + cache._private + 1):sum()
names = names_of(s)
check.equal(names[cache.state.h.node], "cache.state.h")
check.equal(names[cache._private.node], nil)

-- what no variable holds any more is named by the line that assigned it: the last node recorded
-- at `local pre = a * 3` is pre, though the function returned
local function cell(a)
  local pre = a * 3
  local p1, p2 = (pre * 5):sum(), 1
  return pre:tanh() + p2
end
local r = cell(x)
local records = torch.graph(r)
local by_id = {}
for _, rec in ipairs(records) do by_id[rec.id] = rec end
local tanh_id = by_id[r.node].inputs[1]
local pre_id = by_id[tanh_id].inputs[1]
check.equal(by_id[pre_id].op, "mul_scalar")
check.equal(by_id[pre_id].name, "pre")
check.equal(by_id[r.node].name, "r")
-- a multiple assignment names nothing: the sum of `local p1, p2 = ...` is not p1
for _, rec in ipairs(torch.tape()) do
  if rec.op == "sum" and rec.inputs[1] ~= nil and by_id[pre_id] and rec.name == "p1" then error("p1 named from a multiple assignment") end
end

-- :graph's name column and DOT show the names too
local dir = os.getenv("TMPDIR") or "/tmp"
local dot = dir .. "/test_names_" .. tostring(os.time()) .. ".dot"
torch.graphviz(out, dot)
local text = io.open(dot):read("a")
os.remove(dot)
assert(text:find("\\nW\\n", 1, true) or text:find("\\nW\"", 1, true), "DOT names W: " .. text)
assert(text:find("\\nout", 1, true), "DOT names out")
print("test_names: ok")
