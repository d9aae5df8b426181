-- The debugger inside a frozen call: with a breakpoint set, a frozen call replays its recording
-- node by node and announces each backward group, so the stops (forward ops, backward groups, their
-- gradients) are those of the eager function, and backward nodes name their group's forward node.
local check = dofile((arg[0]:match("^(.*[/\\])") or "") .. "check.lua")

torch.manual_seed(0)
local x, y = torch.randn(4, 5), torch.randn(4, 2)
w1 = torch.randn(5, 3, {requires_grad = true})
w2 = torch.randn(3, 2, {requires_grad = true})
local function train_step(x, y)
  local h = x:mm(w1):tanh()
  local loss = (h:mm(w2) - y):pow(2):sum()
  loss:backward()
  return loss
end
local f = torch.freeze{train_step, x, y, name = "f"}

-- Every node and group stop of one run, stepping with :step from a pause.
local function stops_of(run)
  local seen = {}
  dbg.on_stop(function(stop)
    if stop.stop.kind ~= "line" then
      local entry = {kind = stop.stop.kind, phase = stop.stop.phase, op = stop.node.op, where = stop.node.where,
                     out = stop.out and stop.out:clone()}
      if stop.stop.kind == "group" then
        entry.grad_in = stop.grad_output:clone()
        entry.grad_out = {}
        for i = 1, #stop.inputs do entry.grad_out[i] = stop.grad_input[i] and stop.grad_input[i]:clone() or false end
      end
      seen[#seen + 1] = entry
    end
    dbg.step()
  end)
  w1.grad, w2.grad = nil, nil
  dbg.pause()
  run()
  dbg.continue()
  dbg.on_stop(nil)
  return seen
end

local function describe(stops)
  local lines = {}
  for _, s in ipairs(stops) do lines[#lines + 1] = s.kind .. " " .. s.phase .. " " .. s.op .. " " .. tostring(s.where) end
  return table.concat(lines, "\n")
end

local eager = stops_of(function() train_step(x, y) end)
local frozen = stops_of(function() f(x, y) end)
-- :step through a frozen call stops where the eager call stops: the same forward ops and backward
-- groups, in the same order, with the same results and gradients (the plan's answers are eager's).
check.equal(describe(frozen), describe(eager), "a frozen call's stops are the eager call's")
check.equal(#frozen, 12, "6 forward ops and 6 backward groups")
for i, want in ipairs(eager) do
  local got = frozen[i]
  if want.out then check.close(got.out, want.out, 0, "stop " .. i .. " out") end
  if want.kind == "group" then
    check.close(got.grad_in, want.grad_in, 0, "stop " .. i .. " grad_in")
    for k, g in ipairs(want.grad_out) do
      if g then check.close(got.grad_out[k], g, 0, "stop " .. i .. " grad_out[" .. k .. "]")
      else check.equal(got.grad_out[k], false, "stop " .. i .. " grad_out[" .. k .. "] is nil in both") end
    end
  end
end

-- A backward op breakpoint stops at the group of each forward mm (per group, as in eager), and the
-- backward nodes of the group name it as their group.
local hits = {}
local bp = dbg.break_on{op = "mm", phase = "bwd", action = function(stop)
  local backward_ids = {}
  hits[#hits + 1] = {forward = stop.node.id, line = stop.node.line, banner = dbg.banner()}
end}
w1.grad, w2.grad = nil, nil
local loss = f(x, y)
dbg.delete(bp)
check.equal(#hits, 2, "two forward mm: two backward groups")
check.equal(hits[1].line, 12, "the second mm's group first (backward runs in reverse)")
check.equal(hits[2].line, 11)
for _, hit in ipairs(hits) do
  assert(hit.banner:match("grad of [^\n]-#" .. hit.forward .. " mm"), hit.banner)   -- "grad of h @ w2 (#21 mm)"
  assert(hit.banner:find("frozen    f: backward group of recorded #", 1, true), hit.banner)
  assert(not hit.banner:find("grad of #0", 1, true), hit.banner)
end

-- A condition on backward nodes stops at one node of a group, which names its forward node.
local seen_group
bp = dbg.break_on{phase = "bwd", when = "absmax > 0", action = function(stop)
  if seen_group then return end
  seen_group = stop.group
  assert(dbg.banner():find("grad of #" .. stop.group.id .. " " .. stop.group.op, 1, true), dbg.banner())
end}
w1.grad, w2.grad = nil, nil
f(x, y)
dbg.delete(bp)
assert(seen_group and seen_group.op == "sum", "the first backward node is sum's (the seed's group)")

-- :break node N takes the recorded id (the one :plan lists): the replayed node of that step stops.
local plan_text = f:plan()
local tanh_id = tonumber(plan_text:match("#(%d+) = tanh%("))
assert(tanh_id, plan_text)
local stopped_at
bp = dbg.break_on{node = tanh_id, phase = "fwd", action = function(stop)
  stopped_at = stop.node.op
  assert(dbg.banner():find("recorded #" .. tanh_id, 1, true), dbg.banner())
end}
f(x, y)
dbg.delete(bp)
check.equal(stopped_at, "tanh", "node breakpoint by recorded id")

-- Without a breakpoint the plan runs its compiled steps again (no stop, same answers).
w1.grad, w2.grad = nil, nil
local fast = f(x, y)
w1.grad, w2.grad = nil, nil
local eager_loss = train_step(x, y)
check.close(fast, eager_loss, 0)

-- A plan loaded from a file: its backward nodes name their forward node too (the file keeps each
-- step's recorded group); it has no group stops (the file keeps no groups), see debugger.md.
local path = os.tmpname() .. ".tdp"
torch.save_plan(f, path)
local g = torch.load_plan(path)
os.remove(path)
local groups_named, backward_nodes = 0, 0
bp = dbg.break_on{phase = "bwd", when = "absmax > -1", action = function(stop)
  backward_nodes = backward_nodes + 1
  if stop.group then groups_named = groups_named + 1 end
  assert(not dbg.banner():find("grad of #0", 1, true), dbg.banner())
end}
g(x, y)
dbg.delete(bp)
assert(backward_nodes > 0)
check.equal(groups_named, backward_nodes, "every backward node of a loaded plan names its forward node")

-- A loaded plan has no Lua function: it cannot be made to run eagerly.
local ok, message = pcall(function() g.eager = true end)
assert(not ok and message:find("no Lua function to run eagerly", 1, true), message)
check.equal(g.eager, false)

-- fwd/bwd FILE:LINE: after the ops of a line, or at their backward groups, inside the frozen call.
local line_stops = {}
bp = dbg.break_on{line = "test_freeze_debugger.lua:11", phase = "bwd", action = function(stop)
  line_stops[#line_stops + 1] = stop.stop.kind .. " " .. stop.node.op
end}
w1.grad, w2.grad = nil, nil
f(x, y)
dbg.delete(bp)
check.equal(table.concat(line_stops, ", "), "group tanh, group mm", "line 11's groups, in backward order")
line_stops = {}
bp = dbg.break_on{line = "test_freeze_debugger.lua:12", phase = "fwd", action = function(stop)
  line_stops[#line_stops + 1] = stop.node.op
end}
f(x, y)
dbg.delete(bp)
check.equal(table.concat(line_stops, ", "), "mm, sub, pow, sum", "line 12's forward ops")
