-- shapes_cnn.lua: a small conv net (Conv2d, BatchNorm2d, ReLU, MaxPool2d, Dropout, Linear) that
-- tells 16x16 squares, circles and triangles apart (random size and position, noisy), trained with
-- Adam on minibatches. Prints the accuracy in eval mode (BatchNorm's running statistics, Dropout
-- off) and, to show why model:eval() matters, in train mode on small batches (the statistics of
-- those few images, Dropout on).
--
--   tapedeck scripts/models/shapes_cnn.lua [--steps 200] [--freeze]
--
-- --freeze records the first training step with torch.freeze and replays that plan for the other
-- steps with the next batches (the same losses as eager, within float32 rounding).
local here = arg[0]:match("^(.*[/\\])") or "./"
local shapes = dofile(here .. "shapes_cnn_model.lua")
local progress = require "tapedeck.progress"
local options = require("tapedeck.args").parse{steps = 200, freeze = false}
assert(options.steps >= 1, "--steps must be at least 1")

local SIZE, TRAIN, TEST, BATCH = 16, 600, 300, 50
torch.manual_seed(0)
train_images, train_labels = shapes.dataset(TRAIN, SIZE)
test_images, test_labels = shapes.dataset(TEST, SIZE)
model = shapes.model{channels = {8, 16}, size = SIZE, dropout = 0.3}
print(model)
local optimizer = optim.Adam(model, {lr = 3e-3})
local train_step = shapes.train_step(model, optimizer)

-- The minibatch of step `step`: the training set in order, BATCH images at a time.
local function batch(step)
  local first = ((step - 1) * BATCH) % TRAIN + 1
  return train_images:narrow(1, first, BATCH), train_labels:narrow(1, first, BATCH)
end

-- Step `step` of the loop. With --freeze, torch.freeze records (and runs) the first step and the
-- others replay its plan on the next batches (strict: a failing guard is an error).
local frozen_step
local function train(step)
  local images, labels = batch(step)
  if not options.freeze then return train_step(images, labels) end
  if step == 1 then
    local loss
    frozen_step = torch.freeze{function(a, b) loss = train_step(a, b); return loss end, images, labels, strict = true}
    return loss
  end
  return frozen_step(images, labels)
end

model:train()
local bar = progress.new{total = options.steps}
for step = 1, options.steps do
  bar:update(step, {loss = train(step)})
end
bar:close()

model:eval()
print(string.format("eval mode:  train accuracy %.1f%%, test accuracy %.1f%%",
                    100 * shapes.accuracy(model, train_images, train_labels),
                    100 * shapes.accuracy(model, test_images, test_labels)))
-- Train mode normalises each batch by its own statistics (and updates the running ones: done last).
model:train()
print(string.format("train mode: test accuracy %.1f%% (batches of 4: BatchNorm uses their statistics, Dropout is on)",
                    100 * shapes.accuracy(model, test_images, test_labels, 4)))
