-- spiral_mlp.lua: CS231n's three-arm spiral, classified by a 2-layer MLP (Linear -> ReLU ->
-- Linear, softmax cross-entropy, Adam), trained on all 300 points at once. Prints the training
-- accuracy (>= 98% at the default steps) and writes a picture of the decision regions with the
-- points on top.
--
--   tapedeck scripts/models/spiral_mlp.lua [--steps 1000] [--freeze] [--out spiral_mlp.png]
--
-- --freeze records the first training step with torch.freeze and replays that plan for the other
-- steps (the same losses as eager, within float32 rounding).
local here = arg[0]:match("^(.*[/\\])") or "./"
local spiral = dofile(here .. "spiral_mlp_model.lua")
local progress = require "tapedeck.progress"
local options = require("tapedeck.args").parse{steps = 1000, freeze = false, out = "spiral_mlp.png"}
assert(options.steps >= 1, "--steps must be at least 1")

local POINTS_PER_CLASS, CLASSES, HIDDEN = 100, 3, 100
torch.manual_seed(0)
x, labels = spiral.dataset(POINTS_PER_CLASS, CLASSES)
model = spiral.model(HIDDEN, CLASSES)
print(model)
local optimizer = optim.Adam(model, {lr = 0.01})
local train_step = spiral.train_step(model, optimizer)

-- Step `step` of the loop. With --freeze, torch.freeze records (and runs) the first step and the
-- others replay its plan (strict: a guard that fails is an error, not a silent re-record).
local frozen_step
local function train(step)
  if not options.freeze then return train_step(x, labels) end
  if step == 1 then
    local loss
    frozen_step = torch.freeze{function(a, b) loss = train_step(a, b); return loss end, x, labels, strict = true}
    return loss
  end
  return frozen_step(x, labels)
end

local bar = progress.new{total = options.steps}
for step = 1, options.steps do
  local loss = train(step)
  bar:update(step, {loss = loss})
end
bar:close()

model:eval()
local accuracy = torch.no_grad(spiral.accuracy, model, x, labels)
print(string.format("training accuracy: %.1f%% (%d points)", 100 * accuracy, x.shape[1]))

-- ------------------------------------------------------------------------------------------
-- The picture: each pixel coloured by the class the model gives it (light colours), the points
-- in darker ones. Pixel (row, col) of a SIZE x SIZE image is the point (x, y) with y up.
local SIZE, EXTENT = 320, 1.15
local REGION = {{255, 200, 200}, {200, 235, 200}, {200, 210, 255}}
local POINT = {{200, 30, 30}, {30, 140, 30}, {30, 60, 200}}

local function pixel_centre(i) return (2 * (i - 0.5) / SIZE - 1) * EXTENT end

-- The class of every pixel's centre, as rows of a Lua table.
local function region_classes()
  local coords = torch.linspace(-EXTENT, EXTENT, SIZE)
  local column_x = coords:reshape({1, SIZE}):expand({SIZE, SIZE})
  local row_y = coords:flip({1}):reshape({SIZE, 1}):expand({SIZE, SIZE})
  local grid = torch.stack({column_x:reshape({-1}), row_y:reshape({-1})}, 2)
  local _, class = torch.no_grad(function() return model(grid) end):max(2)
  return class:reshape({SIZE, SIZE}):totable()
end

local function decision_image()
  local classes = region_classes()
  local pixels = {}
  for row = 1, SIZE do
    pixels[row] = {}
    for col = 1, SIZE do pixels[row][col] = REGION[classes[row][col]] end
  end
  local points, point_labels = x:totable(), labels:totable()
  for i, p in ipairs(points) do   -- a 5x5 dot per point
    local col = math.floor((p[1] / EXTENT + 1) / 2 * SIZE) + 1
    local row = math.floor((1 - p[2] / EXTENT) / 2 * SIZE) + 1
    for r = math.max(1, row - 2), math.min(SIZE, row + 2) do
      for c = math.max(1, col - 2), math.min(SIZE, col + 2) do pixels[r][c] = POINT[point_labels[i]] end
    end
  end
  return torch.tensor(pixels)   -- [SIZE, SIZE, 3]
end

torch.save_png(decision_image(), options.out, {layout = "HWC"})
print("decision regions written to " .. options.out)
