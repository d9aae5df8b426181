-- view_long_tape.lua: the viewer on a tape longer than its window (a 50,000-step graph).
-- The model copies at most the window's nodes (here 400 of ~3,000; by default 2,000 once the tape
-- has more than 50,000), follows the newest as the tape grows, moves to a stop or a selection
-- outside it, and moves with viewer.window, :view window and the Controls' buttons; inputs
-- older than the window are stubs saying so.
local check = dofile(arg[1] .. "/viewer_check.lua")
check.start()
viewer.options{window_above = 1000, window = 400}
check_options = viewer.options()
assert(check_options.window == 400 and check_options.window_above == 1000, "the options are kept")

-- The issue's RNN unroll, 200 steps, forward and backward, with the window open.
torch.manual_seed(0)
W_h = (torch.randn(20, 20) * 0.1):requires_grad_(true)
W_x = torch.randn(20, 10, {requires_grad = true})
xs = torch.randn(200, 10)
hs = {}
local h = torch.zeros(1, 20)
for t = 1, 200 do
  h = (torch.mm(W_h, h:t()) + torch.mm(W_x, xs:narrow(1, t, 1):t())):tanh():t()
  hs[t] = h
end
loss = h:sum()
loss:backward()
viewer.frame(2)

-- At most the window's nodes, and the leaves they read from before it (W_h, W_x, xs).
local function window_holds_at_most(n, what)
  local m = viewer.model()
  assert(m.records <= n + 3, ("%s: the model holds %d records, more than the window's %d + 3 leaves"):format(what, m.records, n))
  for _, b in ipairs(m.boxes) do
    if b.kind == "node" and b.node ~= W_h.node and b.node ~= W_x.node and b.node ~= xs.node then
      assert(b.node >= m.window.first and b.node <= m.window.last,
             ("%s: box %s shows node #%d outside the window #%d..#%d"):format(what, b.key, b.node, m.window.first, m.window.last))
    end
  end
  return m
end

local live = #torch.tape()
assert(live > 2500, "the tape is long: " .. live)
local m = window_holds_at_most(400, "after backward")
assert(m.window.following, "the window follows the newest nodes")
assert(m.window.live == live, "it knows the tape's length")
assert(m.window.last == m.window.newest)
assert(m.records >= 400 and m.records <= 403)
assert(m.box_of[W_h.node], "the parameter W_h, read by the window's nodes, is a box, not a stub")
for _, b in ipairs(m.boxes) do
  assert(not (b.kind == "stub" and b.node < W_h.node), "no stub for what made W_h (its randn is not the loop's)")
end
local stubs = 0
for _, b in ipairs(m.boxes) do if b.kind == "stub" and b.detail == "before the window" then stubs = stubs + 1 end end
assert(stubs > 0, "inputs older than the window are 'before the window' stubs")
check.shot("view_long_tape.png")

-- The Controls' buttons: older, then newest.
local newest_first = m.window.first
viewer.click("< older")
viewer.frame(1)
local w = viewer.window()
assert(not w.following and w.last < m.window.last and w.first < newest_first, "older: half a window back")
window_holds_at_most(400, "older")
viewer.click("newest")
viewer.frame(1)
assert(viewer.window().following, "newest: follows the tape's end again")

-- viewer.window with a tensor: centred on the node, which gets a box once laid out.
w = viewer.window(hs[10])
assert(w.first <= hs[10].node and hs[10].node <= w.last and not w.following, "centred on hs[10]")
assert(viewer.wait_layout(30))
viewer.frame(2)
m = window_holds_at_most(400, "at hs[10]")
assert(m.box_of[hs[10].node], "hs[10] has a box")
-- :view window (the REPL's command, through dbg.command) and its bad input.
dbg.command(":view window newest")
assert(viewer.window().following, ":view window newest")
dbg.command(":view window #" .. hs[50].node)
w = viewer.window()
assert(w.first <= hs[50].node and hs[50].node <= w.last, ":view window #id")
dbg.command(":view window size 300")
viewer.frame(1)
window_holds_at_most(300, "size 300")
dbg.command(":view window sideways")   -- an error message, nothing moves
assert(viewer.window().size == 300)
local ok, message = pcall(viewer.window, "sideways")
assert(not ok and message:find("viewer.window"), "a bad argument names the function: " .. tostring(message))
ok, message = pcall(viewer.options, {window = 0})
assert(not ok and message:find("window"), "window = 0 is refused: " .. tostring(message))
viewer.window("newest")

-- Selecting a node outside the window moves it there and it stays; a stop outside it moves it
-- while stopped and lets it follow the newest again when the program runs on.
viewer.select(hs[100])
viewer.frame(1)
w = viewer.window()
assert(w.first <= hs[100].node and hs[100].node <= w.last and not w.following, "moved to the selection")
viewer.window("newest")
viewer.frame(1)
viewer.set_stop(hs[5].node, false)
viewer.frame(1)
w = viewer.window()
assert(w.first <= hs[5].node and hs[5].node <= w.last, "moved to the stop")
viewer.clear_stop()
viewer.frame(1)
assert(viewer.window().following, "follows the newest again after the stop")

-- The Tensor window shows a selected early node (found once, not walked to at every frame), and
-- says it is gone once the script lets go of it (the viewer's hold does not keep it alive).
viewer.select(hs[3])
viewer.frame(2)
local shown = viewer.inspect()
assert(shown and shown.node == hs[3].node and shown.count == 20, "the Tensor window shows hs[3]")
viewer.options{history = 0}
local dropped = torch.randn(3, 3):tanh()
local dropped_id = dropped.node
viewer.select(dropped)
viewer.frame(2)
assert(viewer.inspect().node == dropped_id, "the Tensor window shows the new node")
dropped = nil
collectgarbage()
collectgarbage()
viewer.frame(2)
assert(viewer.inspect() == nil, "a node nothing but the viewer holds is let go")
viewer.frame(1)
for _, r in ipairs(torch.tape()) do assert(r.id ~= dropped_id, "the dropped node left the tape") end
viewer.options{history = 2000}

-- A tape within window_above is copied whole, as before.
viewer.options{window_above = 100000}
viewer.frame(1)
m = viewer.model()
assert(m.records == #torch.tape() and m.window.nodes == m.window.live, "the whole tape")
print("view_long_tape: ok")
