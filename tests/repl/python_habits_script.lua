-- a script with a Python habit on line 4: the loader's error names the line and gives the Lua spelling
local w = torch.ones(3, {requires_grad = true})
local loss = (w * 2):sum()
w -= 0.1 * w.grad
