-- nn.LSTM's fused layer (ops.def's lstm, nn_recurrent.lua): a script run on its own records each
-- layer as one `lstm` node and one `lstm_backward`; where the steps may be looked at (the backward
-- graph kept, as -i and the REPL do; the viewer; a breakpoint) each step is ops. Both forms give the
-- same numbers: outputs, h_n, c_n, and the gradients of the input, the initial state and every
-- parameter, also when the loss reads h_n and c_n (the gradient of the fused node's second output).
-- PyTorch's own numbers for the layer are checked in test_rnn_oracle.lua (which runs fused).
local here = arg[0]:match("^(.*[/\\])") or ""
local check = dofile(here .. "check.lua")

local function ops_in(t)
  local seen = {}
  for _, node in ipairs(torch.graph(t)) do seen[node.op] = (seen[node.op] or 0) + 1 end
  return seen
end

-- One forward and backward of `lstm` on x (and state), the loss reading output, h_n and c_n;
-- returns the values and the gradients, in a fixed order.
local function run(lstm, x, state, fused)
  torch.backends.fused_lstm = fused
  lstm:zero_grad()
  x.grad = nil
  if state then state[1].grad, state[2].grad = nil, nil end
  local out, last = lstm(x, state)
  local loss = (out * out):sum() + (last[1] * 3):sum() + (last[2] * last[2]):sum()
  loss:backward()
  torch.backends.fused_lstm = nil
  local got = {out, last[1], last[2], x.grad}
  if state then got[#got + 1], got[#got + 2] = state[1].grad, state[2].grad end
  for _, p in ipairs(lstm:parameters()) do got[#got + 1] = p.grad end
  return got, out
end

local function same_both_ways(what, lstm, x, state)
  local fused, out_fused = run(lstm, x, state, true)
  local stepped, out_stepped = run(lstm, x, state, false)
  check.equal(#fused, #stepped, what .. ": as many results")
  for i = 1, #fused do check.close(fused[i], stepped[i], 1e-12, what .. ": result " .. i) end
  check.equal(ops_in(out_fused).lstm, lstm.num_layers, what .. ": one lstm node per layer")
  check.equal(ops_in(out_stepped).lstm, nil, what .. ": the steps as ops have no lstm node")
end

torch.manual_seed(3)
local lstm = nn.LSTM(5, 7, {num_layers = 2}):double()
local x = torch.randn(9, 3, 5, {dtype = "float64"}):requires_grad_()
local state = {torch.randn(2, 3, 7, {dtype = "float64"}):requires_grad_(),
               torch.randn(2, 3, 7, {dtype = "float64"}):requires_grad_()}
same_both_ways("2 layers with a state", lstm, x, state)
same_both_ways("2 layers from zeros", lstm, x, nil)
local batch_first = nn.LSTM(4, 6, {batch_first = true}):double()
same_both_ways("batch_first", batch_first, torch.randn(2, 8, 4, {dtype = "float64"}):requires_grad_(), nil)
local one = nn.LSTM(4, 6):double()
same_both_ways("one step", one, torch.randn(1, 2, 4, {dtype = "float64"}):requires_grad_(), nil)
same_both_ways("unbatched", one, torch.randn(5, 4, {dtype = "float64"}):requires_grad_(), nil)

-- Only c_n read: no gradient reaches h (the fused backward reads a 0-d "none").
torch.backends.fused_lstm = true
local only_c = nn.LSTM(3, 4)
local xc = torch.randn(6, 2, 3):requires_grad_()
local _, last = only_c(xc)
last[2]:sum():backward()
local fused_grad = xc.grad
torch.backends.fused_lstm = false
xc.grad = nil
_, last = only_c(xc)
last[2]:sum():backward()
torch.backends.fused_lstm = nil
check.close(fused_grad, xc.grad, 1e-5, "only c_n read: the input's gradient")

-- Which form runs, unless torch.backends.fused_lstm says: fused in a script; the steps as ops
-- where the backward graph is kept (-i, the REPL), so they can be seen and stepped.
local small = nn.LSTM(3, 4)
local seq = torch.randn(5, 2, 3)
check.equal(ops_in(small(seq)).lstm, 1, "a script: fused")
local was = torch.autograd.keep_backward_graph(true)
check.equal(ops_in(small(seq)).lstm, nil, "the backward graph kept: the steps as ops")
check.equal(ops_in(small(seq)).sigmoid, 3 * 5, "the steps' gates")
torch.backends.fused_lstm = true
check.equal(ops_in(small(seq)).lstm, 1, "fused_lstm = true: fused whatever watches")
torch.backends.fused_lstm = nil
torch.autograd.keep_backward_graph(was)

-- A second derivative through the fused layer is refused with the way out; the steps as ops have one.
local p = nn.LSTM(2, 3)
local xs = torch.randn(4, 1, 2):requires_grad_()
local y = p(xs):sum()
local ok, message = pcall(torch.autograd.grad, {y}, {xs}, {create_graph = true})
check.equal(ok, false, "create_graph through the fused layer")
check.equal(message:find("no second derivative", 1, true) ~= nil, true, "the error says why: " .. message)
check.equal(message:find("torch.backends.fused_lstm = false", 1, true) ~= nil, true, "and what to do")
torch.backends.fused_lstm = false
local g = torch.autograd.grad({p(xs):sum()}, {xs}, {create_graph = true})
torch.backends.fused_lstm = nil
local gg = torch.autograd.grad({(g * g):sum()}, {xs})
check.shape(gg, {4, 1, 2}, "a second derivative through the steps as ops")

-- What the fused backward reads is checked for in-place changes, as each step's ops were: W_hh
-- changed between forward and backward (an optimizer step too early) is an error, not a wrong gradient.
local changed = nn.LSTM(2, 3)
local out_changed = changed(torch.randn(4, 1, 2))
torch.no_grad(function() changed.weight_hh_l0:mul_(2) end)
local ok_changed, changed_message = pcall(function() out_changed:sum():backward() end)
check.equal(ok_changed, false, "W_hh changed in place before backward")
check.equal(changed_message:find("lstm", 1, true) ~= nil and changed_message:find("its fourth input", 1, true) ~= nil,
            true, "the error names lstm and W_hh (its fourth input): " .. changed_message)

-- A frozen training step replays the fused layer: the same loss and gradients as eager.
torch.manual_seed(5)
local model = nn.LSTM(3, 8)
local inputs = torch.randn(6, 4, 3)
local function step(xin)
  model:zero_grad()
  local out = model(xin)
  local loss = (out * out):mean()
  loss:backward()
  return loss
end
local frozen = torch.freeze{step, inputs, strict = true}
local eager_loss = step(inputs)
local eager_grad = model.weight_hh_l0.grad:clone()
check.close(frozen(inputs), eager_loss, 1e-6, "frozen loss")
check.close(model.weight_hh_l0.grad, eager_grad, 1e-6, "frozen W_hh gradient")
local plan = tostring(frozen:plan())
check.equal(plan:find("lstm_backward", 1, true) ~= nil and plan:find("= lstm(", 1, true) ~= nil, true,
            "the plan holds lstm and lstm_backward")

-- Bad operands of the op itself name it and the shapes.
check.fails("_lstm", "h0 must be [2,4], got [3,4]", function() torch._lstm(torch.randn(5, 2, 16), torch.zeros(3, 4), torch.zeros(2, 4), torch.randn(16, 4)) end)
check.fails("_lstm", "must be [steps, batch, 4*hidden], got [5,2,15]", function() torch._lstm(torch.randn(5, 2, 15), torch.zeros(2, 4), torch.zeros(2, 4), torch.randn(16, 4)) end)

print("test_lstm_fused: ok")
