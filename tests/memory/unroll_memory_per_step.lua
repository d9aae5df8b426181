-- The issue-15 unroll (the lecture's RNN cell, 20,000 steps, then backward) run as a script: the
-- backward pass keeps none of its nodes (a script's default, engine_backward_graph_kept), so after
-- it only the forward graph is alive, and the peak memory per step stays under PyTorch's (6.5 to
-- 7.2 KB per step measured with PyTorch 1.13 on this loop; tapedeck 5.8).
--   tapedeck tests/memory/unroll_memory_per_step.lua [sanitized]
-- With "sanitized" (an ASan build, whose redzones and quarantine inflate RSS) the RSS bound is skipped.
local sanitized = arg[1] == "sanitized"
local steps = 20000

local check = dofile((arg[0]:match("^(.*[/\\])") or "") .. "../lua/check.lua")
local function peak_rss_kb() return assert(check.peak_rss_bytes()) / 1024 end

local W_h = (torch.randn(20, 20) * 0.1):requires_grad_(true)
local W_x = torch.randn(20, 10, {requires_grad = true})
local xs = torch.randn(steps, 10)
collectgarbage(); collectgarbage()
local rss_before = peak_rss_kb()
local _, nodes_before = torch.memory()

local h = torch.zeros(1, 20)
for t = 1, steps do h = (torch.mm(W_h, h:t()) + torch.mm(W_x, xs:narrow(1, t, 1):t())):tanh():t() end
local _, nodes_forward = torch.memory()
h:sum():backward()
collectgarbage(); collectgarbage()
local _, nodes_after = torch.memory()
local rss_per_step = (peak_rss_kb() - rss_before) * 1024 / steps

print(("live nodes: %d before, %d after the forward loop, %d after backward; peak RSS %.0f bytes per step")
      :format(nodes_before, nodes_forward, nodes_after, rss_per_step))
-- 7 or 8 nodes a step (mm, mm, add, tanh, narrow, the transposes), and nothing of backward's but
-- the two .grad tensors and the loss.
assert(nodes_forward - nodes_before <= 8 * steps + 10, "the forward loop records 8 nodes a step")
assert(nodes_after - nodes_forward <= 5, ("backward left %d nodes alive"):format(nodes_after - nodes_forward))
assert(W_h.grad and W_x.grad, "the gradients reached .grad")
if not sanitized then
  assert(rss_per_step < 6.5 * 1024, ("peak RSS grew %.0f bytes per step (bound: 6.5 KB)"):format(rss_per_step))
end
print("unroll_memory_per_step: ok")
