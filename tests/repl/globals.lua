-- used by the interactive_script and script_args transcripts
print("script args:", arg[0], arg[1], arg[2], #arg)
print("varargs:", ...)
w = torch.tensor({1, 2, 3}, {requires_grad = true})
loss = (w * w):sum()
local not_global = 1
