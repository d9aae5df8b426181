-- view_parameters.lua: parameters are coloured as parameters from the first frame, always. The
-- bindings record a leaf (torch.randn) before applying {requires_grad = true}; a frame drawn in
-- between used to freeze the leaf as data (2 runs in 9 of `--screenshot` on rnn_cell.lua). Here a
-- frame is drawn as every node is about to run (the worst timing, every time), over 20 runs of
-- rnn_cell.lua: W_h and W_x are boxes of leaves that require grad (the parameter colour), x and
-- prev_h leaves that do not (data).
local check = dofile(arg[1] .. "/viewer_check.lua")
check.start()

local function box_of(name, id)
  local box = check.box_of(viewer.model(), id)
  assert(box, name .. " has no box")
  return box
end

for run = 1, 20 do
  arg = {check.shots .. "/parameters.svg"}
  viewer.on_node(function() viewer.frame() end)
  dofile(check.source .. "/scripts/rnn_cell.lua")
  viewer.on_node(nil)
  viewer.frame(2)
  for _, name in ipairs({"W_h", "W_x"}) do
    local box = box_of(name, _G[name].node)
    assert(box.leaf and box.requires_grad, ("run %d: %s is drawn as %s, not as a parameter"):format(
           run, name, box.leaf and "data" or "an op"))
  end
  for _, name in ipairs({"x", "prev_h"}) do
    local box = box_of(name, _G[name].node)
    assert(box.leaf and not box.requires_grad, ("run %d: %s is not drawn as data"):format(run, name))
  end
end
check.shot("parameters.png")

-- requires_grad_() on a leaf that is already drawn: the next frame draws it as a parameter.
local b = torch.zeros(4)
viewer.frame(2)
assert(not box_of("b", b.node).requires_grad, "b starts as data")
b:requires_grad_()
viewer.frame(2)
assert(box_of("b", b.node).requires_grad, "after requires_grad_(), b is drawn as a parameter")
print("ok")
