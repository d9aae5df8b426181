-- two_layer_net_nn.lua: the lecture's two-layer network as nn.Sequential, trained with
-- optim.Adam (lr 1e-4) on the MSE loss (PyTorch: nn + optim), 500 steps.
--   tapedeck scripts/two_layer_net_nn.lua [steps] [print_every]

local steps = tonumber(arg and arg[1]) or 500
local print_every = tonumber(arg and arg[2]) or 50
torch.manual_seed(0)

local N, D_in, H, D_out = 64, 1000, 100, 10
local x = torch.randn(N, D_in)
local y = torch.randn(N, D_out)

model = nn.Sequential(
  nn.Linear(D_in, H),
  nn.ReLU(),
  nn.Linear(H, D_out))
print(model)

local learning_rate = 1e-4
local optimizer = optim.Adam(model:parameters(), {lr = learning_rate})
for t = 1, steps do
  local y_pred = model(x)
  local loss = F.mse_loss(y_pred, y)
  if t == 1 or t % print_every == 0 or t == steps then
    print(("step %5d  loss %.6g"):format(t, loss:item()))
  end
  loss:backward()
  optimizer:step()
  optimizer:zero_grad()
end
