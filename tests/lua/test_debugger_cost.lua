-- What the debugger costs while nothing can stop (target: attached with no breakpoint, <= 5% at
-- T = 5,000): it subscribes to no engine hook event and sets no Lua hook, however it got there
-- (attached as tapedeck runs every script, a breakpoint set then deleted or disabled, detached and
-- attached again), so exec_node's one test is all a node pays. dbg.hooks() says what it holds.
local check = dofile((arg[0]:match("^(.*[/\\])") or "") .. "check.lua")

local function assert_costs_nothing(how)
  local hooks = dbg.hooks()
  check.equal(#hooks.events, 0, how .. ": no engine hook events")
  check.equal(hooks.lua_hook, false, how .. ": no Lua line hook")
  check.equal(hooks.engine_observed, false, how .. ": the engine has no observer that wants an event")
end

-- The issue's RNN unroll, a few steps, forward and backward.
local function unroll(steps)
  local W_h = (torch.randn(20, 20) * 0.1):requires_grad_(true)
  local W_x = torch.randn(20, 10, {requires_grad = true})
  local xs, h = torch.randn(steps, 10), torch.zeros(1, 20)
  for t = 1, steps do h = (torch.mm(W_h, h:t()) + torch.mm(W_x, xs:narrow(1, t, 1):t())):tanh():t() end
  h:sum():backward()
  return W_h.grad
end

assert(dbg.attached(), "scripts run with the debugger attached")
assert_costs_nothing("attached, no breakpoint")
unroll(5)
assert_costs_nothing("after a forward and backward pass")

-- A breakpoint subscribes to the events it needs (and only while it can stop) ...
local fwd = dbg.break_on{op = "tanh", phase = "fwd", action = function() end}
check.equal(table.concat(dbg.hooks().events, ","), "after", "a forward op breakpoint: node events")
check.equal(dbg.hooks().engine_observed, true, "a forward op breakpoint: the engine calls the debugger")
local bwd = dbg.break_on{op = "mm", phase = "bwd", action = function() end}
check.equal(table.concat(dbg.hooks().events, ","), "after,group_done", "and a backward one: group events")
local line = dbg.break_on{file = arg[0], line = 17}
check.equal(dbg.hooks().lua_hook, true, "a line breakpoint: a Lua line hook")

-- ... and lets go of them when deleted or disabled.
dbg.disable(fwd)
check.equal(table.concat(dbg.hooks().events, ","), "group_done", "the forward breakpoint disabled")
dbg.delete(fwd)
dbg.delete(bwd)
dbg.delete(line)
assert_costs_nothing("breakpoints deleted")
local stops = 0
local again = dbg.break_on{op = "tanh", phase = "bwd", action = function() stops = stops + 1 end}
unroll(3)
check.equal(stops, 3, "the breakpoint stopped at each step's tanh gradient")
dbg.disable(again)
assert_costs_nothing("breakpoint disabled")
unroll(3)
check.equal(stops, 3, "a disabled breakpoint stops nothing")
dbg.delete(again)

-- Detached and attached again: still nothing.
dbg.detach()
assert_costs_nothing("detached")
dbg.attach()
assert(dbg.attached())
assert_costs_nothing("attached again")

-- A pending pause wants every node until it is cancelled (one line: it would stop at the next one).
local paused; dbg.pause(); paused = dbg.hooks(); dbg.continue()
check.equal(table.concat(paused.events, ","), "after,group_done", "a pause wants the next node")
check.equal(paused.lua_hook, true, "... and the next Lua line")
assert_costs_nothing("pause cancelled")
print("test_debugger_cost: ok")
