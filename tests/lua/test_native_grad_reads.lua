-- Native code reading a .grad its own segment writes: W.grad made by backward, then read by two
-- products in the same frozen call. A product whose matrix is read twice gets a transposed copy
-- made at the start of the generated function; a .grad written later in that function must not
-- be copied then (the copy would hold the previous call's gradient: a wrong number, no message).
-- Each call gets new arguments, so a stale gradient cannot pass by matching.
local check = dofile((arg[0]:match("^(.*[/\\])") or "") .. "check.lua")
torch.manual_seed(2)
local W = torch.randn(8, 8):requires_grad_()
local function step(h, h2)
  W.grad = nil
  W:mm(h):tanh():sum():backward()
  local g = W.grad
  return g:mm(h) + g:mm(h2)
end
local f = torch.freeze{step, torch.randn(8, 1), torch.randn(8, 1), native = true}
assert(f:stats().native, "the plan runs native code")
for _ = 1, 3 do
  local a, b = torch.randn(8, 1), torch.randn(8, 1)
  local got = f(a, b)
  check.close(got, step(a, b), 1e-5, "products of W.grad, native against eager")
end
assert(f:stats().native_calls > 0 and f:stats().native_fallbacks == 0, "the calls ran native code")
print("ok")
