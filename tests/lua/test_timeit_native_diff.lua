-- f:timeit's max |diff| covers the gradients as they were after each call: the eager call's .grad
-- is copied before the native call, from the same state, writes into the same .grad tensor.
-- A 50-step RNN cell with weights of std 1 (saturating tanh) amplifies the last-ulp differences of
-- native code's vectorised tanh and reordered sums into gradient differences far above the loss's.
torch.manual_seed(0)
local W_h = torch.randn(20, 20, {requires_grad = true})
local W_x = torch.randn(20, 10, {requires_grad = true})
local xs = {}
for i = 1, 50 do xs[i] = torch.randn(10, 1) end
local h0 = torch.randn(20, 1)
local function step(h)
  for i = 1, 50 do h = (W_h:mm(h) + W_x:mm(xs[i])):tanh() end
  local loss = h:sum()
  loss:backward()
  return loss
end

-- Recorded with no .grad yet: the recording call makes them, and every call timeit compares
-- (from that state) writes into those same tensors.
local f = torch.freeze{step, h0, native = true, name = "rnn"}
if not f:stats().native then
  print("test_timeit_native_diff: skipped, no native code (no C++ compiler?)")
  return
end

-- The same comparison by hand, from the same state: eager, then native.
local start_h, start_x = W_h.grad:clone(), W_x.grad:clone()
local function max_abs(a, b) return (a - b):abs():max():item() end
local eager_loss = step(h0):item()
local eager_h, eager_x = W_h.grad:clone(), W_x.grad:clone()
W_h.grad:copy_(start_h); W_x.grad:copy_(start_x)
local native_loss = f(h0):item()
local direct = math.max(math.abs(eager_loss - native_loss), max_abs(eager_h, W_h.grad), max_abs(eager_x, W_x.grad))
W_h.grad:copy_(start_h); W_x.grad:copy_(start_x)

local timed = f:timeit(3)
assert(timed.native_max_diff ~= nil, "timeit: no native fields for a native plan")
assert(timed.max_diff == 0, "the interpreted plan differs from eager: " .. timed.max_diff)
assert(math.abs(timed.native_max_diff - direct) <= 1e-6 * math.max(1, direct),
       ("timeit's native max |diff| %g, by hand %g (loss alone %g)"):format(timed.native_max_diff, direct,
                                                                        math.abs(eager_loss - native_loss)))
assert(max_abs(W_h.grad, start_h) == 0, "timeit did not put the gradients back")
print(("test_timeit_native_diff: ok (max |diff| %g, loss %g)"):format(direct, math.abs(eager_loss - native_loss)))
