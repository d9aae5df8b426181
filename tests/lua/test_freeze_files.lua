-- Plan files and .npy: a saved plan runs without the script and gives what the frozen function
-- gives; a bad file is a clear error, never a crash; .npy files round-trip.
local check = dofile((arg[0]:match("^(.*[/\\])") or "") .. "check.lua")
local dir = os.getenv("TMPDIR") or "/tmp"
local path = dir .. "/tapedeck_test_" .. tostring(os.time()) .. "_" .. tostring(math.random(1e9))

torch.manual_seed(3)
local x, y = torch.randn(16, 50), torch.randn(16, 5)
local w1, w2 = torch.randn(50, 20, {requires_grad = true}), torch.randn(20, 5, {requires_grad = true})
local function step(x, y)
  local loss = (x:mm(w1):clamp{min = 0}:mm(w2) - y):pow(2):sum()
  loss:backward()
  torch.no_grad(function()
    w1:sub_(w1.grad, 1e-4)
    w2:sub_(w2.grad, 1e-4)
    w1.grad:zero_()
    w2.grad:zero_()
  end)
  return loss
end
local f = torch.freeze(step, x, y)
torch.save_plan(f, path .. ".tdp")
local g = torch.load_plan(path .. ".tdp")
assert(tostring(g):find("frozen", 1, true))
local params = g:params()
check.close(params.w1, w1, 0, "weights saved with the plan")
check.close(params.w2, w2, 0)
-- Same state, same call: same loss, same updated weights.
for i = 1, 3 do
  local a = f(x, y)
  local b = g(x, y)
  check.close(b, a, 1e-5, "loaded plan, call " .. i)
  check.close(params.w1, w1, 1e-5, "loaded plan updates its own weights, call " .. i)
end
-- With each pass off, from the file too.
for _, pass in ipairs({"dce", "cse", "fold", "fuse", "inplace", "reuse"}) do
  local h = torch.load_plan(path .. ".tdp", {[pass] = false})
  local h0 = torch.load_plan(path .. ".tdp")
  check.close(h(x, y), h0(x, y), 1e-5, "loaded with " .. pass .. " off")
  check.close(h:params().w1, h0:params().w1, 1e-6, "weights with " .. pass .. " off")
end

-- Wrong inputs: named, with the expected shape.
local ok, message = pcall(g, torch.randn(8, 50), y)
assert(not ok and message:find("input 1 (x) has shape [8,50]; the plan expects [16,50]", 1, true), message)
ok, message = pcall(g, x)
assert(not ok and message:find("expects 2 tensor arguments (x, y), got 1", 1, true), message)
ok, message = pcall(g, x, y:double())
assert(not ok and message:find("input 2 (y) is float64; the plan expects float32", 1, true), message)

-- Bad files: clear errors naming the file.
local function read(p) local h = assert(io.open(p, "rb")); local s = h:read("a"); h:close(); return s end
local function write(p, s) local h = assert(io.open(p, "wb")); h:write(s); h:close() end
local good = read(path .. ".tdp")
local bad = path .. "_bad.tdp"
local function load_fails(bytes, pattern, what)
  write(bad, bytes)
  local ok2, err = pcall(torch.load_plan, bad)
  assert(not ok2, what .. ": expected an error")
  assert(err:find("load_plan: " .. bad, 1, true), what .. ": " .. err)
  if pattern then assert(err:find(pattern, 1, true), what .. ": " .. err) end
end
load_fails("", "not a tapedeck plan file", "empty file")
load_fails("hello world, not a plan at all", "not a tapedeck plan file", "text file")
load_fails(good:sub(1, 20), "truncated", "cut in the header")
load_fails(good:sub(1, #good - 7), "truncated", "cut at the end")
load_fails(good .. "xx", "extra bytes", "bytes appended")
load_fails(good:sub(1, 8) .. string.pack("<I4", 99) .. good:sub(13), "version 99 (this tapedeck reads versions 1 to 5)", "version")
load_fails(good:sub(1, 100) .. string.char((good:byte(101) + 1) % 256) .. good:sub(102), "checksum mismatch", "one byte")
ok, message = pcall(torch.load_plan, dir .. "/no/such/file.tdp")
assert(not ok and message:find("cannot open", 1, true), message)
-- Fuzz: every cut and a few hundred random byte changes give an error, not a crash.
math.randomseed(42)
for cut = 0, #good - 1, math.max(1, #good // 97) do load_fails(good:sub(1, cut), nil, "cut at " .. cut) end
for _ = 1, 300 do
  local at = math.random(1, #good)
  local mutated = good:sub(1, at - 1) .. string.char(math.random(0, 255)) .. good:sub(at + 1)
  if mutated ~= good then load_fails(mutated, nil, "byte " .. at) end
end
os.remove(bad)
os.remove(path .. ".tdp")

-- .npy round trips, in each dtype.
for _, dtype in ipairs({"float32", "float64", "int64"}) do
  local t = (torch.arange(12, {dtype = dtype}) - 5):reshape(3, 4)
  torch.save_npy(t, path .. ".npy")
  local back = torch.load_npy(path .. ".npy")
  check.equal(back.dtype, dtype, "npy dtype")
  check.shape(back, {3, 4}, "npy shape")
  check.close(back, t, 0, "npy values")
end
torch.save_npy(torch.tensor(2.5), path .. ".npy")
check.close(torch.load_npy(path .. ".npy"), 2.5, 0, "0-d npy")
-- A file numpy wrote (big-endian int16, format 1.0), byte for byte.
local header = "{'descr': '>i2', 'fortran_order': False, 'shape': (3,), }"
header = header .. string.rep(" ", 64 - (10 + #header + 1) % 64) .. "\n"
write(path .. ".npy", "\x93NUMPY\1\0" .. string.pack("<I2", #header) .. header .. string.pack(">i2>i2>i2", -2, 7, 300))
local ints = torch.load_npy(path .. ".npy")
check.equal(ints.dtype, "int64")
check.close(ints, {-2, 7, 300}, 0, "big-endian int16")
write(path .. ".npy", "\x93NUMPY\1\0" .. string.pack("<I2", 10) .. "{'descr': ")
ok, message = pcall(torch.load_npy, path .. ".npy")
assert(not ok and message:find("load_npy: ", 1, true), message)
-- Headers NumPy would not write are errors naming load_npy and the file, not tensors of some
-- other shape: a shape whose element count wraps (it loaded as a numel-0 tensor), a size that is
-- not a number (`(abc, 2)` loaded as [0, 2]).
local function npy_with(shape_text, data)
  local h = "{'descr': '<f4', 'fortran_order': False, 'shape': " .. shape_text .. ", }"
  h = h .. string.rep(" ", 64 - (10 + #h + 1) % 64) .. "\n"
  write(path .. ".npy", "\x93NUMPY\1\0" .. string.pack("<I2", #h) .. h .. (data or ""))
  local ok2, err = pcall(torch.load_npy, path .. ".npy")
  assert(not ok2, shape_text .. ": expected an error")
  assert(err:find("load_npy: " .. path .. ".npy: ", 1, true), err)
  return err
end
assert(npy_with("(4294967296, 4294967296)"):find("more elements than a tensor can hold", 1, true))
assert(npy_with("(abc, 2)", string.rep("\0", 8)):find("not a tuple of non-negative decimal integers", 1, true))
assert(npy_with("(2, -3)"):find("not a tuple of non-negative decimal integers", 1, true))
os.remove(path .. ".npy")

-- Wrong arguments name the function and the script's line.
local this_file = arg[0]:match("[^/\\]+$")
local function arg_error(fn, want, ...)
  local ok2, err = pcall(fn, ...)
  assert(not ok2, want .. ": expected an error")
  assert(err:find(want, 1, true), err)
  assert(err:find(this_file .. ":%d+%)"), "the message names the line: " .. err)
end
arg_error(torch.save_npy, "save_npy: argument 1: tensor expected, got number", 5, path .. ".npy")
arg_error(torch.load_npy, "load_npy: argument 1: path must be a string, got no value")
arg_error(torch.save_plan, "save_plan: argument 1: expected a frozen function (from torch.freeze), got tensor",
          torch.ones(2), path .. ".tdp")
arg_error(torch.save_plan, "save_plan: argument 2: path must be a string, got boolean", f, true)

-- load_plan's options: a memory bound (max_bytes) and pass switches.
torch.save_plan(f, path .. ".tdp")
arg_error(torch.load_plan, "load_plan: argument 2: options must be a table like {max_bytes = 2^30, fuse = false}, got number",
          path .. ".tdp", 3)
arg_error(torch.load_plan, "load_plan: argument 2: unknown option 'maxbytes' (did you mean 'max_bytes'? it takes max_bytes, dce, cse, fold, fuse",
          path .. ".tdp", {maxbytes = 10})
arg_error(torch.load_plan, "load_plan: argument 2: max_bytes must be a positive whole number of bytes, got -1",
          path .. ".tdp", {max_bytes = -1})
arg_error(torch.load_plan, "load_plan: argument 2: max_bytes must be a positive whole number of bytes, got lots",
          path .. ".tdp", {max_bytes = "lots"})
arg_error(torch.load_plan, "load_plan: " .. path .. ".tdp: the file is larger than the bound of 1000 bytes",
          path .. ".tdp", {max_bytes = 1000})
local size = #read(path .. ".tdp")
arg_error(torch.load_plan, "load_plan: " .. path .. ".tdp: the plan needs ", path .. ".tdp", {max_bytes = size + 10})
local bounded = torch.load_plan(path .. ".tdp", {max_bytes = 1e9, fuse = false, dce = false})
check.close(bounded(x, y), f(x, y), 1e-5, "loaded under a bound, with passes off")
os.remove(path .. ".tdp")

-- A conv net with PyTorch's window options (tuple stride and padding, dilation, groups, one image,
-- max_pool2d with padding, ceil_mode and indices): frozen, saved and loaded, it replays as eager,
-- forward and gradients (the file keeps every window attribute).
torch.manual_seed(5)
local cw = torch.randn(6, 2, 3, 2, {requires_grad = true, dtype = "float64"})
local cb = torch.randn(6, {requires_grad = true, dtype = "float64"})
local function conv_step(image)
  local h = F.conv2d(image, cw, cb, {2, 1}, {1, 2}, {1, 2}, 2):relu()
  local pooled, where = F.max_pool2d(h, {2, 3}, {stride = {1, 2}, padding = {1, 1}, ceil_mode = true, return_indices = true})
  local same = F.conv2d(pooled, torch.ones(6, 1, 2, 2, {dtype = "float64"}), nil, {padding = "same", groups = 6})
  local loss = same:sum()
  loss:backward()
  return loss, where
end
local image = torch.randn(4, 9, 7, {dtype = "float64"})
local eager_loss, eager_where = conv_step(image)
local eager_gw, eager_gb = cw.grad:clone(), cb.grad:clone()
cw.grad, cb.grad = nil, nil
local frozen_conv = torch.freeze(conv_step, image)
torch.save_plan(frozen_conv, path .. "_conv.tdp")
local loaded_conv = torch.load_plan(path .. "_conv.tdp")
os.remove(path .. "_conv.tdp")
local conv_params = loaded_conv:params()
cw.grad, cb.grad = nil, nil
local frozen_loss, frozen_where = frozen_conv(image)
check.close(frozen_loss, eager_loss, 1e-12, "frozen conv net = eager")
check.close(frozen_where, eager_where, 0, "frozen indices = eager")
check.close(cw.grad, eager_gw, 1e-12, "frozen weight gradient = eager")
check.close(cb.grad, eager_gb, 1e-12, "frozen bias gradient = eager")
local loaded_loss, loaded_where = loaded_conv(image)
check.close(loaded_loss, eager_loss, 1e-12, "loaded conv net = eager")
check.close(loaded_where, eager_where, 0, "loaded indices = eager")
check.close(conv_params.cw.grad, eager_gw, 1e-12, "loaded weight gradient = eager")

print("test_freeze_files: ok")
