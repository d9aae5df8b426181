-- tiny_gpt_model.lua: a decoder-only transformer (GPT), written the way nanoGPT's model.py reads
-- (github.com/karpathy/nanoGPT), with its module names, so a nanoGPT state_dict's keys match
-- (transformer.wte.weight, transformer.h.0.attn.c_attn.weight, ...). Used by tiny_gpt.lua (the
-- training script), tests/lua/test_tiny_gpt_oracle.lua and bench/bench.lua:
--
--   local gpt = dofile("scripts/models/tiny_gpt_model.lua")
--   local model = gpt.GPT(gpt.config{vocab_size = 65, block_size = 32})
--   local logits, loss = model(idx, targets)     -- idx, targets [B, T] int64, 1-based tokens
--
-- Differences from nanoGPT: token ids are 1-based (as every index in tapedeck); the causal mask is
-- a float 0/1 buffer named causal_mask (nanoGPT's `bias`, a 0/1 tril compared with 0), not saved
-- in the state_dict (as nanoGPT's flash path, which has no buffer); no flash attention, no
-- from_pretrained, no crop_block_size; cross_entropy takes no ignore_index = -1.
local gpt = {}

-- The model's sizes (nanoGPT's GPTConfig), each overridable.
function gpt.config(overrides)
  local config = {block_size = 32, vocab_size = 65, n_layer = 2, n_head = 4, n_embd = 32, dropout = 0.0, bias = true}
  for key, value in pairs(overrides or {}) do
    if config[key] == nil then error("tiny_gpt config: unknown key " .. tostring(key), 2) end
    config[key] = value
  end
  return config
end

-- ============================================================================================
-- CausalSelfAttention: q, k, v from one Linear, heads as a dim, scores masked above the diagonal.

local CausalSelfAttention = nn.Module:extend("CausalSelfAttention")
function CausalSelfAttention:init(config)
  assert(config.n_embd % config.n_head == 0, "n_embd must be divisible by n_head")
  -- key, query, value projections for all heads, in a batch
  self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, {bias = config.bias})
  -- output projection
  self.c_proj = nn.Linear(config.n_embd, config.n_embd, {bias = config.bias})
  self.attn_dropout = nn.Dropout(config.dropout)
  self.resid_dropout = nn.Dropout(config.dropout)
  self.n_head, self.n_embd = config.n_head, config.n_embd
  -- 1 where a query would see a later key (above the diagonal): those scores become -inf
  local size = config.block_size
  self:register_buffer("causal_mask", torch.ones(size, size):triu(1):view(1, 1, size, size), false)
end

function CausalSelfAttention:forward(x)
  local B, T, C = x:size(1), x:size(2), x:size(3)   -- batch size, sequence length, embedding dim (n_embd)
  -- query, key, values for all heads, the head moved forward to be the batch dim: (B, nh, T, hs)
  local q, k, v = table.unpack(self.c_attn(x):split(self.n_embd, 3))
  k = k:reshape(B, T, self.n_head, C // self.n_head):transpose(2, 3)
  q = q:reshape(B, T, self.n_head, C // self.n_head):transpose(2, 3)
  v = v:reshape(B, T, self.n_head, C // self.n_head):transpose(2, 3)
  -- causal self-attention: (B, nh, T, hs) x (B, nh, hs, T) -> (B, nh, T, T)
  local att = q:matmul(k:transpose(-2, -1)) * (1.0 / math.sqrt(k:size(-1)))
  att = att:masked_fill(self.causal_mask:narrow(3, 1, T):narrow(4, 1, T), -math.huge)
  att = att:softmax(-1)
  att = self.attn_dropout(att)
  local y = att:matmul(v)                                  -- (B, nh, T, T) x (B, nh, T, hs) -> (B, nh, T, hs)
  y = y:transpose(2, 3):contiguous():view(B, T, C)         -- re-assemble all head outputs side by side
  return self.resid_dropout(self.c_proj(y))                -- output projection
end

-- ============================================================================================
-- MLP and Block

local MLP = nn.Module:extend("MLP")
function MLP:init(config)
  self.c_fc = nn.Linear(config.n_embd, 4 * config.n_embd, {bias = config.bias})
  self.gelu = nn.GELU()
  self.c_proj = nn.Linear(4 * config.n_embd, config.n_embd, {bias = config.bias})
  self.dropout = nn.Dropout(config.dropout)
end
function MLP:forward(x)
  return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))
end

local Block = nn.Module:extend("Block")
function Block:init(config)
  self.ln_1 = nn.LayerNorm(config.n_embd, {bias = config.bias})
  self.attn = CausalSelfAttention(config)
  self.ln_2 = nn.LayerNorm(config.n_embd, {bias = config.bias})
  self.mlp = MLP(config)
end
function Block:forward(x)
  x = x + self.attn(self.ln_1(x))
  x = x + self.mlp(self.ln_2(x))
  return x
end

-- ============================================================================================
-- GPT

local GPT = nn.Module:extend("GPT")
gpt.GPT = GPT

function GPT:init(config)
  assert(config.vocab_size and config.block_size, "config needs vocab_size and block_size")
  rawset(self, "config", config)
  local h = {}
  for i = 1, config.n_layer do h[i] = Block(config) end
  self.transformer = nn.ModuleDict({
    {"wte", nn.Embedding(config.vocab_size, config.n_embd)},
    {"wpe", nn.Embedding(config.block_size, config.n_embd)},
    {"drop", nn.Dropout(config.dropout)},
    {"h", nn.ModuleList(h)},
    {"ln_f", nn.LayerNorm(config.n_embd, {bias = config.bias})},
  })
  self.lm_head = nn.Linear(config.n_embd, config.vocab_size, {bias = false})
  -- weight tying: the token embedding is the output layer's weight (one tensor, two names)
  self.transformer.wte.weight = self.lm_head.weight
  -- init all weights, then a scaled init for the residual projections, per GPT-2 paper
  self:apply(function(module) self:init_weights(module) end)
  torch.no_grad(function()
    for _, pair in ipairs(self:named_parameters()) do
      if pair[1]:match("c_proj%.weight$") then pair[2]:copy_(torch.randn(pair[2]:size()) * (0.02 / math.sqrt(2 * config.n_layer))) end
    end
  end)
end

-- nanoGPT's _init_weights: Linear and Embedding weights N(0, 0.02), Linear biases zero.
function GPT:init_weights(module)
  local class = getmetatable(module).__name
  torch.no_grad(function()
    if class == "Linear" then
      module.weight:copy_(torch.randn(module.weight:size()) * 0.02)
      if module.bias then module.bias:zero_() end
    elseif class == "Embedding" then
      module.weight:copy_(torch.randn(module.weight:size()) * 0.02)
    end
  end)
end

-- idx [B, T] int64 token ids (1-based). With targets [B, T]: the logits [B, T, vocab] and the
-- cross-entropy loss; without: the logits of the last position only, [B, 1, vocab], and nil.
function GPT:forward(idx, targets)
  local t = idx:size(2)
  assert(t <= self.config.block_size, string.format("Cannot forward sequence of length %d, block size is only %d", t,
                                                   self.config.block_size))
  local pos = torch.arange(1, t + 1, {device = idx.device})   -- positions, shape (t)
  local tok_emb = self.transformer.wte(idx)                -- token embeddings (b, t, n_embd)
  local pos_emb = self.transformer.wpe(pos)                -- position embeddings (t, n_embd)
  local x = self.transformer.drop(tok_emb + pos_emb)
  for _, block in ipairs(self.transformer.h) do x = block(x) end
  x = self.transformer.ln_f(x)
  if targets then
    local logits = self.lm_head(x)
    local loss = F.cross_entropy(logits:view(-1, logits:size(-1)), targets:view(-1))
    return logits, loss
  end
  return self.lm_head(x:narrow(2, t, 1)), nil              -- only the last position: x[:, [-1], :]
end

-- nanoGPT's configure_optimizers: AdamW with weight decay on the matrices (every parameter of 2 or
-- more dims: Linear and Embedding weights), none on biases and LayerNorm weights.
function GPT:configure_optimizers(weight_decay, learning_rate, betas)
  local decay, no_decay = {}, {}
  for _, p in ipairs(self:parameters()) do
    if p:dim() >= 2 then decay[#decay + 1] = p else no_decay[#no_decay + 1] = p end
  end
  return optim.AdamW({{params = decay, weight_decay = weight_decay}, {params = no_decay, weight_decay = 0.0}},
                     {lr = learning_rate, betas = betas})
end

-- Takes idx [B, T] and samples max_new_tokens more, each fed back in (the context cropped to
-- block_size): the softmax of the last position's logits / temperature, torch.multinomial.
function GPT:generate(idx, max_new_tokens, temperature)
  temperature = temperature or 1.0
  return torch.no_grad(function()
    for _ = 1, max_new_tokens do
      local t = idx:size(2)
      local idx_cond = t <= self.config.block_size and idx or idx:narrow(2, t - self.config.block_size + 1, self.config.block_size)
      local logits = self(idx_cond)
      logits = logits:select(2, 1) / temperature           -- (B, vocab)
      local probs = logits:softmax(-1)
      local idx_next = torch.multinomial(probs, 1)         -- (B, 1)
      idx = torch.cat({idx, idx_next}, 2)
    end
    return idx
  end)
end

-- One training step on (x, targets): zero_grad, forward with the loss, backward, the optimizer's
-- step. Returns the loss (before the step).
function gpt.train_step(model, optimizer)
  return function(x, y)
    optimizer:zero_grad()
    local _, loss = model(x, y)
    loss:backward()
    optimizer:step()
    return loss
  end
end

return gpt
