-- t[index] = v with an int64 index tensor: an index of many dims made t[index]'s shape overflow the
-- 6 dims a Shape holds (lua_views.cpp, out of bounds write), and an index of 2^63 - 1 was read
-- through a double (UB converting it back). Expected: errors naming the index and its size.
local t = torch.zeros(2, 3, 4)
local deep = torch.zeros(2, 2, 2, 2)
print(pcall(function() deep[torch.full({3, 4, 1, 3}, 2, {dtype = "int64"})] = 0 / 0 end))
print(pcall(function() return deep[torch.full({3, 4, 1, 3}, 2, {dtype = "int64"})] end))
print(pcall(function() t[torch.tensor({math.maxinteger}, {dtype = "int64"})] = 1.5 end))
print(pcall(function() t[torch.tensor({math.mininteger}, {dtype = "int64"})] = 1 end))
local ok = pcall(function() t[torch.tensor({2}, {dtype = "int64"})] = 1 end)
assert(ok and t[2]:sum():item() == 12, "a valid index still writes")
