-- The freeze lesson (docs/freeze.md, "Pass by pass"): each pass of the compiler has something to do here.
torch.manual_seed(0)
x = torch.randn(4, 3)
w = torch.randn(3, 3, {requires_grad = true})
lesson = function(x)
  local h = x:mm(w)
  local a = h:tanh()
  local b = h:tanh()               -- the same as a: cse
  local unused = (a * 3):sum()     -- read by nothing: dce
  local scale = torch.ones(1) * 2  -- no input: fold
  local y = (a + b):mul(scale):sigmoid():neg()   -- an elementwise chain: fuse
  local loss = y:sum()
  loss:backward()                  -- w.grad: inplace; buffers: reuse
  return loss
end
