-- shapes_cnn_model.lua: the pieces of shapes_cnn.lua, so that a test can build the same model
-- and training step (tests/lua/test_models_oracle.lua compares them with PyTorch's).
--
--   local shapes = dofile("scripts/models/shapes_cnn_model.lua")
--   local images, labels = shapes.dataset(600, 16)   -- [600, 1, 16, 16] float32, labels 1..3
--   local model = shapes.model{}                      -- the conv net below
--   local step = shapes.train_step(model, optim.Adam(model, {lr = 3e-3}))
local shapes = {}

shapes.CLASSES = {"square", "circle", "triangle"}

-- Whether the pixel centre (px, py) is inside a shape of class k centred at (cx, cy), of
-- half-size s (triangle: apex up, base down).
local function inside(k, px, py, cx, cy, s)
  local dx, dy = px - cx, py - cy
  if k == 1 then return math.abs(dx) <= s and math.abs(dy) <= s end
  if k == 2 then return dx * dx + dy * dy <= s * s * 1.2 end
  return dy >= -s and dy <= s and math.abs(dx) <= (dy + s) / 2
end

-- `n` images of `size` x `size` pixels, each a square, circle or triangle (in turn) of random
-- half-size (a fifth to a third of the image) at a random position, drawn as 1 on 0, plus
-- Gaussian noise (0.25). Seeded by the caller (torch.manual_seed).
-- Returns images [n, 1, size, size] (float32) and labels [n] (int64, 1-based: shapes.CLASSES).
function shapes.dataset(n, size)
  local draws = torch.rand({n, 3}):totable()
  local pixels, labels = {}, {}
  for i = 1, n do
    local k = (i - 1) % 3 + 1
    local s = size * (0.2 + 0.13 * draws[i][1])
    local cx = s + 0.5 + (size - 2 * s - 1) * draws[i][2]
    local cy = s + 0.5 + (size - 2 * s - 1) * draws[i][3]
    local image = {}
    for y = 1, size do
      image[y] = {}
      for x = 1, size do image[y][x] = inside(k, x - 0.5, y - 0.5, cx, cy, s) and 1 or 0 end
    end
    pixels[i], labels[i] = {image}, k
  end
  local noise = torch.randn({n, 1, size, size}) * 0.25
  return torch.tensor(pixels) + noise, torch.tensor(labels, {dtype = "int64"})
end

-- The conv net: two blocks of Conv2d(3x3, padding 1) -> BatchNorm2d -> ReLU -> MaxPool2d(2),
-- then Flatten -> Dropout -> Linear to the 3 classes.
--   opts.channels  {c1, c2} (default {8, 16})     opts.size     the image side (default 16)
--   opts.dropout   Dropout's p (default 0.3)
function shapes.model(opts)
  local c1, c2 = table.unpack(opts.channels or {8, 16})
  local size = opts.size or 16
  local dropout = opts.dropout or 0.3
  return nn.Sequential(
    nn.Conv2d(1, c1, 3, {padding = 1}), nn.BatchNorm2d(c1), nn.ReLU(), nn.MaxPool2d(2),
    nn.Conv2d(c1, c2, 3, {padding = 1}), nn.BatchNorm2d(c2), nn.ReLU(), nn.MaxPool2d(2),
    nn.Flatten(), nn.Dropout(dropout), nn.Linear(c2 * (size // 4) * (size // 4), #shapes.CLASSES))
end

-- One training step on a batch: cross-entropy, backward, optimizer step; returns the loss.
function shapes.train_step(model, optimizer)
  return function(images, labels)
    optimizer:zero_grad()
    local loss = F.cross_entropy(model(images), labels)
    loss:backward()
    optimizer:step()
    return loss
  end
end

-- The fraction of images classified right, in whatever mode (train/eval) the model is in,
-- `batch` images at a time (default: all at once).
function shapes.accuracy(model, images, labels, batch)
  local n = images.shape[1]
  batch = batch or n
  local right = 0
  torch.no_grad(function()
    for first = 1, n, batch do
      local count = math.min(batch, n - first + 1)
      local _, predicted = model(images:narrow(1, first, count)):max(2)
      right = right + predicted:eq(labels:narrow(1, first, count)):sum():item()
    end
  end)
  return right / n
end

return shapes
