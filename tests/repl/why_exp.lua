-- why_exp.lua: a softmax written by hand: e^100 overflows float32, then Inf / Inf is NaN.
scores = torch.tensor({{1, 2, 100}, {3, 1, 2}}, {requires_grad = true})
e = torch.exp(scores)
total = e:sum(2, true)
probs = e / total
loss = -probs:log():mean()
print("loss", loss)
