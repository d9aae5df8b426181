-- view_rnn_ghosts.lua: scripts/rnn_unrolled.lua (50 steps) run with the window open (as
-- `tapedeck --view`). Each use of a shared parameter gets its own copy (ghost) in the drawn model;
-- no edge joining a forward node to a backward node was laid out by dot (they are drawn on top);
-- every node has a box. Writes rnn_unrolled.png (zoomed on the newest nodes) and
-- rnn_unrolled_fit.png (the whole graph, level of detail).
local check = dofile(arg[1] .. "/viewer_check.lua")
check.start()
arg = {50}
dofile(check.source .. "/scripts/rnn_unrolled.lua")   -- its locals stay alive: the window keeps them
assert(viewer.wait_layout(), "the layout arrives")
check.shot("rnn_unrolled.png")
local model = viewer.model()
local tape = torch.tape()
print(("%d nodes on the tape, %d boxes, layout %.0f ms"):format(#tape, model.shown, model.layout_seconds * 1000))
assert(model.cap_focus == 0, "under the node cap")

-- The shared leaves of the script: W_h (randn * 0.1, then requires_grad_), W_x and xs. Each is
-- read by 50 forward nodes, and drawn 50 times: the node at its first use, a ghost at each other.
local uses, copies, ghosts = {}, {}, {}
for _, node in ipairs(tape) do
  if node.phase == "forward" then
    for _, input in ipairs(node.inputs) do uses[input] = (uses[input] or 0) + 1 end
  end
end
for _, b in ipairs(model.boxes) do
  if b.kind == "node" or b.kind == "ghost" then copies[b.node] = (copies[b.node] or 0) + 1 end
  if b.kind == "ghost" then ghosts[b.node] = (ghosts[b.node] or 0) + 1 end
end
local function find(op, shape)
  for _, node in ipairs(tape) do
    if node.phase == "forward" and node.op:sub(1, #op) == op and table.concat(node.shape, ",") == shape then return node end
  end
  error("no " .. op .. " " .. shape .. " on the tape")
end
local shared = {W_h = find("mul_scalar", "20,20"), W_x = find("randn", "20,10"), xs = find("randn", "50,10")}
for name, node in pairs(shared) do
  print(("%s (#%d %s): %d uses, %d boxes, %d of them ghosts"):format(name, node.id, node.op, uses[node.id],
        copies[node.id] or 0, ghosts[node.id] or 0))
  assert(uses[node.id] == 50, name .. " is read at every step")
  assert(copies[node.id] == 50 and ghosts[node.id] == 49, name .. " has a box per use")
end

-- Forward <-> backward edges: present, and never laid out by dot.
local cross, laid_out = 0, 0
for _, e in ipairs(model.edges) do
  if e.cross then
    cross = cross + 1
    assert(not e.laid_out, ("edge %s -> %s joins the passes but was laid out"):format(e.from, e.to))
  elseif e.laid_out then
    laid_out = laid_out + 1
  end
end
assert(cross > 100, "the backward pass reads saved forward values: " .. cross)
print(("%d forward->backward edges drawn on top, %d edges laid out by dot"):format(cross, laid_out))
for _, node in ipairs(tape) do assert(model.box_of[node.id], "node #" .. node.id .. " has a box") end

viewer.fit()
check.shot("rnn_unrolled_fit.png")
local visible = #check.boxes_where(viewer.model(), "visible")
assert(visible == model.shown, ("fit shows every box: %d of %d"):format(visible, model.shown))
print("ok")
