-- view_diff.lua: the Options' "diff" checkbox (viewer.options{diff = true}) marks what the newest
-- training step changed, as :diff reports it (docs/viewer.md, docs/debugger.md ":diff"): identical
-- steps mark no node new and no shape changed; a step on the other side of a branch with a longer
-- sequence marks the relu new (a "new" badge) and the reshaped nodes (an orange outline); a box
-- is tinted by how much its value moved.
local check = dofile(arg[1] .. "/viewer_check.lua")
check.start()
dofile(check.source .. "/tests/repl/diff_steps.lua")   -- step(T, gate): T rows, relu or tanh

local function marked(model)
  local out = {}
  for _, b in ipairs(model.boxes) do
    if b.diff and b.kind == "node" then out[#out + 1] = b end
  end
  return out
end

viewer.options{diff = true}
assert(viewer.options().diff, "the option is on")
viewer.frame(2)                          -- its first frame keeps step summaries from now on
step(3, false)
step(3, false)
viewer.frame(3)
local boxes = marked(viewer.model())
assert(#boxes > 0, "identical steps: the values that moved are marked")
local loss_box = check.box_of(viewer.model(), loss.node)
assert(loss_box and loss_box.diff and loss_box.diff.value_change > 0, "the loss's value moved")
for _, b in ipairs(boxes) do
  assert(not b.diff.new, "identical steps: " .. b.title .. " marked new")
  assert(not b.diff.shape_before, "identical steps: " .. b.title .. " marked reshaped")
end

step(5, true)
viewer.frame(3)
local new, reshaped = {}, {}
for _, b in ipairs(marked(viewer.model())) do
  if b.diff.new then new[#new + 1] = b end
  if b.diff.shape_before then reshaped[#reshaped + 1] = b end
end
assert(#new == 1, "one node new, got " .. #new)
assert(new[1].title:find("relu", 1, true) or new[1].detail:find("relu", 1, true),
       "the new node is the relu: " .. new[1].title .. " / " .. new[1].detail)
assert(#reshaped == 4, "randn, mm, add and pow reshaped, got " .. #reshaped)
for _, b in ipairs(reshaped) do assert(b.diff.shape_before == "[3,4]", b.diff.shape_before) end
check.shot("diff.png")

viewer.options{diff = false}
viewer.frame(2)
assert(#marked(viewer.model()) == 0, "the option off: no marks")
print("ok")
