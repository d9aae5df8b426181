-- char_lstm.lua: a character-level LSTM language model, trained on the GNU GPL's text (every
-- Debian machine has it), then asked to write 200 characters of its own.
--
--   tapedeck scripts/models/char_lstm.lua [--steps N] [--freeze]
--
-- --freeze runs the training step through torch.freeze: the first step is recorded, the others
-- replay the plan, and the losses are eager's (within float32 rounding).
local here = arg[0]:match("^(.*[/\\])") or "./"
local M = dofile(here .. "char_lstm_model.lua")
local progress = require "tapedeck.progress"
local options = require("tapedeck.args").parse{steps = 300, freeze = false}
local steps, freeze = options.steps, options.freeze
assert(steps >= 1, "--steps must be at least 1")

-- The text: the first 20,000 characters; the vocabulary: the characters in them.
local file = assert(io.open("/usr/share/common-licenses/GPL-3"))
local text = file:read("a"):sub(1, 20000)
file:close()
local chars, index_of = {}, {}
for c in text:gmatch(".") do
  if not index_of[c] then chars[#chars + 1] = c; index_of[c] = true end
end
table.sort(chars)
for i, c in ipairs(chars) do index_of[c] = i end
local codes = {}
for i = 1, #text do codes[i] = index_of[text:sub(i, i)] end
local data = torch.tensor(codes, {dtype = "int64"})

-- A batch: B windows of T characters at random places (x), and the characters after them (y).
local B, T = 16, 32
local function get_batch()
  local starts = torch.randint(1, #text - T, {B, 1})
  local positions = (starts + torch.arange(0, T)):reshape(-1)
  local x = data:index_select(1, positions):reshape{B, T}
  local y = data:index_select(1, positions + 1):reshape{B, T}
  return x, y
end

torch.manual_seed(0)
local model = M.CharLSTM(#chars, {embed_dim = 32, hidden_size = 128, num_layers = 1})
local optimizer = optim.Adam(model:parameters(), {lr = 0.01})
local train_step = M.make_train_step(model, optimizer, 1.0)
print(string.format("%d characters, %d distinct; %d parameters%s", #text, #chars, model:num_parameters(),
                    freeze and "; the training step frozen" or ""))

local bar = progress.new{total = steps}
for step = 1, steps do
  local x, y = get_batch()
  local loss
  if freeze and step == 1 then
    train_step, loss = M.freeze(train_step, x, y)
  else
    loss = train_step(x, y)
  end
  bar:update(step, {loss = loss})
end
bar:close()

-- Generation: one character at a time, each drawn from the softmax of the model's scores,
-- the LSTM's state carried from one character to the next.
local function generate(first, n)
  return torch.no_grad(function()
    local out, state = {first}, nil
    local x = torch.tensor({{index_of[first]}}, {dtype = "int64"})
    for _ = 1, n do
      local logits
      logits, state = model(x, state)
      x = torch.multinomial(F.softmax(logits:reshape(-1), 1), 1):reshape{1, 1}
      out[#out + 1] = chars[x:item()]
    end
    return table.concat(out)
  end)
end

torch.manual_seed(1)
print("\n" .. generate("T", 200))
