-- why_div.lua: a hit rate per class, where one class was never seen (0/0) and one never hit
-- (x/0); the script checks its loss and fails (the why_div transcript runs it with --pm).
local hits = torch.tensor({3, 0, 5, 1}, {requires_grad = true})
local seen = torch.tensor({6, 0, 10, 0})
local rate = hits / seen
local score = rate:mean()
assert(not score:isnan():item(), "the score is NaN")
