-- softmax/log_softmax along a 0-size dim: Eigen's redux asserts ("you are using an empty matrix")
-- (abort; the release build reads before checking). Expected: an empty result, or an error naming softmax.
local ok, e = pcall(function() return torch.softmax(torch.randn(1, 0), 2) end)
print(ok, e)
local ok2, e2 = pcall(function() return torch.zeros(0, 3):log_softmax(1) end)
print(ok2, e2)
