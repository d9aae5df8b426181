-- nan_script.lua: a NaN or Inf made at a known line, and an error at another, for the DAP tests'
-- exception filters (tests/dap/test_rnn_cell.py). `:why` names the same op and line.
--   tapedeck nan_script.lua forward    0/0 in the forward pass: NaN at `ratio = num / den` (line 9)
--   tapedeck nan_script.lua backward   a finite forward pass whose gradient is infinite (sqrt at 0, line 14)
--   tapedeck nan_script.lua error      shapes that do not broadcast: an error at line 19
local mode = arg[1] or "forward"
num = torch.tensor({1, 0, 2})
den = torch.tensor({2, 0, 4})
if mode == "forward" then ratio = num / den end
print("forward pass done")
if mode == "backward" then
  x = torch.tensor({{0, 0}, {3, 4}}, {requires_grad = true})
  squares = x * x
  norms = squares:sum(2):sqrt()
  loss = norms:sum()
  loss:backward()
  print("x.grad", x.grad)
elseif mode == "error" then
  local bad = torch.ones(2, 3) + torch.ones(2, 4)
  print("not reached", bad)
end
print("done")
