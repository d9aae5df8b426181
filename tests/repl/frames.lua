-- used by the debug_frames transcripts: nested functions, a loop, tensors in locals
local depth_scale = 10
local function inner(x, k)
  local y = x * k
  return y:sum()
end

local function outer(n)
  local total = 0
  for i = 1, n do
    total = total + inner(torch.ones(2, 2), i):item()
  end
  local after_loop = total * 2
  return after_loop
end

result = outer(3)
print("result", result)
