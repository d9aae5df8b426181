-- why_log0.lua: log of 0, surfacing as NaN four ops downstream (the why_log0 transcript explains it).
logits = torch.tensor({2, 0, -1, 3}, {requires_grad = true})
p = torch.relu(logits) / 5
-- p is 0 where logits <= 0: log of 0 is -Inf, then 0 * -Inf is NaN
logp = torch.log(p)
terms = p * logp
entropy = -terms:sum()
loss = entropy * 2 + 1
print("loss", loss)
