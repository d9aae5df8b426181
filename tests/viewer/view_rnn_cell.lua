-- view_rnn_cell.lua: the rnn_cell graph in the window. From the viewer's own model: every tape
-- node has a drawn box, on screen; the stopped node (a backward one) is the one highlighted box;
-- the pixels inside that box are the highlight colour. Writes rnn_cell.png and rnn_cell_stop.png.
local check = dofile(arg[1] .. "/viewer_check.lua")
check.start()
arg = {check.shots .. "/rnn_cell.svg"}
dofile(check.source .. "/scripts/rnn_cell.lua")

check.shot("rnn_cell.png")
assert(viewer.model().label_px >= 11, "the default zoom keeps labels legible")
viewer.fit()   -- the default zoom keeps labels at 11 px or more: the whole graph needs Fit
viewer.frame(2)
local model = viewer.model()
local tape = torch.tape()
assert(#tape >= 16, "the tape holds the rnn_cell graph")
for _, node in ipairs(tape) do
  local box = check.box_of(model, node.id)
  assert(box, ("node #%d (%s) has no box"):format(node.id, node.op))
  assert(box.kind == "node", ("node #%d is drawn as a %s"):format(node.id, box.kind))
  assert(box.visible, ("node #%d's box is off screen"):format(node.id))
  assert(box.laid_out, ("node #%d's box was not placed by the layout"):format(node.id))
  assert(box.x1 - box.x0 > 20 and box.y1 - box.y0 > 10, ("node #%d's box is too small"):format(node.id))
end
assert(model.highlighted_count == 0, "nothing is highlighted before a stop")

-- Stop at the gradient of tanh (the interface the debugger calls).
local tanh_backward
for _, node in ipairs(tape) do
  if node.op == "tanh_backward" then tanh_backward = node.id end
end
assert(tanh_backward, "the backward pass has a tanh_backward node")
viewer.set_stop(tanh_backward, true)
check.shot("rnn_cell_stop.png")
model = viewer.model()
assert(model.stop == tanh_backward)
assert(model.highlighted_count == 1, "one box is highlighted, not " .. model.highlighted_count)
assert(model.highlighted == tanh_backward, ("the highlighted box shows #%s, the stop is #%d")
       :format(tostring(model.highlighted), tanh_backward))
local box = check.box_of(model, tanh_backward)
assert(box.highlighted and box.visible)
local fraction = check.highlight_fraction(box)
print(("highlight colour on %.0f%% of the stopped box's pixels"):format(fraction * 100))
assert(fraction > 0.5, "the stopped node's box is filled with the highlight colour")
-- ... and nowhere else in the graph.
for _, other in ipairs(model.boxes) do
  if other.visible and other.key ~= box.key and other.x1 - other.x0 > 12 then
    assert(check.highlight_fraction(other) < 0.05, other.key .. " shows the highlight colour too")
  end
end
-- The Tensor window shows the stopped node; its tab can go to the gradient and back.
assert(viewer.inspect().node == tanh_backward)
viewer.clear_stop()
viewer.frame(2)
assert(viewer.model().highlighted_count == 0, "no highlight after the stop is cleared")
print("ok")
