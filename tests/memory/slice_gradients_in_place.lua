-- A loop that reads a tensor slice by slice (x[t], the way a sequence is walked) gives x one
-- gradient buffer that each step's slice is added into, not a whole-size zero-padded gradient
-- per step (engine/core/autograd.cpp, BackwardCall::grad_input_slice). The backward pass of 64 slices of
-- a 1 MiB tensor peaks at 2 MiB beyond what was live (the summed gradient and x.grad made from
-- it); padding every slice peaked at 5 MiB (padded gradients and running sums too), and made 64
-- whole-size additions where these add 16 KiB each.
--   tapedeck tests/memory/slice_gradients_in_place.lua
local MiB = 1024 * 1024
local T, N = 64, 4096
local x = torch.randn(T, N):requires_grad_()
local w = torch.randn(N)
local loss = (x[1] * w):sum()
for t = 2, T do loss = loss + (x[t] * w):sum() end
collectgarbage()
local before = torch.memory()
torch.reset_peak_memory()
loss:backward()
local _, _, peak = torch.memory()
local extra = (peak - before) / MiB
print(string.format("backward over %d slices of a %.0f MiB tensor: %.2f MiB at its peak beyond what was live", T, T * N * 4 / MiB, extra))
assert(extra < 3, "the slices' gradients were padded to the whole tensor: " .. extra .. " MiB")
-- and the gradient is right: d loss / d x[t] = w for every t
assert(torch.allclose(x.grad, w:expand(T, N)), "x.grad is not w in every row")

-- Frozen, the same: freeze's recorder only notes the ops that run (it does not look at gradients
-- before they are summed), so backward takes the slices while recording and the plan replays the
-- in-place additions: 2 MiB at its peak. Padded, the plan peaked at 9 MiB and ran 64 whole-size
-- additions.
local function slices_backward(x)
  x.grad = nil
  local l = (x[1] * w):sum()
  for t = 2, T do l = l + (x[t] * w):sum() end
  l:backward()
  return l
end
local frozen = torch.freeze{slices_backward, x}
frozen(x)
local report = frozen:timeit(1)
print(string.format("frozen: %.2f MiB at its peak (eager %.2f), max |frozen - eager| %g", report.frozen_peak_bytes / MiB,
                    report.eager_peak_bytes / MiB, report.max_diff))
assert(report.frozen_peak_bytes / MiB < 3, "the frozen plan pads the slices' gradients: " .. report.frozen_peak_bytes / MiB .. " MiB")
assert(report.max_diff == 0, "frozen and eager differ by " .. report.max_diff)
assert(torch.allclose(x.grad, w:expand(T, N)), "frozen: x.grad is not w in every row")

-- A sum is added into in place only until its target's visit: from then on the target's rule may
-- hand it on unchanged, or a view of it, to several inputs (add's rule gives it to both), and
-- adding into it for one input would add into the others too.
do
  local p, q = torch.randn(2, 3):requires_grad_(), torch.randn(2, 3):requires_grad_()
  local z = torch.randn(3, 2):requires_grad_()
  local w1, w2 = torch.randn(2, 3), torch.randn(2, 3)
  local p3, row = p * 3, p[1]   -- recorded first: their gradients reach p after add's rule ran, the slice first
  local y = p + q + z:reshape(2, 3)
  local l = (y * w1):sum() + (y * w2):sum() + (row * 5):sum() + p3:sum()
  l:backward()
  local w = w1 + w2
  assert(torch.allclose(q.grad, w), "q.grad took p's other gradients: a sum handed to two inputs was added into")
  assert(torch.allclose(z.grad, w:reshape(3, 2)), "z.grad (a view of the sum) took p's other gradients")
  local expected = w + 3
  expected[1] = expected[1] + 5
  assert(torch.allclose(p.grad, expected), "p.grad is wrong")
end
print("slice_gradients_in_place: ok")
