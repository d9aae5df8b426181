-- conv2d with padding >= 2^30: int overflow in the output-size arithmetic (the shape rule in engine/core/ops.cpp,
-- `2 * padding`), UB. Expected: an error naming conv2d (padding too large for the input).
print(pcall(torch.conv2d, torch.ones(1, 1, 3, 3), torch.ones(1, 1, 1, 1), nil, 1, 2^30))
print(pcall(torch.conv2d, torch.ones(1, 1, 3, 3), torch.ones(1, 1, 1, 1), nil, 3, 2^31 - 1))
