-- parallel_block.lua: the lecture's ParallelBlock (two Linear layers side by side, multiplied,
-- then ReLU), stacked in nn.Sequential and trained with optim.Adam (lr 1e-4) on the MSE loss.
--   tapedeck scripts/parallel_block.lua [steps] [print_every]

local steps = tonumber(arg and arg[1]) or 500
local print_every = tonumber(arg and arg[2]) or 50

ParallelBlock = nn.Module:extend("ParallelBlock")
function ParallelBlock:init(D_in, D_out)
  self.linear1 = nn.Linear(D_in, D_out)
  self.linear2 = nn.Linear(D_in, D_out)
end
function ParallelBlock:forward(x)
  local h1 = self.linear1(x)
  local h2 = self.linear2(x)
  return (h1 * h2):clamp{min = 0}
end

torch.manual_seed(0)
local N, D_in, H, D_out = 64, 1000, 100, 10
local x = torch.randn(N, D_in)
local y = torch.randn(N, D_out)

model = nn.Sequential(
  ParallelBlock(D_in, H),
  ParallelBlock(H, H),
  nn.Linear(H, D_out))
print(model)

local optimizer = optim.Adam(model:parameters(), {lr = 1e-4})
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
