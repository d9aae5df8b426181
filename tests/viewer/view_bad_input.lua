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
check.shot("reopened.png")
assert(viewer.model().box_of[bad.node], "the reopened window shows the tape")
print("ok")
