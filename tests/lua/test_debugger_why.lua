-- dbg.why (and :why): from a tensor holding NaN or Inf back to the first op that made one from
-- finite values. The five planted cases (tests/repl/why_*.lua: log of 0, sqrt at 0 in
-- backward, exp overflow, 0/0, an Inf weight), each where the NaN surfaces ops later, plus the
-- leaves, an in-place write, a node that is gone, and a 20,000-step chain.
local here = arg[0]:match("^(.*[/\\])") or "./"
local repl = here .. "../repl/"

local function expect(t, fields, what)
  assert(t, what .. ": dbg.why found nothing to explain")
  for k, v in pairs(fields) do
    assert(t[k] == v, string.format("%s: %s is %s, expected %s\n%s", what, k, tostring(t[k]), tostring(v), t.text or ""))
  end
end

-- 1. log of 0, four ops before the NaN loss (0 * -Inf at terms).
dofile(repl .. "why_log0.lua")
local t = dbg.why(loss)
expect(t, {op = "log", kind = "op", phase = "forward", line = 5, name = "logp", node = logp.node}, "log of 0")
assert(t.file:match("why_log0%.lua$"), t.file)
assert(t.reason:find("log of 0 is %-Inf: 2 of 4 elements of p were 0"), t.reason)
assert(t.inputs[1].zeros == 2 and t.inputs[1].nan == 0 and t.inputs[1].count == 4)
assert(t.then_ == nil and t["then"]:find("0 %* Inf is NaN"), t["then"])
assert(#t.path == 6 and t.path[1] == logp.node and t.path[6] == loss.node)
assert(t.text:find("origin    forward logp %(#%d+ log%)"), t.text)
local none, message = dbg.why(p)
assert(none == nil and message:find("has no NaN or Inf: nothing to explain"), message)

-- 2. exp overflow: e^100 is Inf in float32, Inf / Inf is NaN at the division.
dofile(repl .. "why_exp.lua")
t = dbg.why(loss)
expect(t, {op = "exp", kind = "op", line = 3, inf = 1, nan = 0}, "exp overflow")
assert(t.reason:find("e^x overflows float32 for x above 88.72: 1 of 6 elements of scores", 1, true), t.reason)
assert(t["then"]:find("Inf / Inf is NaN", 1, true), t["then"])
-- float64 overflows later: e^100 is finite there, e^710 is not
local big = torch.tensor({1, 710}, {dtype = "float64", requires_grad = true})
t = dbg.why(big:exp():sum())
expect(t, {op = "exp", inf = 1}, "float64 exp")
assert(t.reason:find("float64 for x above 709.8", 1, true), t.reason)

-- 3. 0/0 and x/0 in one division.
local hits = torch.tensor({3, 0, 5, 1}, {requires_grad = true})
local seen = torch.tensor({6, 0, 10, 0})
local rate = hits / seen
t = dbg.why(rate:mean())
expect(t, {op = "div", kind = "op", nan = 1, inf = 1, node = rate.node}, "0/0")
assert(t.reason:find("0/0 is NaN: at 1 of 4 elements both hits and seen were 0", 1, true), t.reason)
assert(t.reason:find("x/0 is Inf: at 1 of 4 elements seen was 0 and hits was not", 1, true), t.reason)
assert(t.inputs[2].zeros == 2)

-- 4. An Inf weight: a parameter written in place (under no_grad), found through mm and the loss.
dofile(repl .. "why_inf_weight.lua")
t = dbg.why(loss)
expect(t, {kind = "written", node = model.weight.node, name = "model.weight", line = 4}, "Inf weight")
assert(t.reason:find("written into it in place after it was made", 1, true), t.reason)
-- a leaf made with an Inf in it, and one made by torch.full
local w = torch.tensor({1, math.huge}, {requires_grad = true})
t = dbg.why((w * 2):sum())
expect(t, {kind = "leaf", op = "tensor", node = w.node}, "Inf leaf")
local f = torch.full({2}, -math.huge, {requires_grad = true})
t = dbg.why(f + 1)
expect(t, {kind = "leaf", op = "full"}, "full leaf")
assert(t.reason:find("torch.full with the value -inf", 1, true), t.reason)

-- 5. sqrt at 0 in backward: the forward pass is finite, the gradient is not. Stopped where the
-- gradient first has an Inf, dbg.why names sqrt's rule; after the pass, from x.grad (NaN, 0 * Inf
-- in mul's gradient), the walk goes back through the backward nodes to the same div.
local at_stop
local id = dbg.break_on{when = "nan", phase = "bwd", action = function(stop) at_stop = at_stop or dbg.why(stop.out) end}
dofile(repl .. "why_sqrt_backward.lua")
dbg.delete(id)
expect(at_stop, {op = "div", phase = "backward", kind = "op", group = norms.node, group_op = "sqrt", line = 5}, "sqrt backward at the stop")
assert(at_stop.because:find("sqrt's gradient grad / (2 sqrt(x)) is infinite where x = 0: 1 of 2 elements", 1, true), at_stop.because)
assert(at_stop.rule == "sqrt: dx = grad / (2 y)", at_stop.rule)
t = dbg.why(x.grad)
expect(t, {op = "div", phase = "backward", group_op = "sqrt", node = at_stop.node}, "sqrt backward from x.grad")
assert(t["then"]:find("0 * Inf is NaN", 1, true), t["then"])

-- Without a breakpoint a script's backward pass frees the gradients once used: the trail ends
-- there, and the gradient rules that are infinite at their inputs are named as suspects.
dofile(repl .. "why_sqrt_backward.lua")
t = dbg.why(x.grad)
assert(t.kind == "freed" or t.kind == "gone", t.text)

-- An in-place op on the graph: the Inf comes from what add_ added, not from what it wrote over.
local base = torch.zeros(3, {requires_grad = true})
local h = base * 1
h:add_(torch.tensor({1, math.huge, 2}))
t = dbg.why(h:sum())
expect(t, {kind = "leaf", op = "tensor"}, "in-place add_")

-- A graph that needs no gradient does not keep its nodes: the trail ends at the one that is gone.
local z
do
  local a = torch.tensor({1, 0, -1})
  z = a:log() * 2
end
collectgarbage(); collectgarbage()
t = dbg.why(z)
expect(t, {kind = "gone", node = z.node}, "gone")
assert(t.reason:find("the node that made it is gone", 1, true), t.reason)

-- A long chain: 20,000 ops after the origin, walked once each.
local start = torch.tensor({1, 2}, {requires_grad = true})
local bad = torch.log(start - 1)
local chain = bad
for _ = 1, 20000 do chain = chain * 1.0 end
t = dbg.why(chain)
expect(t, {op = "log", node = bad.node}, "long chain")
assert(#t.path == 20001, #t.path)

-- Out of range: log and sqrt of negative numbers (the statistics count the negatives), and two
-- origins in one graph: the first recorded is the origin, the other is named on the `also` line.
local neg = torch.tensor({-2, 1, -3}, {requires_grad = true})
t = dbg.why(neg:log())
expect(t, {op = "log", nan = 2}, "log of negatives")
assert(t.reason:find("log of a negative number is NaN: 2 of 3 elements of neg were negative (the lowest -3)", 1, true), t.reason)
assert(t.inputs[1].negatives == 2 and t.inputs[1].zeros == 0, t.text)
local zero = torch.tensor({0, 4}, {requires_grad = true})
local first = torch.log(zero)
local second = torch.sqrt(neg)
t = dbg.why(first:sum() + second:sum())
expect(t, {op = "log", node = first.node}, "two origins")
assert(t.text:find("also      1 more made NaN or Inf from finite values later: second (#" .. second.node .. " sqrt)", 1, true), t.text)

-- Bad arguments are errors naming dbg.why.
local ok, err = pcall(dbg.why, 3)
assert(not ok and err:find("dbg.why: expected a tensor, got a number", 1, true), err)
print("test_debugger_why: ok")
