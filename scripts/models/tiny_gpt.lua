-- tiny_gpt.lua: a character-level GPT (scripts/models/tiny_gpt_model.lua, nanoGPT's model) trained
-- with AdamW on the characters of the GPL-3 text every Debian machine has; prints the loss falling,
-- then a generated sample.
--
--   tapedeck scripts/models/tiny_gpt.lua [--steps N] [--freeze] [--seed S]
--
-- --freeze runs the training step through torch.freeze: the first call records it, the others
-- replay the plan; the losses are eager's (the same batches: the plan draws no random numbers).
-- Try `tapedeck -i scripts/models/tiny_gpt.lua --steps 5`, then `:break bwd softmax` and
-- `train_step(get_batch())` to stop inside attention's backward.
local here = arg[0]:match("^(.*[/\\])") or ""
local gpt = dofile(here .. "tiny_gpt_model.lua")

local progress = require "tapedeck.progress"
local options = require("tapedeck.args").parse{steps = 500, freeze = false, seed = 1337}
assert(options.steps >= 1, "tiny_gpt.lua: --steps must be at least 1")
torch.manual_seed(options.seed)

-- The data: every character of the text, as 1-based ids into the sorted list of its characters.
local TEXT_PATH = "/usr/share/common-licenses/GPL-3"
local file = assert(io.open(TEXT_PATH, "rb"), "tiny_gpt.lua: cannot read " .. TEXT_PATH)
local text = file:read("a")
file:close()
local chars, stoi = {}, {}
for c in text:gmatch(".") do if not stoi[c] then stoi[c] = true; chars[#chars + 1] = c end end
table.sort(chars)
for id, c in ipairs(chars) do stoi[c] = id end
local ids = {}
for k = 1, #text do ids[k] = stoi[text:sub(k, k)] end
local data = torch.tensor(ids, {dtype = "int64"})
local function decode(list)
  local out = {}
  for k, id in ipairs(list) do out[k] = chars[id] end
  return table.concat(out)
end

local config = gpt.config{vocab_size = #chars, block_size = 32, n_layer = 2, n_head = 4, n_embd = 32}
local BATCH = 16
model = gpt.GPT(config)
optimizer = model:configure_optimizers(0.1, 3e-3, {0.9, 0.99})
print(string.format("tiny GPT: %d parameters, vocabulary %d characters, %d characters of %s", model:num_parameters(),
                    #chars, #text, TEXT_PATH))

-- BATCH random windows of block_size characters; y is x shifted by one.
function get_batch()
  local starts = torch.randint(1, data:size(1) - config.block_size, {BATCH}):totable()
  local xs, ys = {}, {}
  for b, start in ipairs(starts) do
    xs[b] = data:narrow(1, start, config.block_size)
    ys[b] = data:narrow(1, start + 1, config.block_size)
  end
  return torch.stack(xs), torch.stack(ys)
end

local last_loss
function train_step(x, y)
  optimizer:zero_grad()
  local _, loss = model(x, y)
  loss:backward()
  optimizer:step()
  last_loss = loss   -- the loss of the recording call when frozen (Lua state is not replayed)
  return loss
end

local step = train_step
local bar = progress.new{total = options.steps}
for t = 1, options.steps do
  local x, y = get_batch()
  local loss
  if options.freeze and t == 1 then
    step = torch.freeze(train_step, x, y)   -- records (and runs) this step
    loss = last_loss
  else
    loss = step(x, y)
  end
  bar:update(t, {loss = loss})
end
bar:close()

model:eval()
torch.manual_seed(options.seed)
local context = torch.tensor({{stoi["\n"]}}, {dtype = "int64"})
print("sample:")
print(decode(model:generate(context, 200)[1]:totable()))
