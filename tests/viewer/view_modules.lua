-- view_modules.lua: module boxes, history starts and the loss's picture in the window, from the
-- viewer's own model; then :view expand / :view collapse at the REPL.
--   tapedeck view_modules.lua TESTS SHOTS SOURCE TAPEDECK
local check = dofile(arg[1] .. "/viewer_check.lua")
local tapedeck = arg[4]
check.start()   -- open before the model is made: the window keeps every node from here on

local function group(view, predicate)
  for _, g in ipairs(view.groups) do
    if predicate(g) then return g end
  end
end
local function box_titled(view, title)
  for _, b in ipairs(view.boxes) do
    if b.title == title then return b end
  end
end

-- 1. No backward pass yet: the whole tape, but no initialisation chain. nn.Linear makes its
-- parameters under no_grad (rand -> mul_scalar -> add_scalar -> detach -> clone): the clone is the
-- parameter, a history start, and what made it is drawn nowhere.
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
x = torch.randn(5, 4)
y = model(x)
assert(viewer.wait_layout())
local view = viewer.model()
assert(view.loss == 0, "no backward pass: no loss's picture")
local records = {}
for _, r in ipairs(torch.tape()) do records[r.id] = r end
local weight = model[1].weight
local w = records[weight.node]
assert(w and w.history_start, "a parameter made under no_grad starts a history")
assert(view.box_of[weight.node], "the parameter has a box")
local init_chain = 0
for _, input in ipairs(w.inputs) do
  assert(records[input], "the window kept what made the parameter")
  assert(not view.box_of[input], "#" .. input .. " (" .. records[input].op .. "), which made the parameter, is not drawn")
  init_chain = init_chain + 1
end
assert(init_chain == 1 and view.hidden_records >= 4, "the init chain is on the tape and hidden: " .. view.hidden_records)
assert(view.box_of[x.node] and view.box_of[y.node], "the forward pass is drawn")

-- Module calls are nested groups: the Sequential call open, each Linear call in it collapsed.
local seq = group(view, function(g) return g.kind == "module" and g.title == "Sequential" end)
local lin = group(view, function(g) return g.kind == "module" and g.title == "0 (Linear)" end)
assert(seq and seq.state == "expanded", "the model's call is an open group")
assert(lin and lin.state == "collapsed" and lin.parent == seq.key, "a Linear call is a collapsed group inside it")
assert(lin.name == "Sequential/0:Linear", "the group knows its module path: " .. lin.name)

-- 2. A training step: the default picture is the loss's graph, its backward pass grouped as the
-- forward pass is, and the optimizer's step as one collapsed box.
local optimizer = optim.SGD(model:parameters(), {lr = 0.1})
loss = F.mse_loss(y, torch.zeros(5, 2))
loss:backward()
optimizer:step()
assert(viewer.wait_layout())
view = viewer.model()
assert(view.loss == loss.node, "the picture is the loss's graph")
assert(view.label_px >= 11, "labels are legible at the default zoom")
lin = group(view, function(g) return g.kind == "module" and g.title == "0 (Linear)" end)
local lin_grad = group(view, function(g) return g.key == "bwd:c:" .. lin.key end)
assert(lin_grad and lin_grad.state == "collapsed" and lin_grad.phase == "backward",
       "the Linear call's backward nodes are one collapsed group too")
local update = group(view, function(g) return g.kind == "update" end)
assert(update and update.state == "collapsed" and update.members >= 2, "the SGD step is one collapsed group")
check.shot("modules_default.png")

-- Open by name (as :view expand 0 does), and by a click on the box; close again.
local ok, message = viewer.expand("nosuch")
assert(ok == false and message:find("no group named 'nosuch'", 1, true), "an unknown name: " .. tostring(message))
assert(viewer.expand("0"))   -- the field of the first Linear
assert(viewer.wait_layout())
view = viewer.model()
lin = group(view, function(g) return g.kind == "module" and g.title == "0 (Linear)" end)
assert(lin.state == "expanded", "viewer.expand('0') opened the Linear call")
lin_grad = group(view, function(g) return g.key == "bwd:c:" .. lin.key end)
assert(lin_grad.state == "expanded", "... and its backward group with it")
local inside = 0
for _, b in ipairs(view.boxes) do
  if b.frame == lin.key then inside = inside + 1 end
end
assert(inside >= 1, "the open Linear frames its ops")
assert(viewer.expand("Linear", false))   -- every Linear call, by class
assert(viewer.wait_layout())
view = viewer.model()
lin = group(view, function(g) return g.kind == "module" and g.title == "2 (Linear)" end)
assert(lin.state == "collapsed", "viewer.expand('Linear', false) closed them")
local linear_box
for _, b in ipairs(view.boxes) do
  if b.group == lin.key then linear_box = b end
end
assert(linear_box and linear_box.visible, "the collapsed Linear's box is on screen")
viewer.click((linear_box.x0 + linear_box.x1) / 2, (linear_box.y0 + linear_box.y1) / 2)
viewer.frame(2)
assert(viewer.wait_layout())
view = viewer.model()
lin = group(view, function(g) return g.kind == "module" and g.title == "2 (Linear)" end)
assert(lin.state == "expanded", "a click on a module's box opens it")
check.shot("modules_opened.png")

-- The whole tape again (Options): the picture is no longer only the loss's.
viewer.options{loss_graph = false}
assert(viewer.wait_layout())
assert(viewer.model().loss == 0, "loss_graph = false: the whole tape")
viewer.options{loss_graph = true}
viewer.close()

-- 3. At the REPL: :view expand NAME, :view collapse NAME, and what a wrong one says.
local function run(command)
  local pipe = io.popen(command .. " 2>&1")
  local out = pipe:read("a")
  pipe:close()
  return out
end
local out = run(("printf '%%s\\n' 'model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))' "
                 .. "'loss = model(torch.randn(5, 4)):sum()' 'loss:backward()' ':view' 'viewer.wait_layout()' "
                 .. "':view expand 2' 'viewer.wait_layout()' "
                 .. "'for _, g in ipairs(viewer.model().groups) do if g.title == \"2 (Linear)\" then print(\"state\", g.state) end end' "
                 .. "':view collapse 2:Linear' 'viewer.wait_layout()' "
                 .. "'for _, g in ipairs(viewer.model().groups) do if g.title == \"2 (Linear)\" then print(\"state\", g.state) end end' "
                 .. "':view expand' ':view expand nosuch' 'print(\"still here\")' | %s"):format(tapedeck))
print(out)
assert(out:find("state\texpanded", 1, true), ":view expand 2 opened the second Linear")
assert(out:find("state\tcollapsed", 1, true), ":view collapse 2:Linear closed it")
assert(out:find(":view expand needs a group's name", 1, true), ":view expand alone says what it needs")
assert(out:find(":view expand: no group named 'nosuch' in the graph (there are: ", 1, true),
       "an unknown name is an error naming the groups there are")
assert(out:find("still here", 1, true), "the REPL goes on")
