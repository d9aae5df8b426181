-- export_cases.lua DIR: freezes the lecture examples and the four models (an inference plan and a
-- training step each), exports every plan to ONNX (backward ops as tapedeck functions, and
-- inlined), then runs each frozen function once more on fresh inputs and writes what it gave.
-- check_onnx_cases.py DIR then runs each model in ONNX Runtime on those inputs and compares.
--
-- For each case NAME, DIR holds:
--   NAME.onnx, NAME.inline.onnx   the model (functions / inlined)
--   NAME.inputs.npz               the fresh arguments, by the graph's input names
--   NAME.expected.npz             the frozen function's results on them, by output name: the
--                                 returned tensors, the gradients (<param>.grad) and the updated
--                                 captured tensors (<param>.new)
-- float32 throughout (the ONNX tests' tolerance: 1e-5 relative to each tensor's largest value).
local dir = assert(arg[1], "usage: tapedeck export_cases.lua DIR")
local here = arg[0]:match("^(.*[/\\])") or "./"
local models_dir = here .. "../../scripts/models/"
local spiral = dofile(models_dir .. "spiral_mlp_model.lua")
local shapes = dofile(models_dir .. "shapes_cnn_model.lua")
local lstm = dofile(models_dir .. "char_lstm_model.lua")
local gpt = dofile(models_dir .. "tiny_gpt_model.lua")

local function leaf(t) return t:requires_grad_() end

-- Each case: make() -> step function, recording arguments, fresh arguments.
local CASES = {}
local function case(name, make) CASES[#CASES + 1] = {name = name, make = make} end

-- --- the lectures' examples ---------------------------------------------------------------------

case("rnn_cell_train", function()   -- the RNN cell, forward + backward (gradients cleared first)
  local W_h, W_x = leaf(torch.randn(20, 20)), leaf(torch.randn(20, 10))
  return function(x, prev_h)
    W_h.grad, W_x.grad = nil, nil
    local next_h = (torch.mm(W_h, prev_h:t()) + torch.mm(W_x, x:t())):tanh()
    local loss = next_h:sum()
    loss:backward()
    return loss, next_h
  end, {torch.randn(1, 10), torch.randn(1, 20)}, {torch.randn(1, 10), torch.randn(1, 20)}
end)

case("rnn_unrolled_train", function()   -- the cell unrolled for 10 steps with h fed back
  local W_h, W_x = leaf(torch.randn(8, 8) * 0.3), leaf(torch.randn(8, 4) * 0.3)
  return function(h0, xs)
    W_h.grad, W_x.grad = nil, nil
    local h = h0
    for t = 1, 10 do h = (W_h:mm(h) + W_x:mm(xs[t])):tanh() end
    local loss = h:sum()
    loss:backward()
    return loss
  end, {torch.randn(8, 1), torch.randn(10, 4, 1)}, {torch.randn(8, 1), torch.randn(10, 4, 1)}
end)

case("two_layer_net_sgd", function()   -- the lecture's two-layer net: relu, squared error, SGD by hand
  local w1, w2 = leaf(torch.randn(50, 20) * 0.1), leaf(torch.randn(20, 5) * 0.1)
  return function(x, y)
    w1.grad, w2.grad = nil, nil
    local loss = (x:mm(w1):clamp{min = 0}:mm(w2) - y):pow(2):sum()
    loss:backward()
    torch.no_grad(function()
      w1:sub_(w1.grad * 1e-3)
      w2:sub_(w2.grad * 1e-3)
    end)
    return loss
  end, {torch.randn(16, 50), torch.randn(16, 5)}, {torch.randn(16, 50), torch.randn(16, 5)}
end)

case("sigmoid_neuron_train", function()
  local w, b = leaf(torch.randn(3)), leaf(torch.randn(1))
  return function(x)
    w.grad, b.grad = nil, nil
    local y = torch.sigmoid((w * x):sum() + b)
    y:backward()
    return y
  end, {torch.randn(3)}, {torch.randn(3)}
end)

case("svm_softmax_losses", function()   -- the linear classifier's two losses and their gradient
  local W = leaf(torch.randn(10, 4) * 0.01)
  return function(x, labels)
    W.grad = nil
    local scores = x:mm(W)
    local loss = F.multi_margin_loss(scores, labels) + F.cross_entropy(scores, labels)
    loss:backward()
    return loss
  end, {torch.randn(6, 10), torch.tensor({1, 2, 3, 4, 1, 2}):long()}, {torch.randn(6, 10), torch.tensor({4, 3, 2, 1, 4, 1}):long()}
end)

case("small_cnn_train", function()   -- conv, relu, max pool, linear, nll on log_softmax; SGD
  torch.manual_seed(3)
  local model = nn.Sequential(nn.Conv2d(2, 4, 3, {padding = 1, stride = 2}), nn.ReLU(), nn.MaxPool2d(2),
                              nn.Flatten(), nn.Linear(4 * 2 * 2, 3))
  local opt = optim.SGD(model:parameters(), {lr = 0.1, momentum = 0.9})
  return function(x, labels)
    opt:zero_grad()
    local loss = F.nll_loss(F.log_softmax(model(x), 2), labels)
    loss:backward()
    opt:step()
    return loss
  end, {torch.randn(3, 2, 9, 9), torch.tensor({1, 2, 3}):long()}, {torch.randn(3, 2, 9, 9), torch.tensor({3, 1, 2}):long()}
end)

-- --- the four models: inference (eval mode, forward only) and one training step -------------------

local function model_cases(name, build, batch, make_step, infer)
  case(name .. "_infer", function()
    torch.manual_seed(7)
    local model = build()
    model:eval()
    torch.manual_seed(11)
    local x1 = batch()
    local x2 = batch()
    return function(x) return infer(model, x) end, {x1}, {x2}, true
  end)
  case(name .. "_train", function()
    torch.manual_seed(7)
    local model = build()
    local step = make_step(model)
    torch.manual_seed(11)
    local x1, y1 = batch()
    local x2, y2 = batch()
    return step, {x1, y1}, {x2, y2}
  end)
end

model_cases("spiral_mlp", function() return spiral.model(16, 3) end,
  function() return spiral.dataset(10, 3) end,
  function(model) return spiral.train_step(model, optim.Adam(model, {lr = 1e-2})) end,
  function(model, x) return model(x) end)

model_cases("shapes_cnn", function() return shapes.model{channels = {4, 8}, size = 8, dropout = 0} end,
  function() return shapes.dataset(6, 8) end,
  -- SGD, not Adam: the convolutions' biases sit before batch norm, so their gradients are rounding
  -- noise (~1e-8), which Adam scales up to steps of lr, differently in any two engines.
  function(model) return shapes.train_step(model, optim.SGD(model:parameters(), {lr = 0.05, momentum = 0.9})) end,
  function(model, x) return model(x) end)

model_cases("char_lstm", function() return lstm.CharLSTM(13, {embed_dim = 8, hidden_size = 16, num_layers = 1}) end,
  function() return torch.randint(1, 14, {4, 6}), torch.randint(1, 14, {4, 6}) end,
  function(model) return lstm.make_train_step(model, optim.Adam(model, {lr = 1e-2}), 1.0) end,
  function(model, x) return (model(x)) end)

model_cases("tiny_gpt", function() return gpt.GPT(gpt.config{block_size = 8, vocab_size = 11, n_layer = 2, n_head = 2, n_embd = 8}) end,
  function() return torch.randint(1, 12, {3, 8}), torch.randint(1, 12, {3, 8}) end,
  function(model) return gpt.train_step(model, model:configure_optimizers(0.1, 1e-3, {0.9, 0.95})) end,
  function(model, x) return (model(x)) end)

-- --- export, run again, write ------------------------------------------------------------------

local function run_case(c)
  local step, args, fresh = c.make()
  local spec = {step, table.unpack(args)}
  spec.strict = true
  local f = torch.freeze(spec)
  local exported = torch.onnx.export(f, dir .. "/" .. c.name .. ".onnx", {quiet = true})
  torch.onnx.export(f, dir .. "/" .. c.name .. ".inline.onnx", {inline = true, quiet = true})
  local inputs = {}
  for i, name in ipairs(exported.arguments) do inputs[name] = fresh[i] end
  local results = table.pack(f(table.unpack(fresh)))
  local expected = {}
  for _, name in ipairs(exported.outputs) do
    local output_k = name == "output" and 1 or tonumber(name:match("^output_(%d+)$"))
    local param, what = name:match("^(.*)%.(%a+)$")
    if output_k then expected[name] = results[output_k]
    elseif what == "grad" then expected[name] = exported.captured[param].grad
    elseif what == "new" then expected[name] = exported.captured[param]
    else error(c.name .. ": an output the test does not know: " .. name) end
    assert(expected[name], c.name .. ": no value for output " .. name)
  end
  torch.save(inputs, dir .. "/" .. c.name .. ".inputs.npz")
  torch.save(expected, dir .. "/" .. c.name .. ".expected.npz")
  print(string.format("%-22s %4d nodes %2d functions  outputs: %s", c.name, exported.nodes, exported.functions,
                      table.concat(exported.outputs, " ")))
end

local only = arg[2]
for _, c in ipairs(CASES) do
  if not only or c.name:find(only, 1, true) then run_case(c) end
end
