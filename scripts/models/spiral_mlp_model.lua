-- spiral_mlp_model.lua: the pieces of spiral_mlp.lua, so that a test can build the same model
-- and training step (tests/lua/test_models_oracle.lua compares them with PyTorch's).
--
--   local spiral = dofile("scripts/models/spiral_mlp_model.lua")
--   local x, y = spiral.dataset(100, 3)           -- 300 points [300, 2], labels 1..3 (int64)
--   local model = spiral.model(100, 3)            -- Linear(2, 100) -> ReLU -> Linear(100, 3)
--   local step = spiral.train_step(model, optim.Adam(model, {lr = 0.01}))
--   local loss = step(x, y)                       -- one forward, backward and optimizer step
local spiral = {}

-- CS231n's spiral: `points_per_class` points on each of `classes` arms. Point i of arm k has
-- radius r = i / (points - 1) and angle 4k + 4r (+ noise 0.2 * randn), so the arms wind around
-- the origin; x = (r sin t, r cos t). Seeded by the caller (torch.manual_seed).
-- Returns the points [classes * points, 2] (float32) and their labels (int64, 1-based).
function spiral.dataset(points_per_class, classes)
  local xs, labels = {}, {}
  for k = 1, classes do
    local radius = torch.linspace(0, 1, points_per_class)
    local angle = torch.linspace((k - 1) * 4, k * 4, points_per_class) + torch.randn(points_per_class) * 0.2
    xs[k] = torch.stack({radius * angle:sin(), radius * angle:cos()}, 2)
    labels[k] = torch.full({points_per_class}, k, {dtype = "int64"})
  end
  return torch.cat(xs, 1), torch.cat(labels, 1)
end

-- The 2-layer MLP: 2 inputs, `hidden` ReLU units, a score per class.
function spiral.model(hidden, classes)
  return nn.Sequential(nn.Linear(2, hidden), nn.ReLU(), nn.Linear(hidden, classes))
end

-- One training step on (x, labels): softmax cross-entropy, backward, optimizer step. Returns the
-- loss (before the step). The function is what spiral_mlp.lua --freeze hands to torch.freeze.
function spiral.train_step(model, optimizer)
  return function(x, labels)
    optimizer:zero_grad()
    local loss = F.cross_entropy(model(x), labels)
    loss:backward()
    optimizer:step()
    return loss
  end
end

-- The fraction of points whose highest score is their label.
function spiral.accuracy(model, x, labels)
  local _, predicted = model(x):max(2)
  return predicted:eq(labels):float():mean():item()
end

return spiral
