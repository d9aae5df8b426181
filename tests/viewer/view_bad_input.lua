-- view_bad_input.lua: what must not break the viewer. A tensor with NaN and infinities shown as a
-- heatmap (and counted); a 4-D activation as a grid of channels; the window closed by the user
-- (the program goes on, the window opens again); an empty tape.
local check = dofile(arg[1] .. "/viewer_check.lua")
check.start()
viewer.frame(2)
assert(viewer.model().shown == 0 or #torch.tape() > 0, "an empty tape draws")

bad = torch.tensor{{1, 0 / 0, 3}, {math.huge, -math.huge, -2}, {0.5, 0, 1}}
viewer.select(bad)
check.shot("nan_heatmap.png")
local seen = viewer.inspect()
assert(seen and seen.node == bad.node, "the Tensor window shows the NaN tensor")
assert(seen.nan == 1 and seen.pos_inf == 1 and seen.neg_inf == 1, "NaN and Inf are counted")
assert(seen.min == -2 and seen.max == 3, "min and max ignore NaN and Inf")
assert(seen.heatmap, "the heatmap was drawn")

-- The heatmap's cells in the pixels: [1,2] is NaN (magenta), [2,1] +Inf (yellow), [2,2] -Inf (cyan).
local function cell_colour(row, col)
  local x0, y0, x1, y1 = viewer.item_rect("heatmap")
  assert(x0, "the heatmap's place is known")
  viewer.capture()
  local x = math.floor(x0 + (col - 0.5) * (x1 - x0) / 3)
  local y = math.floor(y0 + (row - 0.5) * (y1 - y0) / 3)
  return table.pack(viewer.pixel(x, y))
end
local function check_cells()
  local nan, pos, neg = cell_colour(1, 2), cell_colour(2, 1), cell_colour(2, 2)
  assert(nan[1] == 255 and nan[2] == 0 and nan[3] == 255, "NaN is magenta: " .. table.concat(nan, ","))
  assert(pos[1] == 255 and pos[2] == 230 and pos[3] == 0, "+Inf is yellow: " .. table.concat(pos, ","))
  assert(neg[1] == 0 and neg[2] == 230 and neg[3] == 255, "-Inf is cyan: " .. table.concat(neg, ","))
end
check_cells()

acts = torch.randn(2, 6, 5, 5)
viewer.select(acts)
check.shot("channels.png")
assert(viewer.inspect().heatmap, "a 4-D tensor is drawn as per-channel images")

-- The gradient tab of a leaf with .grad.
w = torch.randn(3, 3, {requires_grad = true})
w:pow(2):sum():backward()
viewer.select(w)
viewer.tab("gradient")
viewer.frame(3)
assert(viewer.inspect().tab == "gradient" and viewer.inspect().heatmap, "the gradient tab draws w.grad")
viewer.tab("value")

-- Closed by the user: the program goes on; opening again works and shows the tape.
viewer.request_close()
viewer.frame(1)
assert(not viewer.is_open(), "the window closed")
local after = torch.ones(2) * 3   -- ops still run
assert(after:sum():item() == 6)
viewer.frame(1)                   -- frames of a closed window are no-ops
assert(viewer.open(true), "the window opens again")
assert(viewer.wait_layout())
-- The default picture is w's loss graph (the last backward pass); selecting bad, which is not in
-- it, shows the whole tape.
assert(not viewer.model().box_of[bad.node], "the reopened window shows the loss's graph")
assert(viewer.model().box_of[w.node], "the reopened window shows the loss's graph")
viewer.select(bad)          -- its heatmap again, in the new window's GL context
assert(viewer.wait_layout())
check.shot("reopened.png")
assert(viewer.model().box_of[bad.node], "the reopened window shows the tape once bad is selected")
viewer.frame(2)
check_cells()
print("ok")
