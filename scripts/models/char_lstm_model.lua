-- char_lstm_model.lua: the model and training step of char_lstm.lua, in a file of their own so
-- that tests/lua/test_char_lstm_oracle.lua checks these very lines against PyTorch.
--   local M = dofile("scripts/models/char_lstm_model.lua")
--   model = M.CharLSTM(vocab_size, {embed_dim = 32, hidden_size = 128, num_layers = 1})
local M = {}

-- Characters in, a score for every possible next character out.
local CharLSTM = nn.Module:extend("CharLSTM")
function CharLSTM:init(vocab_size, sizes)
  self.embed = nn.Embedding(vocab_size, sizes.embed_dim)
  self.lstm = nn.LSTM(sizes.embed_dim, sizes.hidden_size, {num_layers = sizes.num_layers, batch_first = true})
  self.head = nn.Linear(sizes.hidden_size, vocab_size)
end

-- x: [B, T] character indices (1-based int64) -> logits [B, T, vocab], and the LSTM's state,
-- which the next call may continue from (when generating text one character at a time).
function CharLSTM:forward(x, state)
  local out
  out, state = self.lstm(self.embed(x), state)
  return self.head(out), state
end
M.CharLSTM = CharLSTM

-- The loss of predicting y (x shifted by one character) at every position.
function M.loss(model, x, y)
  local logits = model(x)
  return F.cross_entropy(logits:reshape{-1, logits:size(-1)}, y:reshape(-1))
end

-- One training step: gradients, clipped to a total norm of max_norm, then the optimizer's update.
function M.make_train_step(model, optimizer, max_norm)
  return function(x, y)
    optimizer:zero_grad()
    local loss = M.loss(model, x, y)
    loss:backward()
    nn.utils.clip_grad_norm_(model:parameters(), max_norm)
    optimizer:step()
    return loss
  end
end

-- torch.freeze runs step(x, y) once eagerly while recording it: returns the frozen step (later
-- calls replay the plan) and the loss of that first, recorded step.
function M.freeze(step, x, y)
  local loss
  local frozen = torch.freeze{function(a, b) loss = step(a, b); return loss end, x, y, strict = true}
  return frozen, loss
end

return M
