-- view_gradient_tab.lua: the Tensor window's Gradient tab for every node, not only leaves. After
-- backward, a non-leaf shows the gradient that arrived at it (PyTorch's grad_output of the node)
-- and where it came from; at a backward stop of that node, the one of the stop's pass. The
-- numbers are checked against the closed forms (d sum(tanh(a))/da = 1 - tanh(a)^2). And the
-- Value tab's std is the unbiased one, as torch.std and :inspect.
local check = dofile(arg[1] .. "/viewer_check.lua")
check.start()

local function gradient_tab(t)
  viewer.select(t.node)
  viewer.tab("gradient")
  viewer.frame(2)
  local shown = viewer.inspect()
  assert(shown.node == t.node and shown.tab == "gradient", "the Gradient tab of #" .. t.node .. " is shown")
  return shown.gradient
end

local function close(a, b) return math.abs(a - b) <= 1e-5 * math.max(1, math.abs(b)) end

-- std as PyTorch: [1, 2, 3] gives 1 (the window used to say 0.816).
local t = torch.tensor({1, 2, 3})
viewer.select(t.node)
viewer.tab("value")
viewer.frame(2)
assert(viewer.inspect().std == 1, "the Value tab's std of [1, 2, 3] is 1, got " .. viewer.inspect().std)

torch.manual_seed(0)
W_h = torch.randn(20, 20, {requires_grad = true})
W_x = torch.randn(20, 10, {requires_grad = true})
x, prev_h = torch.randn(1, 10), torch.randn(1, 20)
h2h = torch.mm(W_h, prev_h:t())
i2h = torch.mm(W_x, x:t())
pre = h2h + i2h
next_h = pre:tanh()
loss = next_h:sum()

-- Before backward: a clear note, no gradient.
local g = gradient_tab(next_h)
assert(g.note and g.note:find("No gradient", 1, true), "before backward the tab says there is no gradient")

loss:backward{retain_graph = true}   -- loss2 below goes through next_h's tanh again
-- next_h (a non-leaf): ones, sent by sum's backward.
g = gradient_tab(next_h)
print("next_h: " .. tostring(g.source or g.note))
assert(g.source, "after backward a non-leaf shows its gradient, not: " .. tostring(g.note))
assert(g.count == 20 and g.mean == 1 and g.min == 1 and g.max == 1, "d loss/d next_h is all ones")
assert(g.source:find("backward of #" .. loss.node .. " sum", 1, true), "it says it came from sum's backward")
local first_pass = tonumber(g.source:match("backward pass (%d+)"))
assert(first_pass, "it names the backward pass")
-- pre (the tanh's input): 1 - next_h^2, sent by tanh's backward.
g = gradient_tab(pre)
print("pre: " .. tostring(g.source or g.note))
local expected = (1 - next_h:detach():pow(2))
assert(g.source and g.source:find("backward of #" .. next_h.node .. " tanh", 1, true), "pre's came from tanh's backward")
assert(close(g.mean, expected:mean():item()) and close(g.norm, expected:norm():item()), "pre's gradient is 1 - tanh^2")
-- h2h (mm's output): the same gradient, passed on by add.
g = gradient_tab(h2h)
assert(g.source and close(g.sum, expected:sum():item()), "h2h's gradient is add's pass-through of pre's")
-- A leaf: its .grad, and where the last pass's came from.
g = gradient_tab(W_h)
assert(g.source and g.source:find("^%.grad"), "a leaf shows its .grad")
assert(close(g.norm, W_h.grad:norm():item()), "... with the .grad's values")
-- Data has no gradient.
g = gradient_tab(x)
assert(g.note and g.note:find("requires grad", 1, true), "data: nothing that made it requires grad")

-- A second pass, stopped in the backward of tanh: next_h's tab shows the gradient of this pass;
-- pre, not reached yet, still the one of the first pass.
local stops = 0
local at_stop, pre_at_stop
local brk = dbg.break_on{op = "tanh", phase = "bwd"}
dbg.on_stop(function(stop)
  stops = stops + 1
  assert(stop.node.id == next_h.node, "the stop is in tanh's backward")
  at_stop = gradient_tab(next_h)
  pre_at_stop = gradient_tab(pre)
  dbg.continue()
end)
local loss2 = (next_h * 3):sum()
loss2:backward{retain_graph = true}   -- total below goes through it too
dbg.on_stop(nil)
dbg.delete(brk)
assert(stops == 1, "one stop")
print("at the stop, next_h: " .. tostring(at_stop.source or at_stop.note))
print("at the stop, pre: " .. tostring(pre_at_stop.source or pre_at_stop.note))
assert(at_stop.source, "at a backward stop of tanh, its node shows the gradient that arrived: " .. tostring(at_stop.note))
local stop_pass = tonumber(at_stop.source:match("backward pass (%d+)"))
assert(stop_pass and stop_pass > first_pass, "... of the stopped pass")
assert(at_stop.mean == 3 and at_stop.count == 20, "d (3 sum next_h)/d next_h is all threes")
assert(pre_at_stop.source and tonumber(pre_at_stop.source:match("backward pass (%d+)")) == first_pass,
       "a node the stopped pass has not reached shows the previous pass's gradient")
-- After the pass: pre's is the new one, 3 (1 - tanh^2).
g = gradient_tab(pre)
assert(tonumber(g.source:match("backward pass (%d+)")) == stop_pass and close(g.mean, 3 * expected:mean():item()),
       "after the second pass, pre shows its gradient")

-- next_h used twice, stopped in the backward of the first use (ids go down: exp's is visited
-- first): its gradient is half summed, and the tab says so, naming the part that came.
local doubled, grown = next_h * 2, next_h:exp()
local partial
brk = dbg.break_on{op = "mul_scalar", phase = "bwd"}
dbg.on_stop(function(stop)
  if stop.node.id == doubled.node then partial = gradient_tab(next_h) end
  dbg.continue()
end)
local total = (doubled + grown):sum()
total:backward()
dbg.on_stop(nil)
dbg.delete(brk)
print("half summed, next_h: " .. tostring(partial and (partial.note or partial.source)))
assert(partial and partial.note and partial.note:find("not reached this node yet", 1, true) and
       partial.note:find("backward of #" .. grown.node .. " exp", 1, true), "a half-summed gradient is shown as such")
g = gradient_tab(next_h)
assert(g.source and g.source:find(" + ", 1, true), "after the pass, next_h's gradient names both uses")
assert(close(g.mean, (next_h:detach():exp() + 2):mean():item()), "... and is their sum")
check.shot("gradient_tab.png")
print("ok")
