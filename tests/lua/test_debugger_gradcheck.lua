-- :gradcheck from Lua (dbg.gradcheck) at backward stops: a correct rule agrees with finite
-- differences (ops of the table, a torch.Function), a wrong torch.Function backward and an edited
-- grad_input do not; the check records nothing on the tape and stops at no breakpoint; a large
-- input is sampled; it refuses where it cannot work (not stopped, forward and node stops).
local here = arg[0]:match("^(.*[/\\])") or ""
local check = dofile(here .. "check.lua")
dofile(here .. "../repl/gradcheck_functions.lua")   -- Cube, BadCube, x, w, loss

local function live_nodes()
  collectgarbage(); collectgarbage()
  return select(2, torch.memory())
end

-- At each group of loss's backward pass: the result, and the tape before and after.
local found, tape_ok = {}, true
local ids = {}
local function check_here(name, opts)
  return function(stop)
    local before = live_nodes()
    found[name] = dbg.gradcheck(opts)
    tape_ok = tape_ok and live_nodes() == before
  end
end
ids[#ids + 1] = dbg.break_on{fn = "BadCube", phase = "bwd", action = check_here("bad")}
ids[#ids + 1] = dbg.break_on{fn = "Cube", phase = "bwd", action = check_here("good")}
ids[#ids + 1] = dbg.break_on{op = "mm", phase = "bwd", action = check_here("mm")}
ids[#ids + 1] = dbg.break_on{op = "sin", phase = "bwd", action = check_here("sin")}
-- a breakpoint the check's own evaluations would hit, were they recorded and watched
local pow_hits = 0
ids[#ids + 1] = dbg.break_on{op = "pow", phase = "fwd", action = function() pow_hits = pow_hits + 1 end}
loss:backward()
check.equal(pow_hits, 0, "no breakpoint stopped inside the checks")
check.equal(tape_ok, true, "live nodes unchanged by each check")

check.equal(found.bad.ok, false, "BadCube's backward is wrong")
check.equal(found.bad.inputs[1].recorded.ok, false, "BadCube: the recorded grad_input")
check.equal(found.bad.inputs[1].rule.ok, false, "BadCube: its rule in float64")
check.equal(found.bad.inputs[1].recorded.dtype, "float32", "the recorded gradient's dtype")
check.equal(found.bad.inputs[1].checked, 6, "every element of x checked")
-- the worst element's values: 3 x (what BadCube says) against 3 x^2 (the derivative) times grad
local worst = found.bad.inputs[1].recorded.worst
local xi = x[worst[1]][worst[2]]:item()
local ratio = found.bad.inputs[1].recorded.analytic / found.bad.inputs[1].recorded.numeric
check.close(ratio, 1 / xi, 1e-4, "analytic / numeric at the worst element is 3x / 3x^2")
for _, name in ipairs{"good", "mm", "sin"} do
  check.equal(found[name].ok, true, name .. ": agrees with finite differences")
end
check.equal(#found.mm.inputs, 2, "mm: both inputs (Cube(x) and w) get a gradient")
check.equal(found.good.inputs[1].rule.max_abs_diff < 1e-8, true, "Cube's rule in float64 is exact to 1e-8")
for _, id in ipairs(ids) do dbg.delete(id) end

-- An edited gradient is a mismatch; a large input is sampled.
torch.manual_seed(2)
local W = torch.randn(300, 200, {requires_grad = true})
local v = torch.randn(200, 1)
local out = W:mm(v):tanh():sum()
local edited, sampled
ids = {dbg.break_on{op = "tanh", phase = "bwd", action = function(stop)
  stop.grad_input[1] = stop.grad_input[1] * 1.01
  edited = dbg.gradcheck()
end}, dbg.break_on{op = "mm", phase = "bwd", action = function() sampled = dbg.gradcheck{max_evaluations = 2000} end}}
out:backward()
check.equal(edited.ok, false, "a gradient edited by 1% is a mismatch")
check.equal(edited.inputs[1].rule.ok, true, "... while the rule itself agrees")
check.equal(sampled.inputs[1].numel, 60000, "W's elements")
local checked = sampled.inputs[1].checked
assert(checked >= 500 and checked <= 1000, "a sample of them within max_evaluations (2 per element) and the work bound: " .. checked)
-- the edited gradient flowed on: it is the mm stop's grad_output, with which mm's rule agrees
check.equal(sampled.ok, true, "mm's rule on the edited grad_output")
for _, id in ipairs(ids) do dbg.delete(id) end

-- Attention's causal softmax (tiny_gpt's att:masked_fill(mask, -inf):softmax(-1)): the masked
-- inputs are -Inf and have no finite difference; they are left out and counted, the rest agree.
local masked
ids = {dbg.break_on{op = "softmax", phase = "bwd", action = function() masked = dbg.gradcheck() end}}
local scores = torch.randn(4, 4, {requires_grad = true})
local causal = torch.ones(4, 4):triu(1)
local att = scores:masked_fill(causal, -math.huge):softmax(-1)
local weighted = att * torch.randn(4, 4)
weighted:sum():backward()
dbg.delete(ids[1])
check.equal(masked.inputs[1].not_finite, 6, "the 6 masked elements above the diagonal are left out")
check.equal(masked.inputs[1].checked, 10, "the other 10 are checked")
check.equal(masked.ok, true, "the masked softmax's rule agrees with finite differences")

-- Where it does not work: an error saying where it does.
local ok, message = pcall(dbg.gradcheck)
check.equal(ok, false, "not stopped")
assert(message:find("not stopped; it works at a backward stop", 1, true), message)
local at_forward, at_node
ids = {dbg.break_on{op = "exp", phase = "fwd", action = function() at_forward = select(2, pcall(dbg.gradcheck)) end}}
local a = torch.randn(3, {requires_grad = true})
local e = a:exp()
dbg.delete(ids[1])
assert(at_forward:find("this is a forward stop", 1, true), at_forward)
dbg.on_stop(function(stop)
  if stop.stop.kind == "node" and stop.stop.phase == "backward" and not at_node then
    at_node = select(2, pcall(dbg.gradcheck))
  end
  dbg.stepi()
end)
dbg.pause(); (e * e):sum():backward()
dbg.continue(); dbg.on_stop(nil)
assert(at_node and at_node:find("this is a node stop", 1, true), tostring(at_node))
check.equal(pcall(dbg.gradcheck, {eps = 0}), false, "eps must be > 0")
print("debugger gradcheck: ok")
