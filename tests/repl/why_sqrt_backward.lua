-- why_sqrt_backward.lua: a forward pass with no NaN whose gradient has some: sqrt at 0.
x = torch.tensor({{0, 0}, {3, 4}}, {requires_grad = true})
squares = x * x
-- the row norms; the first row's is sqrt(0), whose derivative is infinite
norms = squares:sum(2):sqrt()
loss = norms:sum()
print("loss", loss)
loss:backward()
print("x.grad", x.grad)
