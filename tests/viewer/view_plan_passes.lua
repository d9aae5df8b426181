-- view_plan_passes.lua: the viewer's pass-by-pass mode (docs/freeze.md, "Pass by pass"). The
-- lesson function of tests/repl/passes_lesson.lua, frozen, shown with viewer.show_plan; the pass
-- selector stepped through every stage. Checked against f:passes() (the compiler's own log): a
-- dropped node marked dropped after dce, the merged tanh pointing at the kept one after cse, the
-- folded constants, the fused groups, the gradient written in place, the buffers (and their
-- colour in the pixels); every box in the same place at every stage (one layout). Also the
-- buttons, bad input, back to the tape, and `:plan f --passes --view` at the REPL. Writes
-- plan_passes_fuse.png and plan_passes_reuse.png.
--   tapedeck view_plan_passes.lua TESTS SHOTS SOURCE TAPEDECK
local check = dofile(arg[1] .. "/viewer_check.lua")
local tapedeck = arg[4]
check.start()
local here = arg[1] .. "/../repl/"
dofile(here .. "passes_lesson.lua")
local f = torch.freeze(lesson, x)

-- The compiler's log, by pass.
local log = {}
for _, p in ipairs(f:passes()) do log[p.name] = p.decisions end

assert(viewer.show_plan(f))
assert(viewer.wait_layout(), "the layout arrives")
viewer.fit()
viewer.frame(3)
local model = viewer.model()
assert(model.plan_pass == "recorded", "starts at the recorded graph: " .. tostring(model.plan_pass))
assert(model.plan_summary == "the recorded graph: 22 steps", model.plan_summary)

local function box(m, id)
  local b = check.box_of(m, id)
  assert(b, "node #" .. tostring(id) .. " has a box")
  return b
end
-- Every recorded step has a box; at first all are kept.
local where = {}
for _, b in ipairs(model.boxes) do
  if b.kind == "node" and b.plan_state then
    assert(b.plan_state == "kept" and b.plan_note == "", b.key .. " is as recorded")
    where[b.key] = {b.x0, b.y0, b.x1, b.y1}
  end
end

local function stage(name)
  assert(viewer.plan_pass(name) == name)
  viewer.frame(2)
  local m = viewer.model()
  assert(m.plan_pass == name, "shows " .. name)
  for _, b in ipairs(m.boxes) do   -- the same picture: no box moved
    local w = where[b.key]
    if w then
      assert(b.x0 == w[1] and b.y0 == w[2] and b.x1 == w[3] and b.y1 == w[4], b.key .. " stayed in place at " .. name)
    end
  end
  return m
end

-- dce: the unused loss's mul_scalar and sum
model = stage("dce")
assert(#log.dce == 2)
for _, d in ipairs(log.dce) do
  local b = box(model, d.node)
  assert(b.plan_state == "dropped", "#" .. d.node .. " dropped: " .. b.plan_state)
  assert(b.plan_note == "dropped: nothing reads it", b.plan_note)
end
assert(box(model, log.cse[1].node).plan_state == "kept", "cse has not run yet")

-- cse: the second tanh points at the first
model = stage("cse")
local merged = box(model, log.cse[1].node)
assert(merged.plan_state == "merged" and merged.merged_into == log.cse[1].reuses_node,
       "the second tanh reuses #" .. log.cse[1].reuses_node)
assert(merged.plan_note == "= #" .. log.cse[1].reuses_node .. "'s result", merged.plan_note)
assert(box(model, log.dce[1].node).plan_state == "dropped", "still dropped")

-- fold
model = stage("fold")
for _, d in ipairs(log.fold) do assert(box(model, d.node).plan_state == "folded", "#" .. d.node .. " folded") end

-- fuse: two groups, their members in order
model = stage("fuse")
assert(model.plan_fused_groups == 2, "two fused groups")
for g, d in ipairs(log.fuse) do
  for _, id in ipairs(d.nodes) do
    local b = box(model, id)
    assert(b.fused == g, ("#%d in fused loop %d: %s"):format(id, g, tostring(b.fused)))
  end
end
assert(box(model, log.dce[1].node).fused == nil, "a dropped node is in no group")
check.shot("plan_passes_fuse.png")

-- inplace: the weight gradient's mm writes into w.grad
model = stage("inplace")
local mm = box(model, log.inplace[1].node)
assert(mm.in_place and mm.plan_note == "writes into w.grad", mm.plan_note)

-- reuse: each value's box names its buffer, as the log does, and is drawn in the buffer's colour
model = stage("reuse")
local coloured = 0
for _, d in ipairs(log.reuse) do
  for _, id in ipairs(d.nodes) do
    local b = box(model, id)
    assert(b.buffer == d.buffer, ("#%d in %s: %s"):format(id, d.buffer, tostring(b.buffer)))
  end
end
local shot = check.shot("plan_passes_reuse.png")
viewer.capture()
for _, b in ipairs(model.boxes) do
  if b.kind == "node" and b.buffer and b.visible then
    local c = b.buffer_colour
    local r, g, bl = c & 0xFF, (c >> 8) & 0xFF, (c >> 16) & 0xFF
    local fraction = check.fraction_of_colour(b, r, g, bl)
    assert(fraction > 0.3, ("%s is drawn in %s's colour: %.2f"):format(b.key, b.buffer, fraction))
    coloured = coloured + 1
  end
end
assert(coloured >= 4, "boxes coloured by buffer: " .. coloured)

-- the buttons (and stages by number)
viewer.click("pass cse")
viewer.frame(2)
assert(viewer.model().plan_pass == "cse", "the cse button")
assert(viewer.plan_pass(3) == "fold", "stage by number")

-- bad input: one clear error, nothing changed
local ok, message = pcall(viewer.plan_pass, "dse")
assert(not ok and message:find("viewer.plan_pass: no pass is called 'dse'; the stages are recorded, dce, cse", 1, true), message)
ok, message = pcall(viewer.show_plan, 42)
assert(not ok and message:find("viewer.show_plan: expected a frozen function", 1, true), message)
ok, message = pcall(viewer.show_plan, f, "fusion")
assert(not ok and message:find("no pass is called 'fusion'", 1, true), message)
assert(viewer.plan_pass() == "fold", "the stage is kept")

-- back to the tape
assert(viewer.show_plan(false))
viewer.frame(3)
assert(viewer.model().plan_pass == nil, "the tape again")
assert(viewer.plan_pass() == nil)
ok, message = pcall(viewer.plan_pass, "cse")
assert(not ok and message:find("no plan is shown", 1, true), message)

-- At the REPL: :plan f --passes --view, under this test's X server.
local command = ("cd %q && printf 'dofile(\"passes_lesson.lua\")\\n:freeze f = lesson, x\\n:plan f --passes fuse --view\\n"
                 .. "viewer.wait_layout()\\nprint(\"shown:\", viewer.plan_pass(), #viewer.model().boxes > 20)\\n' | %s 2>&1"):format(here, tapedeck)
local pipe = io.popen(command)
local out = pipe:read("a")
pipe:close()
print(out)
assert(out:find("fuse     2 groups of 6 elementwise ops", 1, true), "the fuse pass's text")
assert(out:find("viewer: f's recorded graph, pass by pass", 1, true), "the viewer opened")
assert(out:find("shown:\tfuse\ttrue", 1, true), "at the fuse stage")
print("ok")
