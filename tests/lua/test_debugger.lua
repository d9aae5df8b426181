-- The debugger from Lua (the `dbg` table): breakpoints with actions and predicates, gradients at
-- backward stops checked against finite differences, stepping through a whole backward pass,
-- edit and continue, NaN/Inf anomalies, delete/disable, and errors as values.
local check = dofile((arg[0]:match("^(.*[/\\])") or "") .. "check.lua")

assert(dbg.attached(), "tapedeck runs scripts with the debugger attached")

-- The RNN cell of scripts/rnn_cell.lua, in float64 so finite differences are accurate.
torch.manual_seed(0)
local f64 = {dtype = "float64"}
local W_h = torch.randn(20, 20, {dtype = "float64", requires_grad = true})
local W_x = torch.randn(20, 10, {dtype = "float64", requires_grad = true})
local x = torch.randn(1, 10, f64)
local prev_h = torch.randn(1, 20, f64)

local function rnn_cell()
  local h2h = torch.mm(W_h, prev_h:t())
  local i2h = torch.mm(W_x, x:t())
  local next_h = (h2h + i2h):tanh()
  return next_h:sum(), h2h, i2h, next_h
end

-- Central difference of f along a fixed random direction, against the gradient's dot product.
local function fd_check(f, at, grad, what)
  local direction = torch.randn(table.unpack(at.shape)):double()
  local eps = 1e-6
  local numeric = torch.no_grad(function()
    return (f(at + direction * eps) - f(at - direction * eps)) / (2 * eps)
  end)
  local analytic = (grad * direction):sum():item()
  check.close(numeric, analytic, 1e-6, what)
end

-- ---------------------------------------------------------------------------------------------
-- Backward stops of sum, tanh, add and mm: grad_input checked against finite differences.
local loss, h2h, i2h = rnn_cell()
local checked = {}
local function record(name) checked[name] = (checked[name] or 0) + 1 end
local ids = {
  dbg.break_on{op = "sum", phase = "bwd", action = function(s)
    fd_check(function(v) return v:sum():item() end, s.inputs[1], s.grad_input[1], "sum")
    record("sum")
  end},
  dbg.break_on{op = "tanh", phase = "bwd", action = function(s)
    assert(s.stop.kind == "group" and s.stop.phase == "backward")
    assert(s.saved.y, "tanh saves its output")
    fd_check(function(v) return v:tanh():sum():item() end, s.inputs[1], s.grad_input[1], "tanh")
    record("tanh")
  end},
  dbg.break_on{op = "add", phase = "bwd", action = function(s)
    fd_check(function(v) return (v + i2h):tanh():sum():item() end, s.inputs[1], s.grad_input[1], "add, input 1")
    fd_check(function(v) return (h2h + v):tanh():sum():item() end, s.inputs[2], s.grad_input[2], "add, input 2")
    record("add")
  end},
  dbg.break_on{op = "mm", phase = "bwd", action = function(s)
    assert(s.grad_input[2] == nil, "the transposed input needs no gradient")
    if s.inputs[1].shape[2] == 20 then   -- W_h · prev_hᵀ
      fd_check(function(v) return (torch.mm(v, prev_h:t()) + i2h):tanh():sum():item() end, s.inputs[1], s.grad_input[1], "mm W_h")
    else                                  -- W_x · xᵀ
      fd_check(function(v) return (h2h + torch.mm(v, x:t())):tanh():sum():item() end, s.inputs[1], s.grad_input[1], "mm W_x")
    end
    record("mm")
  end},
}
loss:backward{retain_graph = true}   -- the passes below go through the same graph again
assert(checked.sum == 1 and checked.tanh == 1 and checked.add == 1 and checked.mm == 2,
       "every group stopped once (mm twice)")
for _, id in ipairs(ids) do assert(dbg.delete(id)) end
assert(#dbg.breaks() == 0)

-- ---------------------------------------------------------------------------------------------
-- Stepping through a whole backward pass node by node: every backward node once, in order, and
-- every group once, from the loss down.
local before = #torch.tape() > 0 and torch.tape()[#torch.tape()].id or 0
local visited, groups = {}, {}
dbg.on_stop(function(s)
  if s.stop.phase ~= "backward" then dbg.continue() return end
  if s.stop.kind == "node" then visited[#visited + 1] = s.node.id else groups[#groups + 1] = s.node.id end
  dbg.stepi()
end)
dbg.pause(); loss:backward{retain_graph = true}
assert(dbg.continue() == false, "not stopped: cancels the step the last stop asked for")
dbg.on_stop(nil)
local expected = {}
for _, n in ipairs(torch.graph(loss)) do
  if n.phase == "backward" and n.id > before then expected[#expected + 1] = n.id end
end
table.sort(expected)
check.close(visited, expected, 0, "backward nodes visited")
local forward_ids = {}
for _, n in ipairs(torch.graph(loss)) do
  if n.phase == "forward" and n.op ~= "randn" and n.op ~= "transpose" then forward_ids[#forward_ids + 1] = n.id end
end
table.sort(forward_ids, function(a, b) return a > b end)
check.close(groups, forward_ids, 0, "groups, from the loss down")

-- ---------------------------------------------------------------------------------------------
-- Edit and continue: doubling the gradient the W_h product sends on doubles W_h.grad; the node
-- says it was edited.
W_h.grad, W_x.grad = nil, nil
loss:backward{retain_graph = true}
local reference_h, reference_x = W_h.grad:clone(), W_x.grad:clone()
W_h.grad, W_x.grad = nil, nil
local edited_node
dbg.break_on{op = "mm", phase = "bwd", once = true, action = function(s)
  s.grad_input[1] = s.grad_input[1] * 2
  edited_node = s.node.id
end}
loss:backward()
check.close(W_x.grad, reference_x * 2, 1e-12, "the edited gradient flowed on")   -- mm of W_x runs first (higher id)
check.close(W_h.grad, reference_h, 1e-12, "the other group is untouched")
assert(#dbg.breaks() == 0, "a once breakpoint is gone after its stop")

-- Editing a forward output: everything after it uses the new value.
dbg.break_on{op = "tanh", phase = "fwd", once = true, action = function(s) s.out = 0.5 end}
local edited_loss = rnn_cell()
check.close(edited_loss, 10, 1e-12, "sum of twenty 0.5s")

-- ---------------------------------------------------------------------------------------------
-- Anomalies: the node where a NaN or Inf first appears, forward or backward, with its line.
local found = {}
local nan_id = dbg.break_on{when = "nan", action = function(s)
  found[#found + 1] = {op = s.node.op, phase = s.stop.phase, line = s.node.line, group = s.group and s.group.op}
end}
local a = torch.tensor({1, -2, 5}, {dtype = "float64", requires_grad = true})
local line_of_log = debug.getinfo(1, "l").currentline + 1
local logged = torch.log(a * 2)
local line_of_sqrt = debug.getinfo(1, "l").currentline + 1
local rooted = torch.sqrt(a - 1)
assert(#found == 2, "log of -4 and sqrt of -3 make the first NaNs")
assert(found[1].op == "log" and found[1].line == line_of_log, "the log, at its line")
assert(found[2].op == "sqrt" and found[2].line == line_of_sqrt)
found = {}
local b = torch.tensor({1, 2, 5}, {dtype = "float64", requires_grad = true})
local root = torch.sqrt(b - 1)
root:sum():backward()
assert(#found == 1 and found[1].phase == "backward", "the Inf of d sqrt(x)/dx at 0 appears in backward")
assert(found[1].group == "sqrt" and found[1].line == debug.getinfo(1, "l").currentline - 3, "named by its forward op and line")
dbg.delete(nan_id)

-- ---------------------------------------------------------------------------------------------
-- Predicates: Lua functions, statistics, and an error inside one (the stop says so, the run goes on).
local hits = 0
local big = dbg.break_on{op = "tanh", phase = "fwd", when = function(t) return t:abs():max():item() > 0.999 end,
                         action = function() hits = hits + 1 end}
rnn_cell()
assert(hits == 1, "the cell's tanh saturates")
dbg.disable(big)
rnn_cell()
assert(hits == 1, "a disabled breakpoint does not stop")
dbg.enable(big)
rnn_cell()
assert(hits == 2)
dbg.delete(big)
local stat_hits = 0
local stat = dbg.break_on{op = "mm", phase = "fwd", when = "absmax > 1e3", action = function() stat_hits = stat_hits + 1 end}
rnn_cell()
assert(stat_hits == 0, "no product is that large")
dbg.delete(stat)
local why
local broken = dbg.break_on{op = "add", phase = "fwd", when = function(t) return t:no_such_method() end,
                            action = function(s) why = s.stop.why end}
rnn_cell()
assert(why and why:find("error in the condition of breakpoint " .. broken, 1, true), why)
assert(why:find("no_such_method", 1, true), why)
dbg.delete(broken)

-- ---------------------------------------------------------------------------------------------
-- Errors are values: bad names suggest the nearest ones; a line with no code; not stopped.
local ok, message = pcall(dbg.break_on, {op = "tahn"})
assert(not ok and message:find("did you mean tanh", 1, true), message)
ok, message = pcall(dbg.break_on, {op = "tanh", phase = "sideways"})
assert(not ok and message:find("phase must be", 1, true), message)
ok, message = pcall(dbg.break_on, {line = arg[0] .. ":1"})
assert(not ok and message:find("no code on line 1", 1, true), message)
ok, message = pcall(dbg.step)
assert(not ok and message:find("not stopped", 1, true), message)
ok, message = pcall(dbg.break_on, {opp = "tanh"})
assert(not ok and message:find("dbg.break_on: unknown option 'opp' (did you mean 'op'?", 1, true), message)
assert(dbg.delete(999) == false)

-- A line breakpoint stops before the line runs, in the frame whose locals the stop sees.
local seen_local
local target_line = debug.getinfo(1, "l").currentline + 3
local line_id = dbg.break_on{line = arg[0] .. ":" .. target_line, action = function(s) seen_local = s.stop.line end}
local marker = 42
local after = marker + 1
assert(seen_local == target_line, "stopped at the line")
dbg.delete(line_id)

-- dbg.inspect: statistics without a prompt.
local stats = dbg.inspect(torch.tensor({1, 2, 3, 0 / 0}))
assert(stats.nan == 1 and stats.count == 3 and stats.min == 1 and stats.max == 3 and stats.mean == 2)
print("debugger tests passed")
