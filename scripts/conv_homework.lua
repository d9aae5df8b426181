-- conv_homework.lua: the lecture's homework. The 5x5 image convolved with the 3x3 filter at
-- stride 2 (one output channel), then ReLU, then 2x2 max-pooling: the network's output.
--   tapedeck scripts/conv_homework.lua

local image = torch.tensor({
  {1, 2, 3, 4, 5},
  {2, 2, 1, 1, 1},
  {3, 2, 1, 1, 1},
  {4, 1, 1, 1, 1},
  {5, 1, 1, 1, 1},
}, {requires_grad = true})
local filter = torch.tensor({
  { 0, -1,  0},
  { 1,  1,  1},
  { 0, -1,  0},
}, {requires_grad = true})

-- conv2d takes batches of channels: N,C,H,W images and O,C,kH,kW filters.
local x = image:reshape({1, 1, 5, 5})
local w = filter:reshape({1, 1, 3, 3})

conv = torch.conv2d(x, w, nil, {stride = 2})
relu = conv:relu()
pooled = torch.max_pool2d(relu, 2)

local function matrix_string(t)
  local rows = {}
  for _, row in ipairs(t:reshape({t:size(3), t:size(4)}):totable()) do
    local cells = {}
    for _, v in ipairs(row) do cells[#cells + 1] = ("%g"):format(v) end
    rows[#rows + 1] = "[" .. table.concat(cells, ", ") .. "]"
  end
  return "[" .. table.concat(rows, ", ") .. "]"
end

print("conv (stride 2): " .. matrix_string(conv))
print("relu:            " .. matrix_string(relu))
print(("max-pool:        %g"):format(pooled:item()))

-- Which input pixels decide the output: its gradient with respect to the image.
pooled:sum():backward()
print("d(output)/d(image):")
print(image.grad)
