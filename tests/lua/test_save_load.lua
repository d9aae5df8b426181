-- torch.save / torch.load: tensors, numbers and strings under dotted keys round-trip exactly in
-- .npz (stored and deflated) and .safetensors; files made by NumPy and by a safetensors writer
-- load (tests/oracle/make_save_load_fixtures.py made them); and a bad, truncated or hostile file,
-- or a value that cannot be saved, is an error naming torch.save / torch.load and what is wrong.
local here = arg[0]:match("^(.*[/\\])") or ""
local check = dofile(here .. "check.lua")
local fixtures = here .. "../oracle/save_load/"
local dir = os.getenv("TMPDIR") or "/tmp"
local base = dir .. "/tapedeck_save_load_" .. tostring(os.time()) .. "_" .. tostring(math.random(1e9))
local written = {}
local function temp(name)
  written[#written + 1] = base .. "_" .. name
  return written[#written]
end

local function read_bytes(path)
  local f = assert(io.open(path, "rb"))
  local bytes = f:read("a")
  f:close()
  return bytes
end
local function write_bytes(path, bytes)
  local f = assert(io.open(path, "wb"))
  f:write(bytes)
  f:close()
  return path
end
-- bytes with `packed` written over them at 1-based position `at`.
local function patch(bytes, at, packed) return bytes:sub(1, at - 1) .. packed .. bytes:sub(at + #packed) end

-- Exact equality of two tensors: dtype, shape and every element.
local function same_tensor(a, b, what)
  assert(torch.is_tensor(a), what .. ": not a tensor: " .. tostring(a))
  check.equal(a.dtype, b.dtype, what .. " dtype")
  check.equal(tostring(a.shape), tostring(b.shape), what .. " shape")
  check.close(a, b, 0, what)
end

-- ---------------------------------------------------------------------------------------------
-- 1. Round trips: nested tables flatten to dotted keys; dtypes, 0-d tensors, views, numbers
-- (integer or float, as Lua has them) and strings come back exactly.
torch.manual_seed(5)
local w = torch.randn(3, 4)
local original = {
  fc = {weight = w, bias = torch.randn(4, {dtype = "float64"}) / 3},
  layers = {torch.tensor({{1, -2}, {3, 4}}, {dtype = "int64"}), torch.tensor(2.5)},   -- integer keys: "1", "2"
  ["0.weight"] = torch.randn(2, 2),                                                    -- already dotted
  scalar64 = torch.tensor(1 / 3, {dtype = "float64"}),
  scalar_int = torch.tensor(7, {dtype = "int64"}),
  transposed = w:t(),                                   -- views: saved in logical order
  column = w:narrow(2, 2, 1),
  expanded = torch.tensor({1, 2, 3}):expand(2, 3),
  empty = torch.zeros(0, 3),
  with_grad = torch.randn(2, {requires_grad = true}),
  lr = 0.1, step = 3, big = math.maxinteger, tiny = 5e-324, negative_zero = -0.0,
  name = "mlp", unicode = "h\u{e9}llo \u{1F600}", empty_string = "", with_nul = "a\0b",
}
local expected = {
  ["fc.weight"] = original.fc.weight, ["fc.bias"] = original.fc.bias, ["layers.1"] = original.layers[1],
  ["layers.2"] = original.layers[2], ["0.weight"] = original["0.weight"], scalar64 = original.scalar64,
  scalar_int = original.scalar_int, transposed = w:t():contiguous(), column = w:narrow(2, 2, 1):contiguous(),
  expanded = torch.tensor({{1, 2, 3}, {1, 2, 3}}), empty = original.empty, with_grad = original.with_grad:detach(),
}
local plain = {"lr", "step", "big", "tiny", "negative_zero", "name", "unicode", "empty_string", "with_nul"}

-- The loaded table's nesting, as dotted keys (what the checks below compare).
local function dotted(t, prefix, out)
  out = out or {}
  for k, v in pairs(t) do
    local key = (prefix and prefix .. "." or "") .. tostring(k)
    if type(v) == "table" and not torch.is_tensor(v) then dotted(v, key, out) else out[key] = v end
  end
  return out
end

local function check_round_trip(nested, what)
  check.equal(torch.is_tensor(nested.fc.weight), true, what .. ": nested tables come back nested")
  check.equal(torch.is_tensor(nested.layers[1]), true, what .. ": an integer key comes back an integer")
  local loaded = dotted(nested)
  local count = 0
  for _ in pairs(loaded) do count = count + 1 end
  check.equal(count, 12 + #plain, what .. ": number of keys")
  for key, t in pairs(expected) do same_tensor(loaded[key], t, what .. " " .. key) end
  for _, key in ipairs(plain) do
    check.equal(loaded[key], original[key], what .. " " .. key)
    check.equal(math.type(loaded[key]), math.type(original[key]), what .. " " .. key .. " (integer or float)")
  end
  check.equal(1 / loaded.negative_zero, -math.huge, what .. " -0.0 keeps its sign")
  check.equal(loaded.with_grad.requires_grad, false, what .. ": a loaded tensor is a fresh leaf")
end

local npz, compressed, st = temp("a.npz"), temp("c.npz"), temp("a.safetensors")
torch.save(original, npz)
torch.save(original, compressed, {compress = true})
torch.save(original, st)
check_round_trip(torch.load(npz), ".npz")
check_round_trip(torch.load(compressed), ".npz compressed")
check_round_trip(torch.load(st), ".safetensors")
assert(#read_bytes(compressed) < #read_bytes(npz), "compress = true deflates the entries")

-- A string that is not UTF-8 is saved as bytes in .npz.
local raw = temp("raw.npz")
torch.save({blob = "\xff\xfe\0x"}, raw)
check.equal(torch.load(raw).blob, "\xff\xfe\0x", "bytes that are not UTF-8 round-trip in .npz")
-- A lone tensor or number is saved as "arr_0", numpy.savez's name for an unnamed array.
local lone = temp("lone.safetensors")
torch.save(w, lone)
same_tensor(torch.load(lone).arr_0, w, "a lone tensor")
-- An empty table makes a file with no entries.
local nothing = temp("nothing.npz")
torch.save({}, nothing)
check.equal(next(torch.load(nothing)), nil, "an empty table")
-- Saving twice gives the same bytes (no time stamps, keys in a fixed order).
local again = temp("again.npz")
torch.save(original, again)
local again2 = temp("again2.npz")
torch.save(original, again2)
check.equal(read_bytes(again) == read_bytes(again2), true, "the same table saves to the same bytes")

-- Entries are written in the order of a table's __pairs (a state_dict keeps PyTorch's key order),
-- else sorted by key.
local function ordered(keys, values)
  return setmetatable(values, {__pairs = function(t)
    local i = 0
    return function() i = i + 1; if keys[i] then return keys[i], rawget(t, keys[i]) end end, t, nil
  end})
end
local order_file = temp("order.npz")
torch.save({m = ordered({"z", "a", "k"}, {a = 1, k = 2, z = 3}), b = {y = 1, x = 2}}, order_file)
local order_bytes = read_bytes(order_file)
local function at(name) return assert(order_bytes:find(name .. ".npy", 1, true), name) end
assert(at("b.x") < at("b.y") and at("b.y") < at("m.z") and at("m.z") < at("m.a") and at("m.a") < at("m.k"),
       "a plain table's keys sorted, an ordered table's in its __pairs order")
check.equal(torch.load(order_file).m.k, 2, "an ordered table's values")

-- ---------------------------------------------------------------------------------------------
-- 2. Files made in Python: numpy.savez, numpy.savez_compressed, a safetensors file.
local function check_python_values(loaded, metadata, what, with_numpy_extras)
  same_tensor(loaded["fc.weight"], torch.arange(6):float():reshape(2, 3) / 4, what .. " fc.weight")
  same_tensor(loaded["fc.bias"], torch.tensor({-1.5, 2.25}, {dtype = "float64"}), what .. " fc.bias")
  same_tensor(loaded["0.weight"], torch.tensor({{1, -2}, {3, 4}}, {dtype = "int64"}), what .. " 0.weight")
  same_tensor(loaded.num_batches_tracked, torch.tensor(7, {dtype = "int64"}), what .. " a 0-d int64 array is a 0-d tensor")
  same_tensor(loaded.empty, torch.zeros(0, 3), what .. " empty")
  if with_numpy_extras then
    check.equal(loaded.note, "h\u{e9}llo", what .. " note")
    same_tensor(loaded.big_endian, torch.tensor({1, 2}, {dtype = "float64"}), what .. " big-endian float64")
    check.equal(loaded.tag, "raw", what .. " a bytes string")
  else   -- a .safetensors file tapedeck did not write: its __metadata__ is the file's, not entries
    check.equal(loaded.note, nil, what .. " __metadata__ entries are not entries")
    check.equal(metadata.format, "pt", what .. " __metadata__ is torch.load_metadata's")
    check.equal(metadata.note, "h\u{e9}llo", what .. " __metadata__ note")
  end
end
for _, case in ipairs({{"numpy_savez.npz", "numpy.savez", true}, {"numpy_savez_compressed.npz", "numpy.savez_compressed", true},
                       {"python.safetensors", "safetensors", false}}) do
  local path = fixtures .. case[1]
  check_python_values(torch.load(path), torch.load_metadata(path), case[2], case[3])
end

-- ---------------------------------------------------------------------------------------------
-- 3. What cannot be saved.
check.fails("torch.save", "the extension '.pt' is not one of them (PyTorch's own files are pickles", function() torch.save({}, temp("m.pt")) end)
check.fails("torch.save", "it has no extension", function() torch.save({}, temp("model")) end)
torch.save({fc = {flag = true}}, npz)
check.equal(torch.load(npz).fc.flag, true, "a boolean round-trips")
check.fails("torch.save", "the value at 'f' is a function", function() torch.save({f = print}, npz) end)
local loop = {}
loop.again = loop
check.fails("torch.save", "the value at 'again' is a table that holds itself", function() torch.save(loop, npz) end)
check.fails("torch.save", "has a key of type boolean (keys are strings or integers)", function() torch.save({[true] = 1}, npz) end)
check.fails("torch.save", "the table at 'fc' has a key of type number", function() torch.save({fc = {[1.5] = 1}}, npz) end)
check.fails("torch.save", "the table holds an empty key", function() torch.save({[""] = 1}, npz) end)
check.fails("torch.save", "the key 'fc.weight' is given twice", function() torch.save({fc = {weight = w}, ["fc.weight"] = w}, npz) end)
check.fails("torch.save", "the key '__tapedeck_numbers__' is reserved", function() torch.save({__tapedeck_numbers__ = "x"}, st) end)
check.fails("torch.save", "the key '__metadata__' is reserved", function() torch.save({__metadata__ = w}, st) end)
check.fails("torch.save", "compress is for .npz files", function() torch.save({}, st, {compress = true}) end)
check.fails("torch.save", "unknown option 'level' (it takes compress)", function() torch.save({}, npz, {level = 9}) end)
check.fails("torch.save", "is not UTF-8 (safetensors metadata is JSON text): use .npz", function() torch.save({s = "\xff"}, st) end)
check.fails("torch.save", "ends with a NUL byte", function() torch.save({s = "a\0"}, npz) end)
local module = setmetatable({}, {__index = {state_dict = function() return {} end}})
check.fails("torch.save", "torch.save(model:state_dict(), path)", function() torch.save(module, npz) end)
check.fails("torch.save", "cannot write", function() torch.save({}, dir .. "/no/such/dir/x.npz") end)
check.fails("torch.save", "argument 2: path must be a string", function() torch.save({}) end)

-- ---------------------------------------------------------------------------------------------
-- 4. Files that are not what they say: each an error naming the file, never a crash.
check.fails("torch.load", "the extension '.pth' is not one of them", function() torch.load("model.pth") end)
check.fails("torch.load", "cannot open", function() torch.load(dir .. "/no_such_file.npz") end)
local object_array = fixtures .. "numpy_object_array.npz"
check.fails("torch.load", "holds Python objects (dtype object, stored as a pickle): tapedeck never runs pickles", function() torch.load(object_array) end)

-- npz: a zip of .npy files.
local good = read_bytes(fixtures .. "numpy_savez.npz")
local good_deflated = read_bytes(fixtures .. "numpy_savez_compressed.npz")
local bad = temp("bad.npz")
local function npz_file(bytes) return write_bytes(bad, bytes) end
check.fails("torch.load", bad .. ": not a .npz file (no zip end-of-central-directory record)", function() torch.load(npz_file("hello, not a zip file at all")) end)
check.fails("torch.load", "too short for a zip archive", function() torch.load(npz_file("PK")) end)
check.fails("torch.load", "no zip end-of-central-directory record", function() torch.load(npz_file(good:sub(1, #good - 7))) end)   -- truncated
local central = good:find("PK\1\2", 1, true)   -- the first central directory record
local last_end = #good - 21                    -- the end record
check.fails("torch.load", "entry 'fc.weight.npy': its local header and the directory disagree on its sizes", function() torch.load(npz_file(
            patch(good, central + 24, string.pack("<I4", 100)))) end)
check.fails("torch.load", "entry 'fc.weight.npy': no local header at offset 2147483632", function() torch.load(npz_file(
            patch(good, central + 42, string.pack("<I4", 0x7FFFFFF0)))) end)
check.fails("torch.load", "the central directory (offset 4294967040", function() torch.load(npz_file(patch(good, last_end + 16, string.pack("<I4", 0xFFFFFF00)))) end)
check.fails("torch.load", "declares 1000 entries, more than its directory holds", function() torch.load(npz_file(patch(good, last_end + 10, string.pack("<I2", 1000)))) end)
check.fails("torch.load", "entry 'fc.weight.npy' is corrupt (its CRC-32 does not match)", function() torch.load(npz_file(patch(good, 0x97, "\x42"))) end)
check.fails("torch.load", "entry 'fc.weight.npy' uses zip compression method 12", function() torch.load(npz_file(patch(patch(good, 9, "\12\0"), central + 10, "\12\0"))) end)
check.fails("torch.load", "entry 'fc.weight.npy' is encrypted", function() torch.load(npz_file(patch(patch(good, 7, "\1\0"), central + 8, "\1\0"))) end)
-- Data that runs into the central directory: the first entry claims all bytes up to the end.
local long = string.pack("<I4", central)
check.fails("torch.load", "entry 'fc.weight.npy': its " .. central .. " bytes of data run past the start of the central directory", function() torch.load(npz_file(
            patch(patch(patch(patch(good, 19, long), 23, long), central + 20, long), central + 24, long))) end)
-- A deflated entry that lies about its uncompressed size: a little, or hugely (a zip bomb's header).
local central_deflated = good_deflated:find("PK\1\2", 1, true)
local function with_uncompressed(size)
  local n = string.pack("<I4", size)
  return patch(patch(good_deflated, 23, n), central_deflated + 24, n)
end
check.fails("torch.load", "entry 'fc.weight.npy' inflates to 152 bytes, but declares 200", function() torch.load(npz_file(with_uncompressed(200))) end)
check.fails("torch.load", "entry 'fc.weight.npy' inflates to more than the 100 bytes it declares", function() torch.load(npz_file(with_uncompressed(100))) end)
check.fails("torch.load", "declares 4000000000 bytes uncompressed from", function() torch.load(npz_file(with_uncompressed(4000000000))) end)
check.fails("torch.load", "its deflated data is corrupt or cut short", function() torch.load(npz_file(patch(good_deflated, 60, "\xff\xff\xff\xff\xff\xff"))) end)
-- Entries that are not .npy arrays, or whose .npy is bad, are named with the file.
local renamed = good:gsub("fc%.weight%.npy", "fc.weight.pkl")
check.fails("torch.load", "entry 'fc.weight.pkl' is not a .npy array", function() torch.load(npz_file(renamed)) end)
-- A zip with one empty stored entry (its CRC-32 is 0): the .npy reader names the entry.
local function zip_of_empty_entry(name)
  local fields = string.pack("<I2I2I2I2I2I4I4I4I2I2", 20, 0, 0, 0, 0x21, 0, 0, 0, #name, 0)
  local local_header = string.pack("<I4", 0x04034b50) .. fields .. name
  local directory = string.pack("<I4I2", 0x02014b50, 20) .. fields .. string.pack("<I2I2I2I4I4", 0, 0, 0, 0, 0) .. name
  return local_header .. directory .. string.pack("<I4I2I2I2I2I4I4I2", 0x06054b50, 0, 0, 1, 1, #directory, #local_header, 0)
end
check.fails("torch.load", bad .. ": entry 'x.npy': not a .npy file", function() torch.load(npz_file(zip_of_empty_entry("x.npy"))) end)

-- safetensors: header length, JSON header, raw bytes.
local bad_st = temp("bad.safetensors")
local function safetensors_bytes(header, data)
  header = header .. string.rep(" ", (8 - #header % 8) % 8)
  return string.pack("<I8", #header) .. header .. (data or "")
end
local function st_file(header, data) return write_bytes(bad_st, safetensors_bytes(header, data)) end
local eight = string.rep("\0", 8)
check.fails("torch.load", bad_st .. ": not a .safetensors file", function() torch.load(write_bytes(bad_st, "abc")) end)
check.fails("torch.load", "the header length (1152921504606846976 bytes) is larger than the file", function() torch.load(write_bytes(bad_st, string.pack("<I8", 1 << 60) .. "{}")) end)
local sparse = temp("sparse.safetensors")   -- a header length over the bound, in a file that long
do
  local f = assert(io.open(sparse, "wb"))
  f:write(string.pack("<I8", 200000000))
  f:seek("set", 200000010)
  f:write("x")
  f:close()
end
check.fails("torch.load", "the header length (200000000 bytes) is over the bound of 100 MB", function() torch.load(sparse) end)
check.fails("torch.load", "the JSON header: expected '{' at the start of the header: the header is a JSON object", function() torch.load(st_file("[1, 2]")) end)
check.fails("torch.load", "tensor 'a' (float32, shape [2]) needs 8 bytes, but its data_offsets [0, 4] give 4", function() torch.load(st_file(
            '{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}}', "\0\0\0\0")) end)
check.fails("torch.load", "tensor 'a' ends at byte 8 of the data, past its end (4 bytes)", function() torch.load(st_file(
            '{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}', "\0\0\0\0")) end)
check.fails("torch.load", "needs 8 bytes, but its data_offsets [8, 0] give an end before the begin", function() torch.load(st_file(
            '{"a":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}}', eight)) end)
check.fails("torch.load", "the data of tensors 'a' and 'b' overlap", function() torch.load(st_file(
            '{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}', eight)) end)
check.fails("torch.load", "bytes 0 to 4 of the data belong to no tensor", function() torch.load(st_file(
            '{"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}', eight)) end)
check.fails("torch.load", "4 bytes after the last tensor's data belong to no tensor", function() torch.load(st_file(
            '{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}', eight)) end)
check.fails("torch.load", "tensor 'a' has shape [4294967296,4294967296]: more elements than a tensor can hold", function() torch.load(st_file(
            '{"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,0]}}')) end)
check.fails("torch.load", "data_offsets' end does not fit in 64 bits", function() torch.load(st_file(
            '{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,99999999999999999999]}}')) end)
check.fails("torch.load", "tensor 'a' has dtype 'BF16', which tapedeck does not hold (F32, F64 and I64 load", function() torch.load(st_file(
            '{"a":{"dtype":"BF16","shape":[1],"data_offsets":[0,2]}}', "\0\0")) end)
check.fails("torch.load", "tensor 'half' has dtype 'F16'", function() torch.load(fixtures .. "python_f16.safetensors") end)
check.fails("torch.load", "tensor 'a' has an unknown field 'offsets'", function() torch.load(st_file('{"a":{"dtype":"F32","shape":[1],"offsets":[0,4]}}', "\0\0\0\0")) end)
check.fails("torch.load", "tensor 'a' lacks 'data_offsets'", function() torch.load(st_file('{"a":{"dtype":"F32","shape":[1]}}', "\0\0\0\0")) end)
check.fails("torch.load", "the key 'a' is given twice", function() torch.load(st_file(
            '{"a":{"dtype":"F32","shape":[],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[],"data_offsets":[0,4]}}', "\0\0\0\0")) end)
check.fails("torch.load", "a value of \"__metadata__\" is not a string", function() torch.load(st_file('{"__metadata__":{"n":3}}')) end)
check.fails("torch.load", "'n' is both a tensor and a \"__metadata__\" string", function() torch.load(st_file(
            '{"__metadata__":{"n":"x"},"n":{"dtype":"F32","shape":[],"data_offsets":[0,4]}}', "\0\0\0\0")) end)
check.fails("torch.load", "something other than spaces follows the header object", function() torch.load(st_file('{} {}')) end)
check.fails("torch.load", "a key of the header is not closed", function() torch.load(st_file('{"abc')) end)
check.fails("torch.load", "has more than 6 dims", function() torch.load(st_file('{"a":{"dtype":"F32","shape":[1,1,1,1,1,1,1],"data_offsets":[0,4]}}', "\0\0\0\0")) end)
-- The list of numbers must name 0-d int64 or float64 arrays.
check.fails("torch.load", "'__tapedeck_numbers__' lists 'a' as a number (a 0-d int64 or float64 array), but it is not one", function() torch.load(st_file(
            '{"__metadata__":{"__tapedeck_numbers__":"[\\"a\\"]"},"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}', "\0\0\0\0")) end)
check.fails("torch.load", "the list '__tapedeck_numbers__': expected '[' at its start", function() torch.load(st_file(
            '{"__metadata__":{"__tapedeck_numbers__":"a"}}')) end)

for _, path in ipairs(written) do os.remove(path) end
print("save/load: ok")
