-- why_inf_weight.lua: a layer whose weight holds an Inf, written under no_grad as a bad
-- optimizer step or a bad load would.
torch.manual_seed(0)
model = nn.Linear(3, 2)
torch.no_grad(function() model.weight[2][3] = math.huge end)
x = torch.ones(4, 3)
y = model(x)
loss = (y - 1):pow(2):mean()
print("loss", loss)
