-- view_models.lua MODEL: the default picture of a training script of the models issue, from the
-- viewer's own model. Run as  run_headless.sh tapedeck view_models.lua TESTS SHOTS SOURCE MODEL
-- (MODEL: spiral_mlp, shapes_cnn, char_lstm, tiny_gpt, or two_layer_net_nn for scripts/).
-- After two training steps the window shows the last forward + backward of the model:
--   - the Graph window has the whole width (nothing is selected: no Tensor or Source window);
--   - the loss (the node the last backward pass started from) as a box of its own, and it and the
--     seed of the backward pass on the canvas: the first picture fits the model's scope (forward
--     and backward), not the data preparation; for spiral_mlp and char_lstm all of the scope;
--   - every parameter the loss depends on as one box titled "parameter" with its shape and its
--     name (model.fc1.weight: the script's model is made a global before the picture is taken),
--     or, when only one module call uses it, inside that call's box; opened, the call frames the
--     parameter's own box, titled and named so;
--   - no initialisation chain: nothing that made a parameter (rand, mul_scalar, detach) is drawn;
--   - the optimizer's step as one collapsed group, the forward pass grouped by module call;
--   - labels at 11 px or more at the default zoom.
-- Writes view_model_MODEL.png and prints the median frame time of that picture.
local check = dofile(arg[1] .. "/viewer_check.lua")
local which = assert(arg[4], "view_models.lua: which model? (spiral_mlp, shapes_cnn, char_lstm, tiny_gpt)")
check.start()
-- The window keeps the newest nodes alive (2,000 by default): enough more that the optimizer's
-- step survives what the scripts run after training (an evaluation, sampling 200 characters).
viewer.options{history = 60000}

-- The outermost module called (its forward ran at the top level): the script's model.
local the_model
local scope = torch.scope
torch.scope = function(name, fn, module, ...)
  if not the_model and type(module) == "table" then the_model = module end
  return scope(name, fn, module, ...)
end

local script = which == "two_layer_net_nn" and (check.source .. "/scripts/two_layer_net_nn.lua")
               or (check.source .. "/scripts/models/" .. which .. ".lua")
if which == "two_layer_net_nn" then arg = {[0] = script, "2", "1"}
elseif which == "spiral_mlp" then arg = {[0] = script, "--steps", "2", "--out", check.shots .. "/spiral_mlp_regions.png"}
else arg = {[0] = script, "--steps", "2"} end
dofile(script)
torch.scope = scope
assert(the_model, "the script called a module")
model = the_model   -- a global: the viewer names parameters after it (model.fc1.weight)

assert(viewer.wait_layout(), "the layout is ready")
viewer.frame(3)
local shot = check.shot("view_model_" .. which .. ".png")
local view = viewer.model()

-- The tape's records by id, and the loss's graph walked here, independently of the viewer:
-- inputs followed back from the loss, stopping at history starts (parameters).
local records = {}
for _, r in ipairs(torch.tape()) do records[r.id] = r end
assert(view.loss ~= 0, "the picture is the loss's graph (a backward pass ran)")
local loss = assert(records[view.loss], "the loss is on the tape")
local reached, stack = {[loss.id] = true}, {loss.id}
while #stack > 0 do
  local r = records[table.remove(stack)]
  if r and not r.history_start and r.phase == "forward" then
    for _, input in ipairs(r.inputs) do
      if records[input] and not reached[input] then
        reached[input] = true
        stack[#stack + 1] = input
      end
    end
  end
end

-- The loss: a box of its own, on the canvas, labelled with its op.
local loss_box = check.box_of(view, loss.id)
assert(loss_box and loss_box.kind == "node", "the loss has a box of its own")
assert(loss_box.title == "#" .. loss.id .. " " .. loss.op .. (loss.attrs ~= "" and "(" .. loss.attrs .. ")" or ""),
       "the loss's box is titled with its op: " .. tostring(loss_box.title))
assert(loss_box.visible, "the default camera shows the loss")
assert(view.label_px >= 11, ("labels are legible at the default zoom: %.1f px"):format(view.label_px))

-- The first picture: the whole width for the graph, the model's scope on it.
assert(not view.side_panes, "nothing selected: the Tensor and Source windows are folded away")
assert(view.canvas.x1 - view.canvas.x0 >= 1200, ("the graph has the window's width: %.0f px"):format(view.canvas.x1 - view.canvas.x0))
local function on_canvas(b)
  return b.x0 >= view.canvas.x0 and b.x1 <= view.canvas.x1 and b.y0 >= view.canvas.y0 + 20 and b.y1 <= view.canvas.y1
end
assert(on_canvas(loss_box), "the loss is on the canvas")
local seed_box   -- the first box of the pass: the seed of the loss's gradient
for _, b in ipairs(view.boxes) do
  if b.phase == "backward" and b.in_scope and b.kind == "node" and (not seed_box or b.node < seed_box.node) then seed_box = b end
end
assert(seed_box and on_canvas(seed_box), "the seed of the backward pass is on the canvas")
local scope_boxes, scope_shown, shown, shown_in_scope, backward_shown = 0, 0, 0, 0, 0
for _, b in ipairs(view.boxes) do
  if b.in_scope then scope_boxes = scope_boxes + 1 end
  if on_canvas(b) then
    shown = shown + 1
    if b.in_scope then scope_shown, shown_in_scope = scope_shown + 1, shown_in_scope + 1 end
    if b.phase == "backward" then backward_shown = backward_shown + 1 end
  end
end
assert(backward_shown >= 2, "the backward pass is on the canvas: " .. backward_shown .. " boxes")
assert(shown_in_scope >= shown / 2, ("the picture is mostly the model: %d of %d boxes in the scope"):format(shown_in_scope, shown))
if which == "spiral_mlp" or which == "char_lstm" then
  assert(scope_shown == scope_boxes, ("all of the model's scope is on the canvas: %d of %d"):format(scope_shown, scope_boxes))
end

-- The parameters: one box each, named, with nothing that made them.
local named = {}
for _, entry in ipairs(model:named_parameters()) do named[entry[2].node] = entry[1] end
-- A parameter inside a module call's box: open that call, and the calls inside it that hold it.
local folded, first_view = 0, view
for id in pairs(reached) do
  if named[id] and check.box_of(first_view, id).kind == "group" then folded = folded + 1 end
  local box = named[id] and check.box_of(view, id)
  for _ = 1, 6 do
    if not (box and box.kind == "group") then break end
    local g
    for _, group in ipairs(view.groups) do if group.key == box.group then g = group end end
    assert(g and g.kind == "module", ("parameter %s is in a module call's box, not %s"):format(named[id], tostring(box.group)))
    assert(viewer.expand(g.name))
    assert(viewer.wait_layout())
    viewer.frame(1)
    view = viewer.model()
    box = check.box_of(view, id)
  end
end
local parameters, labelled = 0, 0
for id in pairs(reached) do
  local r = records[id]
  if named[id] then
    parameters = parameters + 1
    local box = check.box_of(view, id)
    assert(box and box.kind == "node", ("parameter %s (#%d) has a box of its own (its module call opened): %s %s"):format(named[id], id, box and box.kind, box and box.title))
    assert(box.title == "#" .. id .. " parameter", ("parameter %s is titled 'parameter': %s"):format(named[id], box.title))
    assert(box.parameter, ("parameter %s is coloured as a parameter"):format(named[id]))
    assert(box.detail:find(tostring(r.shape), 1, true), ("parameter %s shows its shape"):format(named[id]))
    -- Named by its module path: the variable holding the model, then PyTorch's key (model.fc1.weight).
    local key = "." .. named[id]
    assert(box.extra:sub(-#key) == key and #box.extra > #key,
           ("parameter %s is labelled with its module path, not '%s'"):format(named[id], box.extra))
    if box.extra ~= "" then labelled = labelled + 1 end
    assert(r.history_start, "a parameter starts a history")
    for _, input in ipairs(r.inputs) do
      assert(not view.box_of[input], ("parameter %s: #%d, which made it, is not drawn"):format(named[id], input))
    end
  end
end
assert(parameters >= 2, "the loss depends on the model's parameters: " .. parameters)
assert(labelled == parameters, "every parameter is labelled with its name")
if which == "char_lstm" or which == "tiny_gpt" then
  assert(folded >= 4, "the model's parameters are drawn in their module calls' boxes: " .. folded)
end
for _, b in ipairs(view.boxes) do
  assert(not b.title:find(" detach", 1, true) or b.phase == "backward", "no detach (an init chain) is drawn: " .. b.title)
end

-- Groups: the forward pass by module call, the optimizer's step as one collapsed box.
local modules, update = 0, nil
for _, g in ipairs(view.groups) do
  if g.kind == "module" and g.phase == "forward" then modules = modules + 1 end
  if g.kind == "update" then update = g end
end
assert(modules >= 1, "the forward pass is grouped by module call")
assert(update and update.state == "collapsed", "the optimizer's step is one collapsed group")
local update_box = false
for _, b in ipairs(view.boxes) do update_box = update_box or b.group == update.key end
assert(update_box, "the optimizer's step is drawn as one box")

-- Back to the first picture's groups.
for _, g in ipairs(view.groups) do
  if g.kind == "module" and g.phase == "forward" and g.state == "expanded" and g.parent then assert(viewer.expand(g.name, false)) end
end
assert(viewer.wait_layout())
view = viewer.model()

-- The LSTM's 32 time steps: inside its box, each one collapsed group (when the LSTM is opened).
if which == "char_lstm" then
  local lstm
  for _, g in ipairs(view.groups) do if g.title == "lstm (LSTM)" then lstm = g end end
  assert(lstm and lstm.state == "collapsed", "the LSTM call is one box")
  assert(viewer.expand("lstm"))
  assert(viewer.wait_layout())
  local steps = 0
  for _, g in ipairs(viewer.model().groups) do
    if g.title:match("^step %d+$") and g.kind == "module" then
      steps = steps + 1
      assert(g.state == "collapsed", g.title .. " is folded")
      assert(g.parent and g.parent:find("lstm:LSTM", 1, true), g.title .. " lies inside the LSTM's box")
    end
  end
  assert(steps == 32, "32 time steps: " .. steps)
  check.shot("view_model_char_lstm_open.png")
  assert(viewer.expand("lstm", false))
  assert(viewer.wait_layout())
end

-- A frame of this picture (the median of 30, llvmpipe under xvfb-run).
local ms = viewer.bench_frames(30)
table.sort(ms)
local median = ms[math.floor(#ms / 2) + 1]
print(("%s: %d boxes, %d parameters (%d named, %d in module boxes), labels %.1f px; on the canvas %d of %d boxes of the "
       .. "model's scope, %d backward, %d of %d boxes shown in the scope; frame %.1f / %.1f ms (min / median of %d), %s"):format(
  which, view.shown, parameters, labelled, folded, view.label_px, scope_shown, scope_boxes, backward_shown, shown_in_scope,
  shown, ms[1], median, #ms, shot))
assert(median < 100, "a frame takes less than 100 ms even on a loaded machine: " .. median)
viewer.close()
