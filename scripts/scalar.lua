-- scalar.lua: the smallest graph. c = a * b, then dc/da = b and dc/db = a.
-- Lecture: "Dynamic computation graph in PyTorch" (a = 15, b = 20).
--   tapedeck scripts/scalar.lua        (or -i to stay at the prompt and try :graph c)

local a = torch.tensor(15.0, {requires_grad = true})
local b = torch.tensor(20.0, {requires_grad = true})

c = a * b          -- global, so `tapedeck -i` can inspect it
c:backward()

print(("c = %g"):format(c:item()))
print(("Derivative of c with respect to a = %g"):format(a.grad:item()))
print(("Derivative of c with respect to b = %g"):format(b.grad:item()))
