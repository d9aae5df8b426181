-- nan_script.lua: a NaN made in the forward pass and an Inf made in the backward pass (the
-- debug_nan transcript stops at each, with its line).
local x = torch.tensor({1, -2, 3}, {requires_grad = true})
local doubled = x * 2
local logged = torch.log(doubled)           -- log of -4: NaN
local shifted = x - 1
local rooted = torch.sqrt(shifted:abs())    -- sqrt of 0 is fine; its derivative is not
local loss = logged:sum() + rooted:sum()
loss:backward()
print("x.grad", x.grad)
