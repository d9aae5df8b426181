-- The recorded graph: torch.graph(t) records (ids, ops, phases, groups, inputs, where = file:line),
-- torch.graphviz(t, file) writing .dot and .svg, torch.tape(), and require "tapedeck".
local check = dofile((arg[0]:match("^(.*[/\\])") or "") .. "check.lua")
torch.autograd.keep_backward_graph(true)   -- checks below read the backward nodes after backward()

-- require "tapedeck" is the global torch
check.equal(require("tapedeck"), torch)
check.equal(require "tapedeck", torch)

-- a small computation, each op on a known line
local function here() return debug.getinfo(2, "l").currentline end
local w = torch.tensor({1, 2}, {requires_grad = true}); local w_line = here()
local t = w:tanh(); local t_line = here()
local loss = (t * 2):sum(); local loss_line = here()

-- the forward graph: one record per node, in id order, each naming the line that made it
local g = torch.graph(loss)
check.equal(#g, 4)
local ops, lines = {}, {}
for i, r in ipairs(g) do
  ops[i] = r.op
  lines[i] = r.line
  check.equal(r.phase, "forward")
  check.equal(r.group, 0)
  assert(r.where:match("test_graph%.lua:" .. r.line .. "$"), r.where)
  if i > 1 then assert(r.id > g[i - 1].id, "records come in id order") end
end
check.equal(table.concat(ops, " "), "tensor tanh mul_scalar sum")
check.equal(table.concat(lines, " "), table.concat({w_line, t_line, loss_line, loss_line}, " "))
check.equal(g[1].id, w.node)
check.equal(g[2].id, t.node)
check.equal(g[4].id, loss.node)
check.equal(#g[1].inputs, 0)
check.equal(g[2].inputs[1], w.node)        -- tanh reads w
check.equal(g[3].inputs[1], t.node)        -- the scalar multiply reads tanh's output
check.equal(g[4].inputs[1], g[3].id)
check.equal(tostring(g[2].shape), "[2]")
check.equal(tostring(g[4].shape), "[]")
check.equal(g[3].attrs, "s=2")
check.equal(type(g[2].math), "string")
assert(tostring(g[2]):find("tanh", 1, true), tostring(g[2]))

-- after backward, the graph also holds the backward nodes, each grouped under the forward
-- node it differentiates
loss:backward()
local gb = torch.graph(loss)
assert(#gb > #g, "backward nodes are recorded")
local by_id = {}
for _, r in ipairs(gb) do by_id[r.id] = r end
local backward_groups = {}
for _, r in ipairs(gb) do
  if r.phase == "backward" then
    assert(r.id > loss.node, "backward nodes come after the forward ones")
    local forward = by_id[r.group]
    assert(forward and forward.phase == "forward", "group names a forward node: " .. tostring(r.group))
    backward_groups[forward.op] = true
  end
end
assert(backward_groups.sum and backward_groups.tanh and backward_groups.mul_scalar, "each forward op has backward nodes")

-- nodes of other computations are not in this graph; torch.tape() lists every live node
local unrelated = torch.ones(3) * 2
for _, r in ipairs(torch.graph(loss)) do assert(r.id ~= unrelated.node) end
local on_tape = false
for _, r in ipairs(torch.tape()) do on_tape = on_tape or r.id == unrelated.node end
assert(on_tape, "torch.tape() holds the unrelated node")

-- graphviz: .dot is written as text, .svg is rendered; both files appear
os.remove("test_graph_out.dot")
os.remove("test_graph_out.svg")
torch.graphviz(loss, "test_graph_out.dot")
local f = assert(io.open("test_graph_out.dot"))
local dot = f:read("a")
f:close()
assert(dot:match("^digraph"), dot:sub(1, 40))
assert(dot:find("tanh", 1, true), "the dot names the ops")
torch.graphviz(loss, "test_graph_out.svg")
f = assert(io.open("test_graph_out.svg"))
local svg = f:read("a")
f:close()
assert(svg:find("<svg", 1, true), "an svg file")
os.remove("test_graph_out.dot")
os.remove("test_graph_out.svg")

-- a file name without a known extension is refused with the op's name and this line
check.fails("graphviz", "needs one of the extensions", function() torch.graphviz(loss, "graph") end)
check.fails("graphviz", "txt", function() torch.graphviz(loss, "graph.txt") end)

-- rendering to a path that cannot be written is an error naming the path
check.fails("graphviz", "/nonexistent-dir/g.svg", function() torch.graphviz(torch.ones(1), "/nonexistent-dir/g.svg") end)

-- History starts: a tensor made under no_grad or by detach() starts a new history. torch.graph
-- and the DOT export stop there: the node is in the graph, what made it is not.
do
  local made = torch.randn(3, 2) * 2 + 1          -- an initialisation chain (autograd on, no grad needed)
  local p = torch.no_grad(function() return made:detach():clone() end):requires_grad_()
  local records = {}
  for _, r in ipairs(torch.tape()) do records[r.id] = r end
  check.equal(records[p.node].history_start, true)        -- cloned under no_grad
  check.equal(records[p.node].is_leaf, true)
  check.equal(records[p.node].requires_grad, true)
  check.equal(records[made.node].history_start, false)    -- an op on data with autograd on is not one
  local out = (p * 3):sum()
  local ids = {}
  for _, r in ipairs(torch.graph(out)) do ids[r.id] = r end
  assert(ids[p.node], "the parameter is in the loss's graph")
  assert(not ids[made.node], "what made the parameter is not")
  check.equal(#torch.graph(out), 3)                        -- p, mul_scalar, sum
  -- detach() in the middle of a computation: its output starts a history too
  local h = (p * 2):detach()
  local d = records[h.node] or {}
  for _, r in ipairs(torch.tape()) do if r.id == h.node then d = r end end
  check.equal(d.op, "detach")
  check.equal(d.history_start, true)
  local later = (h + 1):sum()
  for _, r in ipairs(torch.graph(later)) do
    assert(r.id ~= p.node, "the graph of a detached value does not reach back through detach()")
  end
  -- DOT: the parameter is a parameter-styled box ("parameter", blue), with no edge into it and no
  -- dangling node for what made it
  os.remove("test_graph_param.dot")
  torch.graphviz(out, "test_graph_param.dot")
  local f = assert(io.open("test_graph_param.dot"))
  local dot = f:read("a")
  f:close()
  os.remove("test_graph_param.dot")
  local line = dot:match("\n(  n" .. p.node .. " %[[^\n]*)")
  assert(line, "the parameter's node is in the DOT text")
  assert(line:find("#" .. p.node .. " parameter", 1, true), "labelled as a parameter: " .. line)
  assert(line:find('fillcolor="#c6e2ff"', 1, true), "filled as a parameter: " .. line)
  assert(not dot:find("-> n" .. p.node .. ";", 1, true), "no edge into the parameter")
  assert(not dot:find("plaintext", 1, true), "no dangling node")
end
-- A script that never uses no_grad: the whole computation is its graph (no history starts).
do
  local a = torch.ones(2, 2)
  local b = (a * 2):exp()
  local g = torch.graph(b)
  check.equal(#g, 3)
  for _, r in ipairs(g) do check.equal(r.history_start, false) end
end

print("test_graph: ok")
