-- The recurrent modules against PyTorch (tests/oracle/make_rnn_oracle.py -> rnn_oracle_data.lua):
-- RNN, LSTM, GRU (1-2 layers, batch_first or not, with and without an initial state, unbatched,
-- no bias) and their cells, built by their Lua constructors and loaded with PyTorch's float64
-- parameters by name; the outputs, final states and the gradients of the input, the initial
-- state and every parameter within 1e-10. Then printing, and the errors for bad input.
local here = arg[0]:match("^(.*[/\\])") or ""
local check = dofile(here .. "check.lua")
local oracle = dofile(here .. "../oracle/rnn_oracle_data.lua")

local tensor_of, close = check.entry_tensor, check.matches

-- The module's outputs as a flat list, in the order the oracle lists them.
local function run(module, case, x, state)
  if case.name:find("Cell") then
    if case.call == "hc" then return {module(x, state)} end
    return {module(x, state and state[1])}
  end
  local arg = case.call == "hc" and state or (state and state[1])
  local output, last = module(x, arg)
  if type(last) == "table" then return {output, last[1], last[2]} end
  return {output, last}
end

for _, case in ipairs(oracle.cases) do
  local module = load("return " .. case.lua)()
  module:double()
  -- the parameters' names and order are PyTorch's
  local names = {}
  for i, pair in ipairs(module:named_parameters()) do names[i] = pair[1] end
  check.equal(table.concat(names, " "), table.concat(case.param_names, " "), case.name .. ": parameter names")
  local sd = {}
  for key, entry in pairs(case.params) do sd[key] = tensor_of(entry) end
  module:load_state_dict(sd)

  local x = tensor_of(case.input):requires_grad_()
  local state
  if #case.state > 0 then
    state = {}
    for i, entry in ipairs(case.state) do state[i] = tensor_of(entry):requires_grad_() end
  end
  local outputs = run(module, case, x, state)
  check.equal(#outputs, #case.outputs, case.name .. ": number of outputs")
  local loss
  for i, out in ipairs(outputs) do
    close(out, case.outputs[i], case.name .. ": output " .. i)
    local term = (out * tensor_of(case.R[i])):sum()
    loss = loss and loss + term or term
  end
  loss:backward()
  close(x.grad, case.input_grad, case.name .. ": input gradient")
  for i, entry in ipairs(case.state_grads) do close(state[i].grad, entry, case.name .. ": state " .. i .. " gradient") end
  for _, pair in ipairs(module:named_parameters()) do
    close(pair[2].grad, case.grads[pair[1]], case.name .. ": gradient of " .. pair[1])
  end
end

-- printed as PyTorch prints them
for _, entry in ipairs(oracle.reprs) do
  check.equal(tostring(load("return " .. entry.lua)()), entry.text, entry.lua)
end

-- PyTorch's default init: uniform in ±1/sqrt(hidden_size), reproducible with the seed.
torch.manual_seed(1)
local lstm = nn.LSTM(3, 100, {num_layers = 2})
local bound = 1 / math.sqrt(100)
for _, p in ipairs(lstm:parameters()) do
  check.equal(p:abs():max():item() <= bound, true, "init within ±1/sqrt(hidden)")
end
check.equal(lstm.weight_hh_l1:abs():max():item() > 0.9 * bound, true, "init fills the range")
torch.manual_seed(1)
check.close(nn.LSTM(3, 100, {num_layers = 2}).bias_hh_l1, lstm.bias_hh_l1, 0, "init reproducible")

-- Shapes: float32, the state carried from one call to the next, dropout only in training.
local gru = nn.GRU(3, 5, {num_layers = 2, batch_first = true, dropout = 0.5})
local out, h = gru(torch.randn(2, 7, 3))
check.shape(out, {2, 7, 5}, "GRU batch_first output")
check.shape(h, {2, 2, 5}, "GRU h_n")
gru:eval()
local x = torch.randn(2, 7, 3)
check.close(gru(x), gru(x), 0, "eval: no dropout")
local lstm_small = nn.LSTM(3, 4)
local seq = torch.randn(6, 2, 3)
local whole, whole_state = lstm_small(seq)
local first, state = lstm_small(seq:narrow(1, 1, 3))
local second, second_state = lstm_small(seq:narrow(1, 4, 3), state)
check.close(torch.cat({first, second}, 1), whole, 1e-6, "LSTM state carried between calls")
check.close(second_state[2], whole_state[2], 1e-6, "LSTM c_n carried between calls")
-- the cells step by step give the sequence module's numbers (same weights)
local cell = nn.LSTMCell(3, 4)
cell:load_state_dict({weight_ih = lstm_small.weight_ih_l0, weight_hh = lstm_small.weight_hh_l0,
                      bias_ih = lstm_small.bias_ih_l0, bias_hh = lstm_small.bias_hh_l0})
local hx, cx
for t = 1, 6 do hx, cx = cell(seq[t], hx and {hx, cx}) end
check.close(hx, whole_state[1][1], 1e-6, "LSTMCell loop = LSTM")
-- a script run on its own records the layer as one fused node (test_lstm_fused.lua); with the
-- steps as ops, every step's nodes are recorded inside the module's scope
local function scoped_ops(t, op)
  local n = 0
  for _, node in ipairs(torch.graph(t)) do
    if node.scope and node.scope:find("LSTM", 1, true) and node.op == op then n = n + 1 end
  end
  return n
end
check.equal(scoped_ops(whole, "lstm"), 1, "one fused lstm node in the LSTM's scope")
torch.backends.fused_lstm = false
local stepped = lstm_small(seq)
torch.backends.fused_lstm = nil
check.close(stepped, whole, 1e-6, "the steps as ops give the fused layer's numbers")
check.equal(scoped_ops(stepped, "sigmoid"), 3 * 6, "sigmoid nodes in the LSTM's scope")

-- Errors name the module, the values and the user's line.
check.fails("LSTM", "bidirectional = true is not supported", function() nn.LSTM(3, 4, {bidirectional = true}) end)
check.fails("nn.GRU", "unknown option 'num_layer' (did you mean 'num_layers'?", function() nn.GRU(3, 4, {num_layer = 2}) end)
check.fails("RNN", "nonlinearity must be \"tanh\" or \"relu\"", function() nn.RNN(3, 4, {nonlinearity = "gelu"}) end)
check.fails("LSTM", "hidden_size must be an integer >= 1", function() nn.LSTM(3, 0) end)
check.fails("LSTM", "input must be [seq, batch, 3] or [seq, 3], got [6,2,4]", function() lstm_small(torch.randn(6, 2, 4)) end)
check.fails("LSTM", "h_0 must be [1,2,4]", function() lstm_small(seq, {torch.zeros(1, 3, 4), torch.zeros(1, 3, 4)}) end)
check.fails("LSTM", "the state must be a table {h_0, c_0}", function() lstm_small(seq, torch.zeros(1, 2, 4)) end)
check.fails("LSTM", "input is float64 but the parameters are float32", function() lstm_small(seq:double()) end)
check.fails("GRUCell", "hx must be [2,5]", function() nn.GRUCell(3, 5)(torch.randn(2, 3), torch.zeros(3, 5)) end)
check.fails("LSTMCell", "input must be [batch, 3] or [3]", function() cell(torch.randn(2, 2, 3)) end)

print("test_rnn_oracle: ok")
