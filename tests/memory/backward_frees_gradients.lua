-- A backward pass frees each gradient once it has used it (autograd.cpp, "Freeing gradients once
-- used"), so its memory grows with the graph. nn.LSTM takes a select view of the input projection
-- per time step; select's gradient is zero-padded to the whole [T, B, 4H] projection, so keeping
-- every gradient the pass made costs O(T^2) bytes (98 MB at T = 32, 323 MB at T = 64 before this
-- was fixed), freeing them O(T).
--   tapedeck tests/memory/backward_frees_gradients.lua

local MB = 1024 * 1024

-- Peak bytes during backward, and bytes live after it while the forward graph is still alive.
local function lstm_backward_memory(T)
  torch.manual_seed(0)
  local lstm = nn.LSTM(32, 128, {batch_first = true})
  local x = torch.randn(16, T, 32)
  collectgarbage()
  torch.reset_peak_memory()
  local out = lstm(x)
  out:sum():backward()
  local _, _, peak = torch.memory()
  collectgarbage()
  local kept = torch.memory()
  assert(out)   -- the graph is alive up to here
  return peak / MB, kept / MB
end

local peak32, kept32 = lstm_backward_memory(32)
local peak64, kept64 = lstm_backward_memory(64)
print(string.format("T=32: backward peak %.1f MB, kept %.1f MB;  T=64: backward peak %.1f MB, kept %.1f MB",
                    peak32, kept32, peak64, kept64))
assert(peak64 < 2.5 * peak32, string.format("backward peak grows faster than T: %.1f MB at T=64, %.1f MB at T=32", peak64, peak32))
assert(kept64 < 2.5 * kept32, string.format("memory kept after backward grows faster than T: %.1f MB at T=64, %.1f MB at T=32", kept64, kept32))
