-- The lecture's two-layer net (scripts/two_layer_net.lua) run for 10,000 steps keeps its peak
-- memory flat: nodes, tensors and Lua's garbage all die with each step.
--   tapedeck tests/memory/two_layer_net_flat.lua <repo root>
local root = assert(arg[1], "usage: two_layer_net_flat.lua <repo root>")
local script = root .. "/scripts/two_layer_net.lua"

local check = dofile(root .. "/tests/lua/check.lua")
local function peak_rss_kb() return assert(check.peak_rss_bytes()) / 1024 end

local function run(steps)
  arg = {[0] = script, tostring(steps), tostring(steps)}   -- print only the first and last loss
  dofile(script)
  collectgarbage()
end

run(500)
local after_500 = peak_rss_kb()
local bytes_500, nodes_500 = torch.memory()
run(10000)
local after_10000 = peak_rss_kb()
local bytes_10000, nodes_10000 = torch.memory()

print(("peak RSS: %d kB after 500 steps, %d kB after 10,000 more"):format(after_500, after_10000))
print(("tensor bytes live: %d then %d; live nodes: %d then %d"):format(bytes_500, bytes_10000, nodes_500, nodes_10000))
assert(after_10000 - after_500 < 2048, "peak RSS grew by more than 2 MB over 10,000 steps")
assert(bytes_10000 <= bytes_500, "tensor memory grew")
assert(nodes_10000 <= nodes_500, "live nodes grew")
