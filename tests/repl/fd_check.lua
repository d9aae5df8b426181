-- fd_check.lua: finite differences at a debugger stop (the debug_backward_fd transcript).
-- fd_check(f, x, g): the central difference of f (a number from a float64 tensor) at x along a
-- fixed random direction, printed next to the gradient g along it, and whether they agree.
function fd_check(f, x, g)
  local saved_seed = 7
  torch.manual_seed(saved_seed)
  local direction = torch.randn(table.unpack(x.shape)):double()
  local at, eps = x:double(), 1e-4
  local numeric = (f(at + direction * eps) - f(at - direction * eps)) / (2 * eps)
  local analytic = (g:double() * direction):sum():item()
  local agree = math.abs(numeric - analytic) <= 1e-3 * (1 + math.abs(analytic))
  print(("finite difference %.4f  gradient %.4f  %s"):format(numeric, analytic, agree and "agree" or "DIFFER"))
end
