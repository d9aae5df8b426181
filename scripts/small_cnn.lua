-- small_cnn.lua: a small convolutional network on a batch of 8 one-channel 28x28 images:
-- Conv2d(1, 8, 3, padding 1) -> ReLU -> MaxPool2d(2) -> Flatten -> Linear(8*14*14, 10), trained
-- with cross-entropy and Adam for a few steps on the same batch: the loss falls.
--   tapedeck scripts/small_cnn.lua [steps=20] [print_every=5]

local steps = tonumber(arg and arg[1]) or 20
local print_every = tonumber(arg and arg[2]) or 5
torch.manual_seed(0)

local images = torch.randn(8, 1, 28, 28)
local labels = torch.tensor({3, 7, 1, 10, 5, 2, 8, 4}, {dtype = "int64"})   -- classes are 1-based

model = nn.Sequential(
  nn.Conv2d(1, 8, 3, {padding = 1}),
  nn.ReLU(),
  nn.MaxPool2d(2),
  nn.Flatten(),
  nn.Linear(8 * 14 * 14, 10))
print(model)

local optimizer = optim.Adam(model, {lr = 1e-3})
for t = 1, steps do
  local logits = model(images)
  local loss = F.cross_entropy(logits, labels)
  if t == 1 or t % print_every == 0 or t == steps then
    print(("step %3d  loss %.6g"):format(t, loss:item()))
  end
  optimizer:zero_grad()
  loss:backward()
  optimizer:step()
end
