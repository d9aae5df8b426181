-- used by the post_mortem transcripts: a function fails with tensors and numbers in its locals
local scale = 3
local function layer(x, w)
  local h = x:mm(w)
  local bias = torch.ones(2, 5)
  return h + bias * scale
end

local x = torch.ones(2, 3)
local w = torch.ones(3, 4)
print("before the error", ...)
local y = layer(x, w)
print("never printed")
