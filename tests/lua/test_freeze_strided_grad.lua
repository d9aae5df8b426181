-- A frozen step whose gradient of a parameter is a strided view gives eager's .grad. x:mm(w:t())
-- makes w's gradient a transpose (a view of the mm's result); the replay's new .grad took that
-- view's strides onto the recycled, contiguous .grad, so w.grad came back transposed (found with
-- nn.LSTM, whose input projection is linear over [T, B, C], i.e. mm of a reshape with w:t()).
local check = dofile((arg[0]:match("^(.*[/\\])") or "") .. "check.lua")

torch.manual_seed(0)
local w = torch.randn(4, 3):requires_grad_()
local cases = {
  {"x:mm(w:t())", function(x) return x:mm(w:t()):square():sum() end, {2, 3}},
  {"linear of a 3-d input", function(x) return torch.linear(x, w):square():sum() end, {2, 2, 3}},
}
for _, case in ipairs(cases) do
  local name, loss_of, shape = case[1], case[2], case[3]
  local function step(x)
    w.grad = nil
    local loss = loss_of(x)
    loss:backward()
    return loss
  end
  local f = torch.freeze{step, torch.randn(shape), strict = true}
  for _ = 1, 2 do   -- the second replay recycles the first replay's .grad
    local x = torch.randn(shape)
    f(x)
    local frozen = w.grad:clone()
    step(x)
    check.close(frozen, w.grad, 0, name .. ": w.grad frozen vs eager")
  end
end
print("test_freeze_strided_grad: ok")
