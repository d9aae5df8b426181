-- a .npy file whose shape's element count overflows int64: signed overflow in Shape::numel()
-- (engine/core/tensor.h:44) while loading. Expected: an error naming load_npy and the file.
local path = os.tmpname()
local header = "{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, 4294967296), }"
header = header .. string.rep(" ", 127 - 10 - #header) .. "\n"
local f = assert(io.open(path, "wb"))
f:write("\147NUMPY\1\0", string.char(#header % 256, #header // 256), header, string.rep("\0", 16))
f:close()
print(pcall(torch.load_npy, path))
os.remove(path)
