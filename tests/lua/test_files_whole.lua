-- Files are written whole or not at all, and read by their real size (engine/io/file_whole.h):
--   1. a save into a full filesystem fails with a clear error and leaves the previous .npz,
--      .safetensors, .npy and plan file loadable (a 64 KB tmpfs when mount is permitted, and always a
--      file-size limit, RLIMIT_FSIZE, in a child tapedeck: both say which ran);
--   2. SIGKILL at random times during a ~100 MB save leaves the old file or the whole new one, and
--      the next save removes a temporary file a killed save left;
--   3. /dev/zero, a fifo and a directory are refused by type, with their names, at once; a header
--      that claims more than the file holds is an error, not an allocation;
--   4. a .npz key too long for a zip entry's name is refused before anything is written;
--   5. torch.load gives back the nesting torch.save was given (a checkpoint of a model's and an
--      optimizer's state_dicts), booleans and empty tables; a PyTorch-made .safetensors's
--      __metadata__ is not an entry; a Fortran-ordered .npy (NumPy's transposed arrays) loads.
--      The files made in Python: tests/oracle/make_files_whole_fixtures.py.
local here = arg[0]:match("^(.*[/\\])") or ""
local check = dofile(here .. "check.lua")
local fixtures = here .. "../oracle/files_whole/"
local tapedeck = assert(arg[-1], "the tapedeck program (arg[-1])")

local function shell(command)
  local pipe = assert(io.popen(command .. " 2>&1"))
  local out = pipe:read("a")
  local ok, _, status = pipe:close()
  return out, ok and 0 or status
end
local function quote(s) return "'" .. s:gsub("'", "'\\''") .. "'" end
local function temp_files(folder)   -- the temporary files a save leaves in `folder`, if any
  return (shell("ls -A " .. quote(folder) .. " | grep -F '.tmp-' || true"))
end
local function write_bytes(path, bytes)
  local f = assert(io.open(path, "wb"))
  f:write(bytes)
  f:close()
  return path
end
local function same(a, b, what)
  check.equal(a ~= nil, true, what .. ": loaded")
  check.equal(a:dim(), b:dim(), what .. ": dims")
  check.equal(a:numel(), b:numel(), what .. ": elements")
  check.equal((a:double() - b:double()):abs():max():item(), 0, what .. ": values")
end

-- ---------------------------------------------------------------------------------------------
-- 1. A full filesystem. The scenario runs in `folder`: small files are saved, then bigger ones
-- over them must fail naming the file and `reason`, and the small ones stay as they were.
local function full_disk_scenario(folder, reason)
  local small, big = torch.arange(16):float(), torch.randn(100000)   -- ~1 KB files, then 400 KB ones
  local npz, st, npy, plan = folder .. "/m.npz", folder .. "/m.safetensors", folder .. "/x.npy", folder .. "/p.tdp"
  torch.save({w = small, step = 1}, npz)
  torch.save({w = small}, st)
  torch.save_npy(small, npy)
  local f_small = torch.freeze(function(x) return x * small end, torch.ones(16))
  torch.save_plan(f_small, plan)
  local unchanged = reason .. " (the file there is unchanged)"
  check.fails("torch.save", "cannot write " .. npz .. ": " .. unchanged, function() torch.save({w = big, step = 2}, npz) end)
  check.fails("torch.save", "cannot write " .. st .. ": " .. unchanged, function() torch.save({w = big}, st) end)
  check.fails("save_npy", "cannot write " .. npy .. ": " .. unchanged, function() torch.save_npy(big, npy) end)
  local f_big = torch.freeze(function(x) return x * big end, torch.ones(100000))
  check.fails("save_plan", "cannot write " .. plan .. ": " .. unchanged, function() torch.save_plan(f_big, plan) end)
  same(torch.load(npz).w, small, ".npz after a failed save")
  check.equal(torch.load(npz).step, 1, ".npz after a failed save: step")
  same(torch.load(st).w, small, ".safetensors after a failed save")
  same(torch.load_npy(npy), small, ".npy after a failed save")
  same(torch.load_plan(plan)(torch.ones(16)), small, "plan after a failed save")
  check.equal(temp_files(folder), "", "no temporary file is left after a failed save")
end

if arg[1] == "--full-disk-child" then   -- run by the file-size-limit case below
  full_disk_scenario(arg[2], arg[3])
  print("full disk scenario passed")
  os.exit(0)
end
if arg[1] == "--save-child" then        -- run by the SIGKILL case below: a ~100 MB save
  torch.save({w = torch.full({25000000}, tonumber(arg[3])), version = tonumber(arg[3])}, arg[2])
  os.exit(0)
end

local dir = assert(shell("mktemp -d"):match("^(%S+)"))
local methods = {}

-- A 64 KB tmpfs (needs root and a mount the container permits).
local mount_point = dir .. "/tmpfs"
shell("mkdir " .. quote(mount_point))
local _, mounted = shell("mount -t tmpfs -o size=64k tmpfs " .. quote(mount_point))
if mounted == 0 then
  local ok, err = pcall(full_disk_scenario, mount_point, "No space left on device")
  shell("umount " .. quote(mount_point))
  assert(ok, err)
  methods[#methods + 1] = "a 64 KB tmpfs (No space left on device)"
else
  print("full disk: mount -t tmpfs is not permitted here; the file-size limit below is the test")
end
-- A file-size limit of 32 KB (ulimit -f 64: 512-byte blocks) in a child, SIGXFSZ ignored: a write
-- past it fails with EFBIG.
local limited = dir .. "/limited"
shell("mkdir " .. quote(limited))
local out, status = shell(("ulimit -f 64 && trap '' XFSZ && exec %s %s --full-disk-child %s 'File too large'"):format(
  quote(tapedeck), quote(arg[0]), quote(limited)))
assert(status == 0 and out:find("full disk scenario passed", 1, true), "the file-size-limit scenario failed:\n" .. out)
methods[#methods + 1] = "a 32 KB file-size limit, RLIMIT_FSIZE (File too large)"
print("full disk: tested with " .. table.concat(methods, " and "))

-- ---------------------------------------------------------------------------------------------
-- 2. SIGKILL during a ~100 MB save: the target is the old file or the whole new one.
local target = dir .. "/big.npz"
local function save_old() torch.save({w = torch.full({4}, 1), version = 1}, target) end   -- the file a save replaces
local function check_target(what)
  local ok, loaded = pcall(torch.load, target)
  assert(ok, what .. ": the target does not load: " .. tostring(loaded))
  local v = loaded.version
  assert(v == 1 or v == 2, what .. ": version " .. tostring(v))
  check.equal(loaded.w:numel(), v == 1 and 4 or 25000000, what .. ": elements of version " .. v)
  check.equal(loaded.w:min():item(), v, what .. ": the values of version " .. v)
  check.equal(loaded.w:max():item(), v, what .. ": the values of version " .. v)
  return v
end
local child = ("%s %s --save-child %s 2"):format(quote(tapedeck), quote(arg[0]), quote(target))
local function now() return tonumber((shell("date +%s.%N"))) end
save_old()
local t0 = now()
shell(child)   -- once to the end: how long a save takes here
local save_seconds = now() - t0
check.equal(check_target("a whole save"), 2, "a whole save writes the new file")
save_old()
-- Half the kills land at a random time of the whole save, half while the child has a file open for
-- writing in the folder (seen in /proc/<pid>/fd: the window in which a file written in place is cut
-- short), 0 to 60 ms into it.
local kills, seen, left = 6, {[1] = 0, [2] = 0}, 0
local wait_for_write = ("n=0; while [ $n -lt 3000 ] && ! ls -l /proc/$p/fd 2>/dev/null | grep -qF %s; do n=$((n+1)); done"):format(
  quote(dir .. "/"))
math.randomseed(os.time())
for i = 1, kills do
  local in_write = i % 2 == 0
  local delay = in_write and 0.06 * math.random() or save_seconds * (0.1 + 0.95 * math.random())
  shell(("%s & p=$!; %s; sleep %.3f; kill -9 $p 2>/dev/null; wait $p"):format(child, in_write and wait_for_write or ":", delay))
  local v = check_target(("after kill %d, %.3f s after %s"):format(i, delay, in_write and "the write began" or "the start"))
  seen[v] = seen[v] + 1
  if temp_files(dir) ~= "" then left = left + 1 end
  if v == 2 then save_old() end
end
print(("SIGKILL: a save takes %.2f s; %d kills: %d left the old file, %d the whole new one, %d a temporary file"):format(
  save_seconds, kills, seen[1], seen[2], left))
-- A named temporary file (where the filesystem has no O_TMPFILE) of a process that is gone is
-- removed by the next save to the same target; one of a process that runs is not touched.
local dead_pid = assert(shell("sh -c 'echo $$'"):match("%d+"))
local stale, live = dir .. "/.big.npz.tmp-" .. dead_pid .. "-0", dir .. "/.big.npz.tmp-1-0"
write_bytes(stale, "half a file")
write_bytes(live, "a save in progress")
torch.save({w = torch.zeros(4), version = 1}, target)
check.equal(temp_files(dir), ".big.npz.tmp-1-0\n", "the next save removes the temporary files of killed saves, only theirs")
os.remove(live)

-- ---------------------------------------------------------------------------------------------
-- 3. What is not a regular file is refused by type, at once; a header is not believed.
shell("ln -s /dev/zero " .. quote(dir .. "/zero.npy") .. " && ln -s /dev/zero " .. quote(dir .. "/zero.tdp") ..
      " && ln -s /dev/zero " .. quote(dir .. "/zero.npz") .. " && mkfifo " .. quote(dir .. "/fifo.npy") .. " " .. quote(dir .. "/fifo.safetensors"))
local t = os.clock()
check.fails("load_npy", "/dev/zero is a character device, not a file", function() torch.load_npy("/dev/zero") end)
check.fails("load_npy", dir .. "/zero.npy is a character device, not a file", function() torch.load_npy(dir .. "/zero.npy") end)
check.fails("load_plan", dir .. "/zero.tdp is a character device, not a file", function() torch.load_plan(dir .. "/zero.tdp") end)
check.fails("torch.load", dir .. "/zero.npz is a character device, not a file", function() torch.load(dir .. "/zero.npz") end)
check.fails("load_npy", dir .. "/fifo.npy is a fifo (named pipe), not a file", function() torch.load_npy(dir .. "/fifo.npy") end)
check.fails("torch.load", dir .. "/fifo.safetensors is a fifo (named pipe), not a file", function() torch.load(dir .. "/fifo.safetensors") end)
check.fails("load_npy", dir .. " is a directory, not a file", function() torch.load_npy(dir) end)
check.fails("save_npy", "cannot write /dev/null: it is a character device, not a regular file", function() torch.save_npy(torch.ones(1), "/dev/null") end)
check.fails("save_npy", "cannot write " .. dir .. "/fifo.npy: it is a fifo (named pipe)", function() torch.save_npy(torch.ones(1), dir .. "/fifo.npy") end)
assert(os.clock() - t < 5, "refusing devices and fifos takes no time (reading /dev/zero would not end)")
-- Every writer says why it cannot write (export_onnx said only "cannot write").
local frozen = torch.freeze(function(x) return x * 2 end, torch.ones(2))
check.fails("onnx.export", "export_onnx: cannot write " .. dir .. "/no/x.onnx: No such file or directory", function() torch.onnx.export(frozen, dir .. "/no/x.onnx") end)
check.fails("graphviz", "cannot write " .. dir .. "/no/x.dot: No such file or directory", function() torch.graphviz(frozen(torch.ones(2)), dir .. "/no/x.dot") end)
-- A header that claims 10^12 elements in a 128-byte file, or a tensor past the end: refused
-- before anything is allocated (the peak resident memory does not move by the claimed 4 TB; a
-- clock would measure the sanitizer build's speed, not this).
local peak_before = check.peak_rss_bytes()
local header = "{'descr': '<f4', 'fortran_order': False, 'shape': (1000000000000,), }"
header = header .. string.rep(" ", 117 - #header) .. "\n"
local huge_npy = write_bytes(dir .. "/huge.npy", "\x93NUMPY\1\0" .. string.pack("<I2", #header) .. header)
check.fails("load_npy", "the data is truncated (0 bytes for 1000000000000 elements", function() torch.load_npy(huge_npy) end)
local json = '{"w":{"dtype":"F32","shape":[1000000000000],"data_offsets":[0,4000000000000]}}'
local huge_st = write_bytes(dir .. "/huge.safetensors", string.pack("<I8", #json) .. json)
check.fails("torch.load", "tensor 'w' ends at byte 4000000000000 of the data, past its end (0 bytes)", function() torch.load(huge_st) end)
local peak_after = check.peak_rss_bytes()
if peak_before and peak_after then
  assert(peak_after - peak_before < 64 * 1024 * 1024,
         ("headers that lie are refused before anything is allocated (the peak grew %d bytes)"):format(peak_after - peak_before))
end

-- ---------------------------------------------------------------------------------------------
-- 4. A key too long for a .npz entry's name (65,535 bytes with ".npy") is refused before writing.
local keyed = dir .. "/keys.npz"
torch.save({a = torch.ones(2)}, keyed)
check.fails("torch.save", "is 65532 bytes long: a .npz entry's name (the key and \".npy\") is at most 65535 bytes, so a key at most 65531", function() torch.save({a = torch.zeros(2), [string.rep("k", 65532)] = torch.ones(1)}, keyed) end)
same(torch.load(keyed).a, torch.ones(2), "the file is unchanged after a refused key")
torch.save({a = torch.zeros(2), [string.rep("k", 65531)] = torch.ones(1)}, keyed)
same(torch.load(keyed)[string.rep("k", 65531)], torch.ones(1), "the longest key a .npz holds")
check.fails("torch.save", "the key '__tapedeck_nesting__' is reserved", function() torch.save({__tapedeck_nesting__ = "x"}, keyed) end)

-- The new file keeps the old one's permission bits; a symbolic link stays a link to the new file.
shell("chmod 600 " .. quote(keyed))
torch.save({a = torch.ones(3)}, keyed)
check.equal(shell("stat -c %a " .. quote(keyed)), "600\n", "the permission bits of the file replaced")
shell("ln -s keys.npz " .. quote(dir .. "/link.npz"))
torch.save({a = torch.ones(5)}, dir .. "/link.npz")
check.equal(shell("readlink " .. quote(dir .. "/link.npz")), "keys.npz\n", "a symbolic link stays")
same(torch.load(keyed).a, torch.ones(5), "the file the link points to is replaced")

-- ---------------------------------------------------------------------------------------------
-- 5. torch.load gives back what torch.save was given.
torch.manual_seed(1)
local model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
local opt = torch.optim.Adam(model:parameters(), {lr = 0.01})
model(torch.randn(5, 3)):sum():backward()
opt:step()
for _, ext in ipairs({"npz", "safetensors"}) do
  local path = dir .. "/ckpt." .. ext
  local saved = {model = model:state_dict(), optimizer = opt:state_dict(), epoch = 3, lr = 0.5, done = false,
                 best = true, note = "run 1", empty = {}, list = {"a", "b"}, deep = {a = {b = {c = 7}}}}
  torch.save(saved, path)
  local ckpt, metadata = torch.load(path), torch.load_metadata(path)
  local what = "." .. ext .. " checkpoint"
  same(ckpt.model["0.weight"], model[1].weight, what .. ": model[\"0.weight\"] (state_dict keys stay dotted)")
  check.equal(ckpt["model.0.weight"], nil, what .. ": no flat key")
  check.equal(ckpt.epoch, 3, what .. ": epoch")
  check.equal(math.type(ckpt.epoch), "integer", what .. ": epoch is an integer")
  check.equal(ckpt.lr, 0.5, what .. ": lr")
  check.equal(ckpt.done, false, what .. ": a boolean false")
  check.equal(ckpt.best, true, what .. ": a boolean true")
  check.equal(ckpt.note, "run 1", what .. ": a string")
  check.equal(type(ckpt.empty) == "table" and next(ckpt.empty) == nil, true, what .. ": an empty table")
  check.equal(ckpt.list[1] .. ckpt.list[2] .. #ckpt.list, "ab2", what .. ": integer keys come back as integers")
  check.equal(ckpt.deep.a.b.c, 7, what .. ": three tables deep")
  check.equal(ckpt.optimizer.param_groups[1].amsgrad, false, what .. ": an optimizer's boolean option")
  check.equal(next(metadata), nil, what .. ": no metadata of the file's own")
  local copy = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
  copy:load_state_dict(ckpt.model)
  same(copy[3].bias, model[3].bias, what .. ": load_state_dict(ckpt.model)")
  torch.optim.Adam(copy:parameters(), {lr = 0.01}):load_state_dict(ckpt.optimizer)
end
-- A flat table (a state_dict, or a file of an older tapedeck) stays flat; a lone tensor is arr_0.
local flat = dir .. "/flat.npz"
torch.save({["fc.weight"] = torch.ones(2), ["fc.bias"] = torch.zeros(2)}, flat)
same(torch.load(flat)["fc.weight"], torch.ones(2), "a dotted key stays a dotted key")
check.equal(torch.load(flat).fc, nil, "a dotted key makes no table")
check.equal(shell("unzip -l " .. quote(flat) .. " 2>/dev/null | grep -c __tapedeck_nesting__ || true"), "0\n",
            "a flat table is saved without a nesting record")

-- A .safetensors file PyTorch made: its __metadata__ is not an entry (torch.load_metadata has it).
local sd = torch.load(fixtures .. "torch_checkpoint.safetensors")
local metadata = torch.load_metadata(fixtures .. "torch_checkpoint.safetensors")
local expected = dofile(fixtures .. "torch_checkpoint.lua")
for key, entry in pairs(expected) do same(sd[key], torch.tensor(entry.values):reshape(table.unpack(entry.shape)), "PyTorch's " .. key) end
check.equal(sd.format, nil, "__metadata__ is not an entry")
check.equal(metadata.format, "pt", "__metadata__ is torch.load_metadata's")
local count = 0
for _ in pairs(sd) do count = count + 1 end
check.equal(count, 2, "a PyTorch state_dict's entries, and nothing else")

-- Fortran-ordered .npy files (numpy.save of a transposed array) load in row-major order.
same(torch.load_npy(fixtures .. "fortran_2d.npy"), torch.arange(6):float():reshape(3, 2):t(), "a transposed PyTorch tensor")
same(torch.load_npy(fixtures .. "fortran_3d_f64.npy"), torch.arange(24):double():reshape(2, 3, 4), "a Fortran-order 3-d array")
local fortran_i64 = torch.load_npy(fixtures .. "fortran_i64.npy")
same(fortran_i64, torch.arange(6):reshape(2, 3):t(), "a Fortran-order int64 array")
check.equal(fortran_i64.dtype, "int64", "int64 stays int64")
local fortran = torch.load(fixtures .. "fortran.npz")
same(fortran.a, torch.arange(6):float():reshape(3, 2):t(), "a Fortran-order .npz entry")
same(fortran.b, torch.arange(24):double():reshape(2, 3, 4), "a Fortran-order 3-d .npz entry")

-- PyTorch's keywords of torch.load: map_location (the device the tensors go to; checked before
-- the file is read) and weights_only (the same either way: the files hold no code).
local located = torch.load(fixtures .. "fortran.npz", {map_location = "cpu", weights_only = true})
same(located.a, fortran.a, "map_location = cpu")
check.equal(located.a.device, "cpu", "map_location = cpu: on the CPU")
check.fails("torch.load", "unknown device 'gpu'", function() local t = torch.load(fixtures .. "fortran.npz", {map_location = "gpu"}); return t end)
check.fails("torch.load", "weights_only must be true or false", function() local t = torch.load(fixtures .. "fortran.npz", {weights_only = 1}); return t end)
if not torch.cuda.is_available() then
  check.fails("torch.load", "map_location: no CUDA device", function() local t = torch.load(fixtures .. "fortran.npz", {map_location = "cuda"}); return t end)
else
  check.equal(torch.load(fixtures .. "fortran.npz", {map_location = "cuda"}).a.device, "cuda", "map_location = cuda")
end

shell("rm -rf " .. quote(dir))
print("files whole: ok")
