-- nn_recurrent.lua: the recurrent modules of PyTorch's torch.nn — RNNCell, LSTMCell, GRUCell,
-- RNN, LSTM, GRU — written in Lua over torch's ops (linear, addmm, sigmoid, tanh, chunk, stack),
-- so their backward is the engine's and every step is nodes on the tape, recorded inside the
-- module's scope ("lstm:LSTM"). Embedded in tapedeck and loaded after nn.lua, into the same `nn`.
--
-- Names, gate order and initialisation are PyTorch's, so a PyTorch state_dict loads unchanged:
--   weight_ih_l{k} [G*H, in], weight_hh_l{k} [G*H, H], bias_ih_l{k} [G*H], bias_hh_l{k} [G*H]
--   (cells: weight_ih, weight_hh, bias_ih, bias_hh), G gates stacked in the order
--   LSTM: i, f, g, o     GRU: r, z, n     RNN: one
-- every parameter uniform in ±1/sqrt(hidden_size).
--
-- PyTorch's tuples in Lua: a tuple returned at the top level is several returns, a tuple inside
-- one is a table, as PyTorch writes them:
--   output, h_n = rnn(x [, h_0])                 output, {h_n, c_n} = lstm(x [, {h_0, c_0}])
--   h' = rnn_cell(x [, h])                       h', c' = lstm_cell(x [, {h, c}])
-- so `output, state = lstm(x, state)` carries the state from one call to the next.
--
-- [SECTION]s: one time step; shared constructor checks; cells (RNNCell, LSTMCell, GRUCell); RNN,
-- LSTM, GRU over the whole sequence.
local nn = require "nn"
local errors = require "tapedeck.errors"
local fail, describe = errors.fail, errors.describe
local helpers = nn._helpers
local check_integer, check_options, check_dtype = helpers.check_integer, helpers.check_options, helpers.check_dtype
local check_boolean, check_number, py_repr = helpers.check_boolean, helpers.check_number, helpers.py_repr
local named, uniform_parameter = helpers.named, helpers.uniform_parameter
local declare_options, place_on_device = helpers.declare_options, helpers.place_on_device

-- Gates per kind, stacked along the rows of weight_ih / weight_hh.
local GATES = {RNN = 1, LSTM = 4, GRU = 3}

-- ============================================================================================
-- One time step. xw is the input's projection x W_ihᵀ + b_ih for this step ([B, G*H]; for RNN
-- and LSTM b_hh is added in too), h (and c) the state, w_hh_t = W_hhᵀ [H, G*H].

local function rnn_step(xw, h, w_hh_t, nonlinearity)
  local pre = torch.addmm(xw, h, w_hh_t)
  if nonlinearity == "relu" then return pre:relu() end
  return pre:tanh()
end

-- PyTorch's LSTM: i, f, o = sigmoid(...), g = tanh(...), c' = f c + i g, h' = o tanh(c').
local function lstm_step(xw, h, c, w_hh_t)
  local i, f, g, o = table.unpack(torch.addmm(xw, h, w_hh_t):chunk(4, 2))
  local c_next = f:sigmoid() * c + i:sigmoid() * g:tanh()
  local h_next = o:sigmoid() * c_next:tanh()
  return h_next, c_next
end

-- PyTorch's GRU: r, z = sigmoid(x_r + h_r), sigmoid(x_z + h_z), n = tanh(x_n + r (W_hn h + b_hn)),
-- h' = (1 - z) n + z h, computed as PyTorch's CPU kernel does: n + z (h - n). b_hh is separate
-- here (r multiplies the hidden part of n only).
local function gru_step(xw, h, w_hh_t, b_hh)
  local hw = b_hh and torch.addmm(b_hh, h, w_hh_t) or h:mm(w_hh_t)
  local x_r, x_z, x_n = table.unpack(xw:chunk(3, 2))
  local h_r, h_z, h_n = table.unpack(hw:chunk(3, 2))
  local r = (x_r + h_r):sigmoid()
  local z = (x_z + h_z):sigmoid()
  local n = (x_n + r * h_n):tanh()
  return n + z * (h - n)
end

-- The input projection of x ([..., in]) for a kind: x W_ihᵀ + b_ih (+ b_hh but for GRU), the two
-- biases added together first (one [G*H] sum, not one per step and batch row).
local function input_projection(kind, x, w_ih, b_ih, b_hh)
  if b_hh and kind ~= "GRU" then b_ih = b_ih + b_hh end
  return torch.linear(x, w_ih, b_ih)
end

-- One step of any kind: the new h and, for LSTM, c.
local function step(kind, xw, h, c, w_hh_t, b_hh, nonlinearity)
  if kind == "LSTM" then return lstm_step(xw, h, c, w_hh_t) end
  if kind == "GRU" then return gru_step(xw, h, w_hh_t, b_hh) end
  return rnn_step(xw, h, w_hh_t, nonlinearity)
end

-- ============================================================================================
-- Shared constructor checks

local function check_sizes(class, input_size, hidden_size)
  return check_integer(class, "input_size", input_size, 1), check_integer(class, "hidden_size", hidden_size, 1)
end

local function check_nonlinearity(class, v)
  if v == nil then return "tanh" end
  if v ~= "tanh" and v ~= "relu" then fail(class .. ": nonlinearity must be \"tanh\" or \"relu\", got " .. describe(v)) end
  return v
end

-- Registers weight_ih{suffix}, weight_hh{suffix} (and the biases) in PyTorch's order.
local function add_weights(module, class, suffix, in_size, gates_h, hidden, bias, dtype)
  local bound = 1 / math.sqrt(hidden)
  module["weight_ih" .. suffix] = named(class, uniform_parameter, {gates_h, in_size}, bound, dtype)
  module["weight_hh" .. suffix] = named(class, uniform_parameter, {gates_h, hidden}, bound, dtype)
  if bias then
    module["bias_ih" .. suffix] = named(class, uniform_parameter, {gates_h}, bound, dtype)
    module["bias_hh" .. suffix] = named(class, uniform_parameter, {gates_h}, bound, dtype)
  end
end

-- A tensor's shape as "[2,3]".
local function shape_text(t) return tostring(t.shape) end

-- x's dtype must be the parameters' (PyTorch refuses a mix too; a silent promotion would change
-- the dtype of everything downstream).
local function check_input_dtype(class, x, weight)
  if x.dtype ~= weight.dtype then
    fail(string.format("%s: input is %s but the parameters are %s (convert one: x:to(\"%s\") or model:to(\"%s\"))",
                       class, x.dtype, weight.dtype, weight.dtype, x.dtype))
  end
end

-- ============================================================================================
-- Cells: one step, x [B, in] or unbatched [in]; h (and c) [B, H] or [H], zeros when not given.

local function define_cell(class, kind)
  local Cell = nn.Module:extend(class)
  nn[class] = Cell
  local known = declare_options("nn." .. class, kind == "RNN" and {"bias", "nonlinearity", "device", "dtype"} or
                                                  {"bias", "device", "dtype"})

  function Cell:init(input_size, hidden_size, opts)
    input_size, hidden_size = check_sizes(class, input_size, hidden_size)
    opts = check_options(known, opts, "{bias = false}")
    local dtype = check_dtype(class, opts.dtype, opts.device)
    self.input_size, self.hidden_size = input_size, hidden_size
    self.bias = check_boolean(class, "bias", opts.bias, true)
    if kind == "RNN" then self.nonlinearity = check_nonlinearity(class, opts.nonlinearity) end
    add_weights(self, class, "", input_size, GATES[kind] * hidden_size, hidden_size, self.bias, dtype)
    place_on_device(self, opts.device)
  end

  -- The state given for a cell: h, or {h, c} for LSTMCell; checked against x's batch.
  local function cell_state(self, x, state)
    local H = self.hidden_size
    local batched = x:dim() == 2
    local shape = batched and {x:size(1), H} or {H}
    local expected = batched and string.format("[%d,%d]", x:size(1), H) or string.format("[%d]", H)
    local function one(t, what)
      if t == nil then return torch.zeros(shape, {dtype = x.dtype, device = x.device}) end
      if not torch.is_tensor(t) then fail(string.format("%s: %s must be a tensor, got %s", class, what, describe(t))) end
      if shape_text(t) ~= expected then
        fail(string.format("%s: %s must be %s for the input %s, got %s", class, what, expected, shape_text(x), shape_text(t)))
      end
      return t
    end
    if kind ~= "LSTM" then return one(state, "hx") end
    if state == nil then return one(nil), one(nil) end
    if type(state) ~= "table" or torch.is_tensor(state) then
      fail(class .. ": the state must be a table {h, c} (PyTorch's tuple), got " .. describe(state))
    end
    return one(state[1], "h"), one(state[2], "c")
  end

  function Cell:forward(x, state)
    if not torch.is_tensor(x) then fail(class .. ": input must be a tensor, got " .. describe(x)) end
    if (x:dim() ~= 1 and x:dim() ~= 2) or x:size(-1) ~= self.input_size then
      fail(string.format("%s: input must be [batch, %d] or [%d], got %s", class, self.input_size, self.input_size, shape_text(x)))
    end
    check_input_dtype(class, x, self.weight_ih)
    local h, c = cell_state(self, x, state)
    local batched = x:dim() == 2
    if not batched then
      x, h, c = x:unsqueeze(1), h:unsqueeze(1), c and c:unsqueeze(1)
    end
    local xw = input_projection(kind, x, self.weight_ih, self.bias_ih, self.bias_hh)
    local h_next, c_next = step(kind, xw, h, c, self.weight_hh:t(), self.bias_hh, self.nonlinearity)
    if not batched then h_next, c_next = h_next:squeeze(1), c_next and c_next:squeeze(1) end
    return h_next, c_next
  end

  function Cell:extra_repr()
    local s = string.format("%d, %d", self.input_size, self.hidden_size)
    if not self.bias then s = s .. ", bias=False" end
    if kind == "RNN" and self.nonlinearity ~= "tanh" then s = s .. ", nonlinearity=" .. self.nonlinearity end
    return s
  end
end

define_cell("RNNCell", "RNN")
define_cell("LSTMCell", "LSTM")
define_cell("GRUCell", "GRU")

-- ============================================================================================
-- RNN, LSTM, GRU: the whole sequence, num_layers stacked. x [T, B, in] ([B, T, in] with
-- batch_first), or unbatched [T, in]; the state [num_layers, B, H] (unbatched [num_layers, H]).

-- Whether an LSTM layer runs as one fused node (ops.def's lstm: the whole sequence in one kernel,
-- as PyTorch's nn.LSTM runs oneDNN's or cuDNN's) rather than as ops step by step.
-- torch.backends.fused_lstm decides when set (true or false); left nil, the layer is fused on
-- the CPU when nobody may look inside its steps: a script run on its own, with no viewer and no
-- breakpoint (-i, the REPL, the viewer and the debugger see every gate of every step).
local function fused_lstm(kind, xs)
  if kind ~= "LSTM" or xs.device ~= "cpu" then return false end
  local choice = torch.backends.fused_lstm
  if choice ~= nil then return choice end
  return not torch._steps_watched()
end

-- Runs one layer over the sequence xs [T, B, in]: outputs [T, B, H], the last h and c.
local function run_layer(kind, xs, h, c, w_ih, w_hh, b_ih, b_hh, nonlinearity)
  local xw = input_projection(kind, xs, w_ih, b_ih, b_hh)   -- every step's at once: [T, B, G*H]
  if fused_lstm(kind, xs) and xs:size(1) > 0 then
    local hs, state = torch._lstm(xw, h, c, w_hh)
    local H = w_hh:size(2)
    return hs, hs[-1], state[-1]:narrow(2, 4 * H + 1, H)
  end
  local w_hh_t = w_hh:t()
  local outputs = {}
  for t = 1, xs:size(1) do
    -- each time step in a scope of its own ("step 3"): the viewer folds the steps inside the box
    -- of the module's call (library lines all read as the caller's, so they cannot tell steps apart)
    h, c = torch.scope("step " .. t, step, kind, xw[t], h, c, w_hh_t, b_hh, nonlinearity)
    outputs[t] = h
  end
  return torch.stack(outputs), h, c
end

-- An RNN, LSTM or GRU module's input x as [T, B, in], and whether it was batched.
local function time_major(class, self, x)
  if not torch.is_tensor(x) then fail(class .. ": input must be a tensor, got " .. describe(x)) end
  local layout = self.batch_first and "[batch, seq, %d]" or "[seq, batch, %d]"
  if (x:dim() ~= 2 and x:dim() ~= 3) or x:size(-1) ~= self.input_size then
    fail(string.format("%s: input must be " .. layout .. " or [seq, %d], got %s", class, self.input_size,
                       self.input_size, shape_text(x)))
  end
  check_input_dtype(class, x, self.weight_ih_l0)
  if x:dim() == 2 then return x:unsqueeze(2), false end
  if self.batch_first then return x:transpose(1, 2), true end
  return x, true
end

-- Such a module's initial state as per-layer lists of [B, H] tensors (zeros when not given).
local function initial_state(class, kind, self, state, batch, batched)
  local L, H = self.num_layers, self.hidden_size
  local expected = batched and string.format("[%d,%d,%d]", L, batch, H) or string.format("[%d,%d]", L, H)
  local function layers_of(t, what)
    if t == nil then
      local zero = torch.zeros({batch, H}, {dtype = self.weight_ih_l0.dtype, device = self.weight_ih_l0.device})
      local list = {}
      for layer = 1, L do list[layer] = zero end
      return list
    end
    if not torch.is_tensor(t) then fail(string.format("%s: %s must be a tensor, got %s", class, what, describe(t))) end
    if shape_text(t) ~= expected then
      fail(string.format("%s: %s must be %s (num_layers, batch, hidden_size), got %s", class, what, expected, shape_text(t)))
    end
    if not batched then t = t:unsqueeze(2) end
    return t:unbind(1)
  end
  if kind ~= "LSTM" then return layers_of(state, "h_0") end
  if state == nil then return layers_of(nil), layers_of(nil) end
  if type(state) ~= "table" or torch.is_tensor(state) then
    fail(class .. ": the state must be a table {h_0, c_0} (PyTorch's tuple), got " .. describe(state))
  end
  return layers_of(state[1], "h_0"), layers_of(state[2], "c_0")
end

-- nn[class]: the module of this kind (RNN, LSTM or GRU), PyTorch's options, parameters and repr.
local function define_rnn(class, kind)
  local Module = nn.Module:extend(class)
  nn[class] = Module
  local keys = {"num_layers", "bias", "batch_first", "dropout", "bidirectional", "proj_size", "device", "dtype"}
  if kind == "RNN" then table.insert(keys, 2, "nonlinearity") end
  local known = declare_options("nn." .. class, keys)

  function Module:init(input_size, hidden_size, opts)
    input_size, hidden_size = check_sizes(class, input_size, hidden_size)
    opts = check_options(known, opts, "{num_layers = 2, batch_first = true}")
    local dtype = check_dtype(class, opts.dtype, opts.device)
    if check_boolean(class, "bidirectional", opts.bidirectional, false) then
      fail(class .. ": bidirectional = true is not supported (only one direction)")
    end
    if opts.proj_size ~= nil and opts.proj_size ~= 0 then fail(class .. ": proj_size is not supported (only 0)") end
    self.input_size, self.hidden_size = input_size, hidden_size
    self.num_layers = opts.num_layers == nil and 1 or check_integer(class, "num_layers", opts.num_layers, 1)
    self.bias = check_boolean(class, "bias", opts.bias, true)
    self.batch_first = check_boolean(class, "batch_first", opts.batch_first, false)
    self.dropout = check_number(class, "dropout", opts.dropout, 0)
    if self.dropout < 0 or self.dropout > 1 then fail(class .. ": dropout must be in [0, 1], got " .. describe(self.dropout)) end
    if kind == "RNN" then self.nonlinearity = check_nonlinearity(class, opts.nonlinearity) end
    for layer = 0, self.num_layers - 1 do
      local in_size = layer == 0 and input_size or hidden_size
      add_weights(self, class, "_l" .. layer, in_size, GATES[kind] * hidden_size, hidden_size, self.bias, dtype)
    end
    place_on_device(self, opts.device)
  end

  -- output, h_n (LSTM: output, {h_n, c_n}).
  function Module:forward(x, state)
    local xs, batched = time_major(class, self, x)
    local hs, cs = initial_state(class, kind, self, state, xs:size(2), batched)
    local h_n, c_n = {}, {}
    for layer = 0, self.num_layers - 1 do
      if layer > 0 and self.dropout > 0 and self.training then xs = nn.functional.dropout(xs, self.dropout, true) end
      local suffix = "_l" .. layer
      xs, h_n[layer + 1], c_n[layer + 1] = run_layer(kind, xs, hs[layer + 1], cs and cs[layer + 1],
                                                     self["weight_ih" .. suffix], self["weight_hh" .. suffix],
                                                     self["bias_ih" .. suffix], self["bias_hh" .. suffix], self.nonlinearity)
    end
    local h_last, c_last = torch.stack(h_n), cs and torch.stack(c_n)
    if not batched then
      xs, h_last, c_last = xs:squeeze(2), h_last:squeeze(2), c_last and c_last:squeeze(2)
    elseif self.batch_first then
      xs = xs:transpose(1, 2)
    end
    if kind == "LSTM" then return xs, {h_last, c_last} end
    return xs, h_last
  end

  -- PyTorch's RNNBase.extra_repr: the options that are not their defaults (not nonlinearity, as PyTorch).
  function Module:extra_repr()
    local s = string.format("%d, %d", self.input_size, self.hidden_size)
    if self.num_layers ~= 1 then s = s .. ", num_layers=" .. self.num_layers end
    if not self.bias then s = s .. ", bias=False" end
    if self.batch_first then s = s .. ", batch_first=True" end
    if self.dropout ~= 0 then s = s .. ", dropout=" .. py_repr(self.dropout) end
    return s
  end
end

define_rnn("RNN", "RNN")
define_rnn("LSTM", "LSTM")
define_rnn("GRU", "GRU")

return nn
