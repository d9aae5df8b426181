-- api_fuzz.lua: a seeded random sequence of calls through the whole Lua API (torch, Tensor methods
-- and operators, torch.Function, freeze and plan/npy files, nn, optim, the debugger's `dbg`), for
-- sanitizer builds: any crash, hang or sanitizer report is a bug, and every error a call raises is
-- checked for the message rules of docs/design.md (names the function, carries the user's file:line,
-- one line).
--
--   tapedeck tests/fuzz/api_fuzz.lua --seed N [--calls M] [--seconds S] [--log FILE] [--strict]
--            [--avoid class,class] [--gc normal|stress|generational] [--report FILE] [--quiet]
--
--   --seed N       the sequence (same seed, same calls)
--   --calls M      stop after M calls (default 2000)
--   --seconds S    stop after S seconds of wall time (default: no limit)
--   --log FILE     write a runnable reproducer: the runtime below, then one C(n, "source", {slots})
--                  line per call, flushed before the call runs. After a crash `tapedeck FILE
--                  </dev/null` replays the same calls up to the one that crashed (the last line).
--   --strict       exit 1 when an error message does not name the function that was called (CI)
--   --avoid LIST   skip known crash classes so a campaign can find the next ones (see AVOID below;
--                  `--avoid list` prints them)
--   --gc MODE      the collector: normal (default), stress (a cycle starts at once after each
--                  one: GC runs inside nearly every allocation) or generational
--   --report FILE  append the offending messages (tab-separated: count, kind, failed checks,
--                  normalized message, example) for run_api_fuzz.sh to add up over seeds
--   --quiet        print only the summary line
--
-- How a call is made: the generator writes Lua source text (one statement or a small block) that
-- uses a pool of live objects in globals: T[1..24] tensors (TM[i] their shape/dtype, refreshed
-- after each call that assigns them), M modules, O optimizers, Z frozen functions, FN
-- torch.Functions, BP breakpoint ids. The text is appended to the log, then loaded as the chunk
-- `fuzz_call_<n>` and run under pcall by C() (the runtime, identical in the fuzzer and in a
-- replayed log). An error message must then name the function (per call kind: see `names` of each
-- generator, e.g. x:narrow() -> "narrow", a + b -> "add", t[mask] = v -> "masked_fill" or
-- "masked_fill_", nn.Linear -> "Linear" or "linear", optim.SGD -> "SGD"), carry `fuzz_call_<k>:<line>`
-- (the user's chunk and line) and be one line without a traceback.
--
-- Memory: pool tensors with more than 16384 elements (counting non-zero dims) or a dim over 1024
-- are dropped after each call, so later ops on them stay small; sizes that are meant to be refused
-- are either non-positive, non-integer or at least 2^40 elements (see safe_dims), never a size that
-- would really allocate gigabytes. torch.set_memory_limit(1 GiB) is called when it exists.
--
-- Not covered: the viewer (`viewer` table, :view), stdin prompts at debugger stops (a default
-- on_stop handler answers them; run replays with </dev/null), signals, the REPL's line input
-- (only `:` commands through dbg.command), `tapedeck run-plan`, numerical results (the only
-- oracle: a tensor's numel equals the product of its shape).
--
-- A finding becomes a test: shrink its log with minimize_log.lua (GC-timing ones need a hand-made
-- reproducer, see repro/tape_gc.lua), keep it as repro/<name>.lua, and add a --avoid class here
-- until it is fixed.
--
-- [SECTION] options          command line, AVOID (the known crash classes)
-- [SECTION] runtime          the prelude of every log: pool globals, C() that runs one call
-- [SECTION] random choices   the seeded generator's helpers
-- [SECTION] shapes, values, wrong arguments   sizes (safe_dims), nasty values, wrong()
-- [SECTION] the pool as the generator sees it   targ(): a tensor argument, mutate(), render()
-- [SECTION] creation ... [SECTION] debugger   one gen() per call kind, with its weight
-- [SECTION] message accounting   name / file:line / one-line checks, offending messages
-- [SECTION] main loop        generate, log, run, keep the generator's view in step
-- [SECTION] summary          figures, top offenders, --report, exit status

-- ============================================================================================
-- [SECTION] options

local USAGE = "usage: tapedeck api_fuzz.lua --seed N [--calls M] [--seconds S] [--log FILE] [--strict] " ..
              "[--avoid a,b] [--gc normal|stress|generational] [--report FILE] [--quiet]"

-- Known crash classes a campaign can skip; each is checked where its calls are generated.
local AVOID = {
  tape_gc = "torch.tape()/torch.graph() with garbage pending: run a full collection and stop the GC around them",
  softmax_empty = "softmax/log_softmax/cross_entropy/nll_loss on a tensor with a 0-size dim",
  narrow_huge = "narrow with a start or length outside [-2^31, 2^31]",
  timeit_after_error = "f:timeit() right after a call of f that raised an error",
  huge_sizes = "sizes, dims and counts of 2^31 and beyond (overflow classes) anywhere",
  int_cast = "float -> int64 conversions of NaN, Inf or out-of-range values (UB in the cast)",
  graphviz_render = "torch.graphviz to .svg/.png (Graphviz's pango plugin under ASan)",
  dbg_actions = "breakpoint actions and on_stop handlers that edit values, step or error",
  expand_negative = "expand with negative sizes other than -1",
  reshape_overflow = "reshape/view with sizes of 2^31 and beyond (their product overflows)",
  npy_overflow = ".npy files whose shape's element count overflows int64",
  timeit_empty = "f:timeit() of functions given or capturing tensors with a 0-size dim",
  int_overflow = "int64 values near 2^63 next to int64 tensors (arithmetic overflows)",
  empty_huge = "0-element sizes next to a size of 2^20 or more (nn.Linear(2^63-1, 0): copies loop over the huge dim)",
  deep_chain = "chains of 60,000 ops in one call (20,000 stay)",
  stop_quadratic = "long chains kept in the pool (a later backward with a stop at every node is O(n^2): F16)",
  conv_padding_huge = "conv2d / nn.Conv2d with padding or stride >= 2^20",
}

local opt = {calls = 2000, seconds = nil, avoid = {}, gc = "normal"}
do
  local argv = arg or {}
  local i = 1
  local function value()
    i = i + 1
    if argv[i] == nil then error(USAGE, 0) end
    return argv[i]
  end
  while argv[i] do
    local a = argv[i]
    if a == "--seed" then opt.seed = math.tointeger(tonumber(value()))
    elseif a == "--calls" then opt.calls = math.tointeger(tonumber(value()))
    elseif a == "--seconds" then opt.seconds = tonumber(value())
    elseif a == "--log" then opt.log = value()
    elseif a == "--strict" then opt.strict = true
    elseif a == "--quiet" then opt.quiet = true
    elseif a == "--report" then opt.report = value()
    elseif a == "--gc" then opt.gc = value()
    elseif a == "--avoid" then
      local list = value()
      if list == "list" then
        local names = {}
        for name in pairs(AVOID) do names[#names + 1] = name end
        table.sort(names)
        for _, name in ipairs(names) do print(string.format("%-20s %s", name, AVOID[name])) end
        os.exit(0)
      end
      for name in list:gmatch("[^,%s]+") do
        if name == "all" then for k in pairs(AVOID) do opt.avoid[k] = true end
        elseif not AVOID[name] then error("api_fuzz: unknown --avoid class '" .. name .. "' (--avoid list)", 0)
        else opt.avoid[name] = true end
      end
    else
      error("api_fuzz: unknown argument '" .. tostring(a) .. "'\n" .. USAGE, 0)
    end
    i = i + 1
  end
  if not opt.seed or not opt.calls then error(USAGE, 0) end
  if opt.gc ~= "normal" and opt.gc ~= "stress" and opt.gc ~= "generational" then error(USAGE, 0) end
end
local avoid = opt.avoid

-- ============================================================================================
-- [SECTION] runtime (the prelude of every log: a log runs by itself with `tapedeck LOG`)

local RUNTIME = [==[
-- apifuzz runtime (tests/fuzz/api_fuzz.lua). Replay this log: tapedeck THIS_FILE </dev/null
APIFUZZ_SEED, APIFUZZ_GC = @SEED@, "@GC@"
T, TM, M, O, Z, FN, X, BP = {}, {}, {}, {}, {}, {}, {}, {}
local MAX_NUMEL, MAX_DIM = 16384, 1024
torch.manual_seed(APIFUZZ_SEED)
if torch.set_memory_limit then pcall(torch.set_memory_limit, 1 << 30) end
if APIFUZZ_GC == "stress" then collectgarbage("incremental", 1, 400)
elseif APIFUZZ_GC == "generational" then collectgarbage("generational") end
TMP = os.tmpname()
os.remove(TMP)
local files = {}
function PATH(name)   -- a file of this run: TMP_<name>
  files[name] = true
  return TMP .. "_" .. name
end
function APIFUZZ_CLEANUP()
  for name in pairs(files) do os.remove(TMP .. "_" .. name) end
end
if dbg then pcall(dbg.on_stop, function() end) end   -- stops do not wait for a prompt

-- Shape, dtype and grad state of a pool tensor, or nil (too big ones are dropped from the pool).
local function meta(v)
  if not torch.is_tensor(v) then return nil end
  local ok, m = pcall(function()
    local s = v.shape
    local shape, nonzero = {}, 1.0
    for i = 1, #s do
      shape[i] = s[i]
      if s[i] ~= 0 then nonzero = nonzero * s[i] end
    end
    return {shape = shape, numel = v:numel(), nonzero = nonzero, dtype = v.dtype, rg = v.requires_grad,
            leaf = v.is_leaf}
  end)
  return ok and m or nil
end

function APIFUZZ_ORACLE(n, what)   -- the fuzzer replaces it; a replay prints
  io.stderr:write("APIFUZZ_FINDING oracle call ", n, ": ", what, "\n")
end

-- Run call n (its source text), then refresh the metadata of the pool slots it assigned, of every
-- slot its text names, and of 5, 6, 7 (which breakpoint actions and dbg.run scripts assign). A pause or step still pending when
-- the chunk returns is cancelled on the same line (a new line would stop here, in the runtime).
local ALWAYS = {5, 6, 7}
function C(n, src, slots)
  local chunk, load_error = load(src, "=fuzz_call_" .. n)
  local ok, err
  if chunk then ok, err = pcall(chunk); if dbg then pcall(dbg.continue) end
  else ok, err = false, "APIFUZZ generated code does not compile: " .. load_error end
  local all = {}
  for _, slot in ipairs(slots or {}) do all[#all + 1] = slot end
  for _, slot in ipairs(ALWAYS) do all[#all + 1] = slot end
  for slot in src:gmatch("T%[(%d+)%]") do all[#all + 1] = tonumber(slot) end   -- any slot the text names
  for _, slot in ipairs(all) do
    local m = meta(T[slot])
    if m then
      local product = 1.0
      for _, d in ipairs(m.shape) do product = product * d end
      if product ~= m.numel then
        APIFUZZ_ORACLE(n, string.format("T[%d] has shape %s but numel %s", slot, table.concat(m.shape, "x"),
                                        tostring(m.numel)))
      end
      local too_big = m.nonzero > MAX_NUMEL or m.numel > MAX_NUMEL
      for _, d in ipairs(m.shape) do too_big = too_big or d > MAX_DIM or d < 0 end
      if too_big then
        T[slot], m = nil, nil
      end
    end
    TM[slot] = m
  end
  if APIFUZZ_RESULT then APIFUZZ_RESULT(n, ok, err) end
end
]==]

-- ============================================================================================
-- [SECTION] random choices

math.randomseed(opt.seed)
local rnd = math.random
local function chance(p) return rnd() < p end
local function pick(list) return list[rnd(#list)] end
local function fmt(...) return string.format(...) end

-- A weighted choice: list of {weight, value}.
local function wpick(list)
  local total = 0
  for _, e in ipairs(list) do total = total + e[1] end
  local r = rnd() * total
  for _, e in ipairs(list) do
    r = r - e[1]
    if r <= 0 then return e[2] end
  end
  return list[#list][2]
end

local function copy(t)
  local c = {}
  for k, v in pairs(t) do c[k] = v end
  return c
end

local function join(list, sep) return table.concat(list, sep or ", ") end

-- ============================================================================================
-- [SECTION] shapes, values, wrong arguments

local NT, NM, NO, NZ, NF = 24, 6, 4, 6, 6
local DTYPES = {"float32", "float32", "float32", "float32", "float64", "float64", "int64"}

local function shape_lit(shape)
  local parts = {}
  for i, d in ipairs(shape) do parts[i] = tostring(d) end
  return "{" .. join(parts) .. "}"
end

local function numel(shape)
  local n = 1
  for _, d in ipairs(shape) do n = n * d end
  return n
end

-- A small shape of rank 0..6, sometimes with a 0-size dim; at most 4096 elements.
local function rand_shape(rank)
  rank = rank or pick({0, 1, 1, 2, 2, 2, 2, 3, 3, 3, 4, 4, 5, 6})
  local shape = {}
  for i = 1, rank do shape[i] = chance(0.06) and 0 or pick({1, 1, 2, 2, 3, 3, 4, 5}) end
  while numel(shape) > 4096 do
    local biggest = 1
    for i = 2, #shape do if shape[i] > shape[biggest] then biggest = i end end
    shape[biggest] = shape[biggest] // 2
  end
  return shape
end

local function has_zero(shape)
  for _, d in ipairs(shape) do if d == 0 then return true end end
  return false
end

-- Values a size, dim, start or count argument may wrongly take. huge: 2^31 and up.
local BAD_INTS = {
  {"-1", -1}, {"-2", -2}, {"0", 0}, {"-3", -3}, {"1.5", nil}, {"0/0", nil}, {"1/0", nil}, {"-1/0", nil},
  {"'3'", 3}, {"'x'", nil}, {"{}", nil}, {"true", nil}, {"nil", nil},
}
local HUGE_INTS = {
  {"2^31", 2^31}, {"2^32", 2^32}, {"2^40", 2^40}, {"2^62", 2^62}, {"math.maxinteger", math.maxinteger},
  {"math.mininteger", math.mininteger}, {"2^63", nil}, {"-2^31", -2^31}, {"-2^32", -2^32}, {"2^31 - 1", 2^31 - 1},
  {"2^53", 2^53},
}

local function bad_int(no_huge)
  if not avoid.huge_sizes and not no_huge and chance(0.5) then return table.unpack(pick(HUGE_INTS)) end
  return table.unpack(pick(BAD_INTS))
end

-- Make a list of size arguments {src, value} safe to pass: when every size is a positive integer
-- and their product is between 2^20 and 2^40 elements (an allocation that would really happen,
-- up to terabytes), one size becomes 2^40 so the request is refused instead.
local function safe_dims(dims)
  local product, all_valid = 1.0, true
  for _, d in ipairs(dims) do
    local v = d[2]
    if v == nil or v ~= math.floor(v) or v < 0 then all_valid = false
    else product = product * v end
  end
  if all_valid and product > 2^20 and product < 2^44 then
    local i = rnd(#dims)
    dims[i] = {"2^44", 2^44}
  end
  if avoid.empty_huge and all_valid and product == 0 then
    for i, d in ipairs(dims) do if d[2] > 2^20 then dims[i] = {"3", 3} end end
  end
  return dims
end

-- Sizes as source text (d1, d2, ... or {d1, d2}), mostly valid, sometimes one bad.
local function size_args(shape, bad_chance, no_huge)
  local dims = {}
  for i, d in ipairs(shape) do dims[i] = {tostring(d), d} end
  if chance(bad_chance or 0.15) then
    local src, v = bad_int(no_huge)
    if #dims == 0 or chance(0.3) then dims[#dims + 1] = {src, v} else dims[rnd(#dims)] = {src, v} end
    if v and v >= 2^31 and v < 2^40 and chance(0.5) then   -- two big ones: products that wrap
      local src2, v2 = table.unpack(pick({{"2^31", 2^31}, {"2^32", 2^32}, {"2^33", 2^33}}))
      dims[#dims + 1] = {src2, v2}
    end
    dims = safe_dims(dims)
  end
  local parts = {}
  for i, d in ipairs(dims) do parts[i] = d[1] end
  return parts
end

-- A value in the wrong place: wrong types, nil, missing, tables where numbers go, huge numbers.
local WRONG = {
  "nil", "'x'", "''", "{}", "{1, 2}", "{{1}, {2, 3}}", "true", "false", "1.5", "-1", "0", "7",
  "math.maxinteger", "math.mininteger", "2^31", "2^32", "2^63", "-2^63", "0/0", "1/0", "-1/0",
  "function() end", "torch.zeros(2)", "torch.ones(3, 1)", "torch.tensor(1.5)", "M[1]", "Z[1]", "FN[1]",
  "print", "'float64'", "'int64'", "io.stdout", "coroutine.create(function() end)", "T[1]", "T[2]",
  "torch.zeros(0)", "torch.ones({}, {dtype = 'int64'})", "string.rep('a', 300)", "{dtype = 'float64'}",
  "{requires_grad = true}", "{min = 0}", "setmetatable({}, {__index = function() error('fuzz_user_error') end})",
}
-- Numbers among them that a --avoid class keeps away from the call being made (set by targ() for
-- int64 tensors under int_cast/int_overflow, and by the generators of reshape, narrow and conv2d).
local HUGE_WRONG = {["math.maxinteger"] = true, ["math.mininteger"] = true, ["2^31"] = true, ["2^32"] = true,
                    ["2^63"] = true, ["-2^63"] = true, ["0/0"] = true, ["1/0"] = true, ["-1/0"] = true}
local no_huge_wrong = false
local function wrong()
  local w = pick(WRONG)
  while no_huge_wrong and HUGE_WRONG[w] do w = pick(WRONG) end
  if avoid.softmax_empty and (w == "torch.zeros(0)" or w:find("^T%[")) then w = "torch.zeros(2)" end   -- pool tensors may be empty
  if (avoid.int_cast or avoid.int_overflow) and w:find("int64") then w = "torch.tensor(1.5)" end
  return w
end

-- Tensor element values, nasty ones included.
local SPECIALS = {"0/0", "1/0", "-1/0", "1e38", "-1e38", "3e38", "1e-45", "1e308", "-0.0", "0", "1", "-2", "0.5",
                  "1e-30", "2^63", "-2^63", "2^53 + 1", "65504", "-7"}

local function value_lit()
  if chance(0.3) then return pick(SPECIALS) end
  return fmt("%.3g", (rnd() - 0.5) * 8)
end

-- A number next to a tensor of meta m (int_cast: only values int64 holds next to int64 tensors).
local function value_for(m)
  if (avoid.int_cast or avoid.int_overflow) and m and m.dtype == "int64" then return tostring(rnd(-3, 5)) end
  return value_lit()
end

local function nested_lit(shape, depth, int_values)
  depth = depth or 1
  if depth > #shape then return int_values and tostring(rnd(-3, 5)) or value_lit() end
  local parts = {}
  for i = 1, shape[depth] do parts[i] = nested_lit(shape, depth + 1, int_values) end
  return "{" .. join(parts) .. "}"
end

local function dtype_opts(dtype, rg)
  local o = {}
  if dtype ~= "float32" or chance(0.1) then o[#o + 1] = fmt("dtype = %q", dtype) end
  if rg and dtype ~= "int64" then o[#o + 1] = "requires_grad = true" end
  if #o == 0 then return "" end
  return ", {" .. join(o) .. "}"
end

-- Source of a new tensor of this shape and dtype that should be created without error.
local function fresh(shape, dtype, rg, nasty)
  dtype = dtype or "float32"
  local o = dtype_opts(dtype, rg)
  local sh = shape_lit(shape)
  if dtype == "int64" then
    local r = rnd(4)
    if r == 1 then return "torch.ones(" .. sh .. o .. ")" end
    if r == 2 then return "torch.zeros(" .. sh .. o .. ")" end
    if r == 3 and numel(shape) <= 32 and #shape > 0 then return "torch.tensor(" .. nested_lit(shape, 1, true) .. o .. ")" end
    return fmt("torch.full(%s, %d%s)", sh, rnd(-3, 5), o)
  end
  local r = rnd(12)
  if nasty or r == 12 then
    if numel(shape) <= 32 and #shape > 0 and chance(0.6) then return "torch.tensor(" .. nested_lit(shape) .. o .. ")" end
    return fmt("torch.full(%s, %s%s)", sh, pick(SPECIALS), o)
  end
  if r <= 5 then return "torch.randn(" .. sh .. o .. ")" end
  if r <= 8 then return "torch.rand(" .. sh .. o .. ")" end
  if r == 9 then return "torch.ones(" .. sh .. o .. ")" end
  if r == 10 then return "torch.zeros(" .. sh .. o .. ")" end
  return fmt("torch.full(%s, %s%s)", sh, value_lit(), o)
end

local function rand_dtype() return pick(DTYPES) end
local function is_float(m) return m.dtype ~= "int64" end

-- ============================================================================================
-- [SECTION] the pool as the generator sees it (TM: the runtime's metadata; MI, ZI, FI, OI: ours)

local MI, ZI, FI, OI = {}, {}, {}, {}

local function live(pred)
  local out = {}
  for i = 1, NT do
    local m = TM[i]
    if m and (not pred or pred(m)) then out[#out + 1] = i end
  end
  return out
end

local function live_in(info, n)
  local out = {}
  for i = 1, n do if info[i] then out[#out + 1] = i end end
  return out
end

local function slot() return rnd(NT) end

-- A tensor argument: a pool tensor matching pred (usually), or a new one from make() (or random).
-- Returns its source and its meta {shape, dtype, rg}.
local function targ(pred, make, pool_chance)
  local int_avoid = avoid.int_cast or avoid.int_overflow
  if chance(pool_chance or 0.75) then
    local s = live(pred)
    if #s > 0 then
      local i = pick(s)
      if int_avoid and TM[i].dtype == "int64" then no_huge_wrong = true end
      return "T[" .. i .. "]", TM[i]
    end
  end
  local shape, dtype, rg
  if make then shape, dtype, rg = make() end
  shape = shape or rand_shape()
  dtype = dtype or rand_dtype()
  if rg == nil then rg = dtype ~= "int64" and chance(0.4) end
  if int_avoid and dtype == "int64" then no_huge_wrong = true end
  return fresh(shape, dtype, rg), {shape = shape, dtype = dtype, rg = rg}
end

local function any_float(m) return m.dtype ~= "int64" end

-- A dim argument for a tensor of rank n: valid (1-based or negative) mostly, else bad.
local function dim_arg(n, allow_extra)
  if chance(0.1) then return (bad_int()) end
  local top = n + (allow_extra and 1 or 0)
  if top == 0 then return pick({"1", "-1", "0"}) end
  if chance(0.25) then return tostring(-rnd(top)) end
  return tostring(rnd(top))
end

-- Arguments after the receiver, with a chance of one wrong, one missing or one extra.
local function mutate(args, p)
  args = copy(args)
  if #args > 0 and chance(p or 0.1) then args[rnd(#args)] = wrong() end
  if #args > 0 and chance(0.03) then table.remove(args) end
  if chance(0.03) then args[#args + 1] = wrong() end
  return args
end

-- x:op(args), torch.op(x, args) or F.op(x, args); the receiver of the function forms may be wrong.
local F_NAMES = {relu = true, tanh = true, sigmoid = true, softmax = true, log_softmax = true, linear = true,
                 conv2d = true, max_pool2d = true, flatten = true, mse_loss = true, cross_entropy = true,
                 nll_loss = true, multi_margin_loss = true}
local METHOD_ONLY = {add_ = true, sub_ = true, mul_ = true, masked_fill_ = true, zero_ = true, fill_ = true,
                     copy_ = true, size = true, dim = true, numel = true, item = true, totable = true,
                     retain_grad = true, requires_grad_ = true, to = true, float = true, double = true,
                     long = true}

local function render(op, x, args)
  local a = join(args)
  local form = rnd(10)
  if METHOD_ONLY[op] or form <= 5 then return x .. ":" .. op .. "(" .. a .. ")" end
  if chance(0.05) then x = wrong() end
  local prefix = (F_NAMES[op] and form >= 9) and "F." or "torch."
  if a == "" then return prefix .. op .. "(" .. x .. ")" end
  return prefix .. op .. "(" .. x .. ", " .. a .. ")"
end

-- A call: source text, acceptable function names for its errors, the T slots it assigns.
local function call(kind, src, names, slots)
  return {kind = kind, src = src, names = names, slots = slots or {}}
end

local function store(op, expr, names, extra_slots)
  local k = slot()
  local slots = {k}
  for _, s in ipairs(extra_slots or {}) do slots[#slots + 1] = s end
  return call(op, "T[" .. k .. "] = " .. expr, names or {op}, slots)
end

-- ============================================================================================
-- [SECTION] creation

local gens = {}   -- name -> function() returning a call
local weights = {}
local function gen(name, weight, fn)
  gens[name] = fn
  weights[#weights + 1] = {weight, name}
end

local function creation_opts(default_dtype)
  local r = rnd(20)
  if r == 1 then return "{dtype = 'float16'}" end
  if r == 2 then return "{requires_grad = true, dtype = 'int64'}" end
  if r == 3 then return "{bogus = 1}" end
  if r == 4 then return wrong() end
  if r == 5 then return "{dtype = 5}" end
  local dtype = default_dtype or rand_dtype()
  local o = dtype_opts(dtype, dtype ~= "int64" and chance(0.3))
  return o:sub(3)   -- without ", "
end

gen("create", 10, function()
  local op = pick({"zeros", "ones", "rand", "randn"})
  local shape = rand_shape()
  local sizes = size_args(shape)
  local o = creation_opts()
  local args
  if chance(0.5) then
    args = "{" .. join(sizes) .. "}"
  else
    args = join(sizes)
  end
  if o ~= "" then args = (args == "" and "" or args .. ", ") .. o end
  return store(op, "torch." .. op .. "(" .. args .. ")")
end)

gen("tensor", 5, function()
  local r = rnd(8)
  local src
  if r == 1 then src = "torch.tensor(" .. value_lit() .. ")"
  elseif r == 2 then src = "torch.tensor({{1, 2}, {3}})"
  elseif r == 3 then src = "torch.tensor({1, 'two'})"
  elseif r == 4 then src = "torch.tensor(" .. (targ()) .. (chance(0.5) and ", {dtype = 'float64'}" or "") .. ")"
  elseif r == 5 then src = "torch.tensor(" .. wrong() .. ")"
  elseif r == 6 then src = "torch.tensor({})"
  elseif r == 7 then src = "torch.tensor({{{{{{{{1}}}}}}}})"
  else
    local shape = rand_shape(rnd(1, 3))
    if numel(shape) > 40 then shape = {2, 3} end
    local dtype = rand_dtype()
    if dtype == "int64" and (avoid.int_cast or chance(0.7)) then
      src = "torch.tensor(" .. nested_lit(shape, 1, true) .. dtype_opts(dtype) .. ")"
    else
      src = "torch.tensor(" .. nested_lit(shape) .. dtype_opts(dtype, chance(0.3)) .. ")"
    end
  end
  return store("tensor", src)
end)

gen("full", 3, function()
  local shape = rand_shape()
  local sizes = size_args(shape)
  local value = chance(0.9) and value_lit() or wrong()
  local dtype = rand_dtype()
  if dtype == "int64" and (avoid.int_cast or avoid.int_overflow) then value = tostring(rnd(-3, 3)) end
  local first = (chance(0.9) or #sizes == 0) and ("{" .. join(sizes) .. "}") or join(sizes)
  return store("full", fmt("torch.full(%s, %s%s)", first, value, dtype_opts(dtype, chance(0.2))))
end)

gen("eye", 2, function()
  local dims = {{tostring(rnd(0, 5)), 0}}
  dims[1][2] = tonumber(dims[1][1])
  if chance(0.5) then dims[2] = {tostring(rnd(0, 5)), 0}; dims[2][2] = tonumber(dims[2][1]) end
  if chance(0.2) then
    local s, v = bad_int()
    dims[rnd(#dims)] = {s, v}
    if v and v >= 2^31 and v < 2^40 and #dims == 1 then dims[2] = {"2^31", 2^31} end
    dims = safe_dims(dims)
  end
  local args = {}
  for i, d in ipairs(dims) do args[i] = d[1] end
  local o = creation_opts()
  if o ~= "" then args[#args + 1] = o end
  return store("eye", "torch.eye(" .. join(args) .. ")")
end)

gen("arange", 2, function()
  local n = {tostring(rnd(0, 12)), 0}
  n[2] = tonumber(n[1])
  if chance(0.2) then n = safe_dims({{bad_int()}})[1] end
  local o = chance(0.5) and creation_opts("int64") or ""
  return store("arange", "torch.arange(" .. n[1] .. (o ~= "" and ", " .. o or "") .. ")")
end)

gen("manual_seed", 1, function()
  local s = chance(0.8) and tostring(rnd(0, 1000)) or wrong()
  return call("manual_seed", "torch.manual_seed(" .. s .. ")", {"manual_seed"})
end)

-- ============================================================================================
-- [SECTION] elementwise ops and operators

-- Every one-tensor op Lua registers from the op table (a new one is fuzzed without an edit here).
local UNARY = {"detach"}
for _, op in ipairs(torch.ops()) do
  if op.from_table then UNARY[#UNARY + 1] = op.name end
end

gen("unary", 12, function()
  local op = pick(UNARY)
  local x = targ()
  return store(op, render(op, x, mutate({}, 0)))
end)

-- A second operand for x: same shape, broadcastable, a scalar, or anything.
local function broadcast_partner(m)
  local r = rnd(10)
  if r <= 4 then return targ(function(o) return numel(o.shape) == numel(m.shape) and #o.shape == #m.shape end,
                             function() return copy(m.shape), chance(0.85) and m.dtype or rand_dtype() end) end
  if r <= 6 then
    local shape = {}
    local drop = rnd(0, #m.shape)
    for i = drop + 1, #m.shape do shape[#shape + 1] = chance(0.3) and 1 or m.shape[i] end
    return fresh(shape, chance(0.85) and m.dtype or rand_dtype(), chance(0.3)), nil
  end
  if r <= 8 then return value_for(m), nil end
  if (avoid.int_cast or avoid.int_overflow) and m.dtype == "int64" then return fresh(copy(m.shape), "int64"), nil end
  return targ()
end

-- Issue 12's functions: of a tensor and a tensor (or number), where, clamp with tensor bounds,
-- the F activations, tril/triu, and the creations and sampling (small sizes: arguments past
-- what fits are errors, and the memory limit is not what is fuzzed here).
local PAIRWISE = {"maximum", "minimum", "ne", "clamp_min", "clamp_max"}
gen("pairwise", 6, function()
  local op = pick(PAIRWISE)
  local x, m = targ()
  return store(op, render(op, x, mutate({(broadcast_partner(m))})))
end)

gen("clamp_tensor", 2, function()
  local x, m = targ()
  local lo, hi = broadcast_partner(m), broadcast_partner(m)
  local args = chance(0.5) and {lo, hi} or {"{min = " .. lo .. ", max = " .. hi .. "}"}
  return store("clamp", render("clamp", x, mutate(args)))
end)

gen("where", 3, function()
  local x, m = targ()
  local c, y = broadcast_partner(m), broadcast_partner(m)
  if chance(0.5) then return store("where", "torch.where(" .. join(mutate({c, x, y})) .. ")") end
  return store("where", x .. ":where(" .. join(mutate({c, y})) .. ")")
end)

local ACTIVATION_ARGS = {
  leaky_relu = function() return chance(0.5) and {value_lit()} or {"{negative_slope = " .. value_lit() .. "}"} end,
  elu = function() return chance(0.5) and {value_lit()} or {"{alpha = " .. value_lit() .. "}"} end,
  gelu = function()
    return chance(0.3) and {} or {pick({"{approximate = 'tanh'}", "{approximate = 'none'}", "'tanh'", "{approximate = 'x'}"})}
  end,
  silu = function() return {} end,
  softplus = function()
    return chance(0.5) and {value_lit(), value_lit()} or {"{beta = " .. value_lit() .. ", threshold = " .. value_lit() .. "}"}
  end,
}
gen("activation", 6, function()
  local op = pick({"leaky_relu", "elu", "gelu", "silu", "softplus"})
  local x = targ()
  if chance(0.05) then x = wrong() end
  local args = mutate(ACTIVATION_ARGS[op]())
  table.insert(args, 1, x)
  return store(op, "F." .. op .. "(" .. join(args) .. ")")
end)

gen("triangle", 3, function()
  local op = pick({"tril", "triu"})
  local x = targ()
  local args = chance(0.3) and {} or {chance(0.8) and tostring(rnd(-4, 4)) or (bad_int())}
  return store(op, render(op, x, mutate(args)))
end)

local function small_number()
  if chance(0.1) then return value_lit() end   -- nasty ones: NaN, infinities, 1e308 (errors)
  return fmt("%.3g", (rnd() - 0.5) * 20)
end

gen("creation_like", 5, function()
  local r = rnd(8)
  local o = chance(0.4) and creation_opts() or nil
  local function args_with_opts(args)
    args = mutate(args)
    if o and o ~= "" then args[#args + 1] = o end
    return join(args)
  end
  if r == 1 then
    local args = {small_number(), small_number()}
    if chance(0.6) then args[3] = small_number() end
    return store("arange", "torch.arange(" .. args_with_opts(args) .. ")")
  elseif r == 2 then
    return store("linspace", "torch.linspace(" .. args_with_opts({small_number(), small_number(), tostring(rnd(-1, 9))}) .. ")")
  elseif r == 3 then
    return store("randperm", "torch.randperm(" .. args_with_opts({tostring(rnd(-1, 12))}) .. ")")
  elseif r == 4 then
    local args = {shape_lit(rand_shape())}
    table.insert(args, 1, tostring(rnd(-3, 6)))
    if chance(0.6) then table.insert(args, 1, tostring(rnd(-5, 2))) end
    return store("randint", "torch.randint(" .. args_with_opts(args) .. ")")
  elseif r == 5 then
    return store("empty", "torch.empty(" .. args_with_opts({shape_lit(rand_shape())}) .. ")")
  elseif r == 6 then
    local x = targ()
    return store("full_like", "torch.full_like(" .. args_with_opts({x, value_lit()}) .. ")")
  else
    local op = pick({"zeros_like", "ones_like", "rand_like", "randn_like"})
    local x = targ()
    return store(op, "torch." .. op .. "(" .. args_with_opts({x}) .. ")")
  end
end)

gen("multinomial", 2, function()
  local x = targ()
  local args = {tostring(rnd(-1, 6))}
  local r = rnd(3)
  if r == 1 then args[2] = "true" elseif r == 2 then args[2] = "{replacement = " .. pick({"true", "false", "1"}) .. "}" end
  return store("multinomial", render("multinomial", x, mutate(args)))
end)

local ARITH = {{"add", "+"}, {"sub", "-"}, {"mul", "*"}, {"div", "/"}, {"pow", "^"}}

gen("binary", 16, function()
  local e = pick(ARITH)
  local op, sym = e[1], e[2]
  local x, m = targ()
  local y = broadcast_partner(m)
  local r = rnd(10)
  if r <= 4 then
    if chance(0.15) then return store(op, y .. " " .. sym .. " " .. x, {op}) end   -- number on the left
    if chance(0.05) then y = wrong() end
    return store(op, "(" .. x .. ") " .. sym .. " (" .. y .. ")", {op})
  end
  return store(op, render(op, x, mutate({y})))
end)

gen("neg_operator", 2, function()
  return store("neg", "-" .. (targ()), {"neg"})
end)

gen("compare", 5, function()
  local op = pick({"eq", "lt", "le", "gt", "ge"})
  local x, m = targ()
  local y = broadcast_partner(m)
  return store(op, render(op, x, mutate({y})))
end)

-- a < b on one-element tensors (a boolean; guards when freezing)
gen("compare_scalar", 3, function()
  local sym = pick({"<", "<=", ">", ">="})
  local x = targ(function(m) return m.numel == 1 end, function() return {}, "float32" end)
  local y = chance(0.5) and value_lit() or (targ())
  if chance(0.1) then y = wrong() end
  local src = fmt("X.b = (%s) %s (%s)", x, sym, y)
  if chance(0.3) then src = fmt("X.b = (%s) %s (%s)", y, sym, x) end
  return call("compare_scalar", src, {"compare", "lt", "le", "gt", "ge"})
end)

gen("masked_fill", 6, function()
  local x, m = targ()
  local mask_pred = nil
  if (avoid.int_cast or avoid.int_overflow) and m.dtype == "int64" then   -- a NaN in a float mask is cast to int64
    mask_pred = function(o) return o.dtype == "int64" end
  end
  local mask = chance(0.5) and (x .. ":gt(0)") or
                 (targ(mask_pred, function() return copy(m.shape), (mask_pred or chance(0.5)) and "int64" or "float32", false end))
  local v = chance(0.9) and value_for(m) or wrong()
  local r = rnd(3)
  -- x:gt(0), the mask, can fail on its own (a stale view): then it names gt
  if r == 1 then return store("masked_fill", render("masked_fill", x, mutate({mask, v})), {"masked_fill", "gt"}) end
  if r == 2 then return call("masked_fill_", x .. ":masked_fill_(" .. join(mutate({mask, v})) .. ")", {"masked_fill_", "gt"}) end
  -- x[mask] = v: the error should name masked_fill (what the assignment is) or index
  return call("x[mask]=v", fmt("%s[%s] = %s", x, mask, v), {"masked_fill", "masked_fill_", "index", "x[mask] = value", "gt"})
end)

gen("clamp", 4, function()
  local x, m = targ()
  local r = rnd(6)
  local args
  if r == 1 then args = {"{min = " .. value_for(m) .. "}"}
  elseif r == 2 then args = {"{max = " .. value_for(m) .. ", min = " .. value_for(m) .. "}"}
  elseif r == 3 then args = {value_for(m), value_for(m)}
  elseif r == 4 then args = {"nil", value_for(m)}
  elseif r == 5 then args = {"{bogus = 1}"}
  else args = {} end
  return store("clamp", render("clamp", x, mutate(args)))
end)

-- ============================================================================================
-- [SECTION] matrix products, convolution, pooling

gen("mm", 8, function()
  local op = pick({"mm", "mm", "bmm", "matmul", "matmul", "linear"})
  local rank = op == "bmm" and 3 or (op == "mm" and 2 or rnd(1, 3))
  local x, m = targ(function(o) return #o.shape == rank end, function() return rand_shape(rank) end)
  local k = m.shape[#m.shape] or 1
  local y
  if op == "linear" then
    y = targ(function(o) return #o.shape == 2 and o.shape[2] == k end,
             function() return {rnd(1, 4), chance(0.8) and k or rnd(0, 4)}, chance(0.9) and m.dtype or rand_dtype() end)
    local args = {y}
    if chance(0.6) then args[2] = chance(0.8) and fresh({rnd(1, 4)}, m.dtype, chance(0.5)) or "nil" end
    return store(op, render(op, x, mutate(args)))
  end
  local yrank = op == "bmm" and 3 or (op == "mm" and 2 or rnd(1, 3))
  y = targ(function(o) return #o.shape == yrank and (o.shape[1] == k or o.shape[#o.shape - 1] == k) end, function()
    local shape = rand_shape(yrank)
    if yrank >= 2 then shape[#shape - 1] = chance(0.85) and k or rnd(0, 4) end
    if yrank == 1 then shape[1] = k end
    if op == "bmm" and chance(0.8) then shape[1] = m.shape[1] end
    return shape, chance(0.9) and m.dtype or rand_dtype()
  end)
  return store(op, render(op, x, mutate({y})))
end)

local function window_int()
  if chance(0.85) then return tostring(rnd(0, 3)) end
  if avoid.conv_padding_huge then return pick({"-1", "1.5", "'x'", "{}"}) end
  -- big enough to be refused as a size (>= 2^40 elements), or out of int range
  return pick({"-1", "2^20", "2^24", "2^30", "2^31 - 1", "2^31", "math.maxinteger", "1.5", "'x'", "{}"})
end

-- A window size as PyTorch takes it: a number (mostly small), or a list {h, w}.
local function window_size()
  if chance(0.7) then return window_int() end
  return fmt("{%s, %s}", window_int(), window_int())
end

-- A dilation: 1 mostly, sometimes 2 or 3, a pair, or something wrong or huge.
local function window_dilation()
  local r = rnd(10)
  if r <= 5 then return "1" end
  if r <= 8 then return tostring(rnd(2, 3)) end
  if r == 9 then return fmt("{%d, %d}", rnd(1, 3), rnd(1, 3)) end
  if avoid.conv_padding_huge then return pick({"0", "-1", "1.5", "{1}"}) end
  return pick({"0", "-1", "2^31 - 1", "2^31", "1.5", "{1}", "{1, 2, 3}"})
end

gen("conv2d", 5, function()
  if avoid.conv_padding_huge then no_huge_wrong = true end
  local x, m = targ(function(o) return #o.shape == 4 or #o.shape == 3 end, function()
    if chance(0.2) then return {rnd(1, 4), rnd(1, 6), rnd(1, 6)}, chance(0.9) and "float32" or rand_dtype() end
    return {rnd(1, 2), rnd(1, 4), rnd(1, 6), rnd(1, 6)}, chance(0.9) and "float32" or rand_dtype() end)
  local c = m.shape[#m.shape - 2] or 1
  local groups = 1
  if chance(0.3) then groups = pick({c, c, 2, 3}) end
  local cg = (groups >= 1 and c % groups == 0) and c // groups or rnd(0, 3)
  local k = rnd(1, 3)
  local w = targ(function(o) return #o.shape == 4 and o.shape[2] == cg and o.shape[1] % groups == 0 end,
                 function() return {groups * rnd(1, 2), chance(0.9) and cg or rnd(0, 3), k, chance(0.8) and k or rnd(0, 3)},
                          chance(0.9) and m.dtype or rand_dtype() end, 0.3)
  local args = {w}
  local r = rnd(5)
  if r == 1 then args[2] = "nil"
  elseif r == 2 then args[2] = fresh({rnd(1, 3)}, m.dtype, chance(0.5)) end
  local padding = chance(0.15) and pick({"'same'", "'valid'", "'full'"}) or window_size()
  local group_src = groups == 1 and pick({"1", "1", "0", "-1", "2"}) or tostring(groups)
  if chance(0.5) then
    local fields = {fmt("stride = %s", window_size()), fmt("padding = %s", padding)}
    if chance(0.4) then fields[#fields + 1] = fmt("dilation = %s", window_dilation()) end
    if groups ~= 1 or chance(0.2) then fields[#fields + 1] = fmt("groups = %s", group_src) end
    if chance(0.05) then fields[#fields + 1] = "dilations = 2" end
    args[#args + 1] = "{" .. table.concat(fields, ", ") .. "}"
  elseif chance(0.5) then
    if #args == 1 then args[2] = "nil" end
    args[3], args[4] = window_size(), padding
    if chance(0.4) or groups ~= 1 then args[5] = window_dilation() end
    if groups ~= 1 then args[6] = group_src end
  end
  return store("conv2d", render("conv2d", x, mutate(args)))
end)

gen("max_pool2d", 3, function()
  local x = targ(function(o) return #o.shape == 4 or #o.shape == 3 end,
                 function() return {rnd(1, 2), rnd(1, 3), rnd(1, 6), rnd(1, 6)} end)
  local args = {window_size()}
  local r = rnd(4)
  if r == 1 then
    args[2] = window_size()
  elseif r == 2 then   -- PyTorch's positional order
    args[2], args[3], args[4] = window_size(), window_int(), window_dilation()
    if chance(0.5) then args[5], args[6] = pick({"true", "false", "1"}), pick({"true", "false"}) end
  elseif r == 3 then
    local fields = {}
    if chance(0.6) then fields[#fields + 1] = fmt("stride = %s", window_size()) end
    if chance(0.6) then fields[#fields + 1] = fmt("padding = %s", window_size()) end
    if chance(0.4) then fields[#fields + 1] = fmt("dilation = %s", window_dilation()) end
    if chance(0.4) then fields[#fields + 1] = fmt("ceil_mode = %s", pick({"true", "false", "1"})) end
    if chance(0.4) then fields[#fields + 1] = fmt("return_indices = %s", pick({"true", "false"})) end
    if chance(0.05) then fields[#fields + 1] = "padding_mode = 'zeros'" end
    args[2] = "{" .. table.concat(fields, ", ") .. "}"
  end
  return store("max_pool2d", render("max_pool2d", x, mutate(args)))
end)

-- ============================================================================================
-- [SECTION] shape ops

gen("shape_op", 14, function()
  local op = pick({"t", "transpose", "reshape", "view", "flatten", "unsqueeze", "squeeze", "expand", "narrow", "cat"})
  if op == "t" and chance(0.3) then op = pick({"permute", "select", "contiguous"}) end
  local x, m = targ()
  local n = #m.shape
  if avoid.empty_huge and has_zero(m.shape) then no_huge_wrong = true end
  if op == "t" then return store("t", render("t", x, mutate({}, 0))) end
  if op == "permute" then
    local dims = {}
    for i = 1, n do dims[i] = tostring(i) end
    for i = n, 2, -1 do local j = rnd(i); dims[i], dims[j] = dims[j], dims[i] end
    return store(op, render(op, x, mutate(dims)))
  end
  if op == "select" then return store(op, render(op, x, mutate({dim_arg(n), tostring(rnd(-2, 3))}))) end
  if op == "contiguous" then return store(op, render(op, x, mutate({}, 0)), {"contiguous", "transpose"}) end
  if op == "transpose" then return store(op, render(op, x, mutate({dim_arg(n), dim_arg(n)}))) end
  if op == "flatten" then
    local args = {}
    if chance(0.7) then args[1] = dim_arg(n) end
    if #args == 1 and chance(0.6) then args[2] = dim_arg(n) end
    return store(op, render(op, x, mutate(args)))
  end
  if op == "unsqueeze" then return store(op, render(op, x, mutate({dim_arg(n, true)}))) end
  if op == "squeeze" then return store(op, render(op, x, mutate(chance(0.5) and {dim_arg(n)} or {}))) end
  if op == "reshape" or op == "view" then
    local shape = copy(m.shape)
    local r = rnd(6)
    if r == 1 then shape = {numel(m.shape)}
    elseif r == 2 and #shape > 0 then shape[rnd(#shape)] = -1
    elseif r == 3 then shape = {-1}
    elseif r == 4 then shape = rand_shape()
    elseif r == 5 then shape = {1, numel(m.shape)} end
    if avoid.reshape_overflow then no_huge_wrong = true end
    local sizes = size_args(shape, 0.15, avoid.reshape_overflow)
    local args = chance(0.5) and {"{" .. join(sizes) .. "}"} or sizes
    return store(op, render(op, x, mutate(args)), op == "view" and {"view", "reshape"} or {op})
  end
  if op == "expand" then
    local shape = copy(m.shape)
    for i = 1, #shape do if shape[i] == 1 and chance(0.5) then shape[i] = rnd(1, 4) end end
    if chance(0.3) then table.insert(shape, 1, rnd(1, 3)) end
    if chance(0.2) and #shape > 0 then shape[rnd(#shape)] = -1 end
    local sizes
    if chance(0.15) and not avoid.expand_negative then
      sizes = {}
      for i, d in ipairs(shape) do sizes[i] = tostring(d) end
      sizes[math.max(1, rnd(#sizes))] = pick({"-2", "-5", "-2^31"})
    else
      sizes = size_args(shape, 0.1)
    end
    return store(op, render(op, x, mutate(sizes)))
  end
  if op == "narrow" then
    local d = n > 0 and rnd(n) or 1
    local size = m.shape[d] or 1
    local start, len = tostring(rnd(1, math.max(1, size))), tostring(rnd(0, size))
    if chance(0.2) then
      local bad = {"0", "-1", tostring(size + 1), tostring(size + 2), "1.5"}
      if not avoid.narrow_huge then
        for _, v in ipairs({"math.maxinteger", "math.mininteger", "2^31", "2^32", "-2^31", "2^62"}) do bad[#bad + 1] = v end
      end
      if chance(0.5) then start = pick(bad) else len = pick(bad) end
    end
    local dim = chance(0.9) and tostring(d) or dim_arg(n)
    if avoid.narrow_huge then no_huge_wrong = true end
    return store(op, render(op, x, mutate({dim, start, len})))
  end
  -- cat
  local parts = {x}
  for i = 2, rnd(1, 4) do
    parts[i] = targ(function(o) return #o.shape == n end, function()
      local s = copy(m.shape)
      if #s > 0 then s[1] = rnd(0, 3) end
      return s, chance(0.9) and m.dtype or rand_dtype()
    end)
  end
  local first = "{" .. join(parts) .. "}"
  if chance(0.05) then first = pick({"{}", "{1, 2}", (x)}) end
  local args = {first}
  if chance(0.6) then args[2] = dim_arg(math.max(n, 1)) end
  return store("cat", "torch.cat(" .. join(mutate(args, 0.05)) .. ")")
end)

-- ============================================================================================
-- [SECTION] reductions, softmax, gather, losses

gen("reduce", 10, function()
  local op = pick({"sum", "mean", "max", "prod", "min", "amax", "amin", "argmax", "argmin", "var", "std", "norm",
                   "logsumexp", "cumsum", "sort", "topk", "flip", "unbind", "chunk", "split", "roll"})
  local x, m = targ()
  local n = #m.shape
  local args = {}
  if op == "topk" or op == "chunk" or op == "split" or op == "roll" or op == "norm" then args[1] = pick({"1", "2", "0", "-1", "3"}) end
  if chance(0.7) then args[#args + 1] = pick({dim_arg(n), "{" .. dim_arg(n) .. ", " .. dim_arg(n) .. "}"}) end
  if #args >= 1 and chance(0.4) then args[#args + 1] = pick({"true", "false", "1", "'x'", "{keepdim = true}", "{bogus = 1}"}) end
  args = mutate(args)
  local src = render(op, x, args)
  if (op == "max" or op == "min" or op == "sort" or op == "topk") and #args >= 1 and chance(0.7) then
    local k, k2 = slot(), slot()
    return call(op, fmt("T[%d], T[%d] = %s", k, k2, src), {op}, {k, k2})
  end
  if op == "split" or op == "chunk" or op == "unbind" then src = "(" .. src .. ")[1] or torch.zeros(1)" end   -- a table of views
  return store(op, src)
end)

gen("softmax", 5, function()
  local op = pick({"softmax", "log_softmax"})
  local pred = avoid.softmax_empty and function(o) return not has_zero(o.shape) end or nil
  local x, m = targ(pred, function()
    local s = rand_shape()
    while avoid.softmax_empty and has_zero(s) do s = rand_shape() end
    return s
  end)
  local args = mutate({dim_arg(#m.shape)})
  return store(op, render(op, x, args))
end)

local function labels_for(n, c)
  local r = rnd(10)
  local vals = {}
  for i = 1, n do vals[i] = tostring(rnd(1, math.max(c, 1))) end
  if r == 1 and n > 0 then vals[rnd(n)] = pick({"0", tostring(c + 1), "-1", "1.5", "0/0", "2^40"}) end
  local dtype = chance(0.6) and "int64" or "float32"
  if dtype == "int64" then
    for i, v in ipairs(vals) do if not v:match("^%-?%d+$") then vals[i] = "0" end end
  end
  if r == 2 then return fresh({n, 2}, "int64") end
  if n == 0 then return fmt("torch.zeros({0}, {dtype = %q})", dtype) end
  return fmt("torch.tensor({%s}, {dtype = %q})", join(vals), dtype)
end

gen("loss", 6, function()
  local op = pick({"mse_loss", "cross_entropy", "nll_loss", "multi_margin_loss"})
  local reduction = ({"", "", "'sum'", "'mean'", "{reduction = 'sum'}", "'bogus'", "{bogus = 1}", "5"})[rnd(8)]
  if op == "mse_loss" then
    local x, m = targ()
    local y = targ(function(o) return #o.shape == #m.shape end, function() return copy(m.shape), m.dtype end)
    local args = {y}
    if reduction ~= "" then args[2] = reduction end
    return store(op, render(op, x, mutate(args)))
  end
  local pred = function(o)
    return (#o.shape == 2 or #o.shape == 1) and not (avoid.softmax_empty and has_zero(o.shape))
  end
  local x, m = targ(pred, function()
    return chance(0.8) and {rnd(1, 4), rnd(1, 5)} or {rnd(1, 5)}, chance(0.9) and "float32" or rand_dtype()
  end)
  local n, c
  if #m.shape == 2 then n, c = m.shape[1], m.shape[2] else n, c = nil, m.shape[1] or 1 end
  local labels
  if n then labels = labels_for(chance(0.9) and n or rnd(0, 4), c)
  else labels = chance(0.8) and fmt("torch.tensor(%d, {dtype = 'int64'})", rnd(1, math.max(c, 1))) or labels_for(1, c) end
  local args = {labels}
  if reduction ~= "" then args[2] = reduction end
  return store(op, render(op, x, mutate(args)))
end)

gen("gather", 3, function()
  local x, m = targ(function(o) return #o.shape >= 1 end, function() return rand_shape(rnd(1, 3)) end)
  local d = rnd(math.max(#m.shape, 1))
  local ishape = copy(m.shape)
  if #ishape > 0 then ishape[d] = rnd(0, 3) end
  local index
  if chance(0.7) and numel(ishape) <= 32 and #ishape > 0 then
    local size = math.max(m.shape[d] or 1, 1)
    local function lit(depth)
      if depth > #ishape then
        if chance(0.05) then return pick({"0", tostring(size + 1), "-1", "2^40"}) end
        return tostring(rnd(1, size))
      end
      local p = {}
      for i = 1, ishape[depth] do p[i] = lit(depth + 1) end
      return "{" .. join(p) .. "}"
    end
    index = "torch.tensor(" .. lit(1) .. ", {dtype = 'int64'})"
  else
    index = fresh(ishape, chance(0.8) and "int64" or "float32")
  end
  return store("gather", render("gather", x, mutate({chance(0.9) and tostring(d) or dim_arg(#m.shape), index})))
end)

-- ============================================================================================
-- [SECTION] in place, conversions

gen("inplace", 10, function()
  local op = pick({"add_", "sub_", "mul_", "zero_", "fill_", "copy_"})
  local x, m = targ()
  local args = {}
  if op == "add_" or op == "sub_" or op == "mul_" or op == "copy_" then
    args[1] = broadcast_partner(m)
    if (op == "add_" or op == "sub_") and chance(0.3) then args[2] = value_for(m) end
    if op == "copy_" and avoid.int_cast and m.dtype == "int64" then args[1] = fresh(copy(m.shape), "int64") end
  elseif op == "fill_" then
    args[1] = value_for(m)
  end
  local src = x .. ":" .. op .. "(" .. join(mutate(args)) .. ")"
  local r = rnd(4)
  if r == 1 then src = "torch.no_grad(function() " .. src .. " end)"
  elseif r == 2 then src = "local _ <close> = torch.no_grad(); " .. src end
  return call(op, src, {op})
end)

gen("convert", 5, function()
  local op = pick({"to", "float", "double", "long"})
  local pred = nil
  if avoid.int_cast and (op == "long" or op == "to") then
    pred = function(o) return o.dtype == "int64" end
  end
  local x = targ(pred, avoid.int_cast and function() return rand_shape(), "int64" end or nil)
  local args = {}
  if op == "to" then args[1] = pick({"'float32'", "'float64'", "'int64'", "'double'", "'long'", "'float16'", "nil", "5"}) end
  if avoid.int_cast and op == "to" then args[1] = pick({"'float32'", "'float64'", "'double'", "'float16'", "nil", "5"}) end
  return store(op, x .. ":" .. op .. "(" .. join(mutate(args)) .. ")", {op, "to"})
end)

-- ============================================================================================
-- [SECTION] inspection, fields, indexing

gen("inspect", 8, function()
  local x, m = targ()
  local r = rnd(14)
  if r == 1 then return call("size", "X.v = " .. x .. ":size(" .. (chance(0.5) and dim_arg(#m.shape) or "") .. ")", {"size"}) end
  if r == 2 then return call("dim", "X.v = " .. x .. ":dim()", {"dim"}) end
  if r == 3 then return call("numel", "X.v = " .. x .. ":numel()", {"numel"}) end
  if r == 4 then return call("item", "X.v = " .. x .. ":item()", {"item"}) end
  if r == 5 then return call("totable", "X.v = " .. x .. ":totable()", {"totable"}) end
  if r == 6 then return call("tostring", "X.s = tostring(" .. x .. ")", {"tostring"}) end
  if r == 7 then return call("len", "X.v = #" .. x, {"len"}) end
  if r == 8 then
    local i = chance(0.8) and tostring(rnd(-3, 4)) or (bad_int())
    return store("index", x .. "[" .. i .. "]", {"index"})
  end
  if r == 9 then
    local f = pick({"shape", "grad", "requires_grad", "grad_fn", "node", "is_leaf", "dtype", "device", "data", "bogus", "T"})
    if f == "data" or f == "grad" then return store("index", x .. "." .. f, {"index", f}) end
    return call("index", "X.v = " .. x .. "." .. f, {"index", f, "tensor has no field"})
  end
  if r == 10 then
    return call("index", "X.v = " .. x .. "[" .. pick({"1.5", "{}", "true", "x", "0/0"}) .. "]", {"index", "tensor has no field"})
  end
  if r == 11 then
    return call("grad_fn", "local g = " .. x .. ".grad_fn; if g then X.s = tostring(g) .. g.op .. #g.inputs .. tostring(g.shape) end",
                {"index", "grad_fn"})
  end
  if r == 12 then return call("tostring", "X.s = tostring(" .. x .. ".shape)", {"tostring", "index"}) end
  if r == 13 then return call("is_tensor", "X.v = torch.is_tensor(" .. x .. ")", {"is_tensor"}) end
  return call("tensor_newindex", x .. "." .. pick({"foo", "shape", "dtype", "node"}) .. " = " .. value_lit(), {"tensor", "index"})
end)

-- ============================================================================================
-- [SECTION] autograd

gen("backward", 10, function()
  local x, m = targ(function(o) return o.rg end, function() return rand_shape(), pick({"float32", "float64"}), true end)
  local r = rnd(10)
  if r <= 4 then return call("backward", x .. ":sum():backward()", {"backward", "sum"}) end
  if r == 5 then return call("backward", x .. ":backward()", {"backward"}) end
  if r == 6 then
    return call("backward", x .. ":backward(" .. (chance(0.7) and fresh(copy(m.shape), m.dtype) or wrong()) .. ")", {"backward"})
  end
  if r == 7 then return call("backward", "torch.backward(" .. x .. (chance(0.5) and "" or ", " .. wrong()) .. ")", {"backward"}) end
  if r == 8 then return call("backward", "local l = " .. x .. ":sum(); l:backward(); l:backward()", {"backward", "sum"}) end
  if r == 9 then
    return call("backward", "local y = (" .. x .. " * 2):sum(); torch.no_grad(function() " .. x ..
                ":mul_(1) end); y:backward()", {"backward", "sum", "mul", "mul_"})
  end
  return call("backward", "(" .. x .. "):mean():backward(" .. pick({"torch.tensor(2.0)", "nil", "torch.ones(1)", "3"}) .. ")",
              {"backward", "mean"})
end)

gen("grad_games", 8, function()
  local x, m = targ()
  local r = rnd(11)
  if r == 1 then return call("retain_grad", x .. ":retain_grad()", {"retain_grad"}) end
  if r == 2 then return call("requires_grad_", x .. ":requires_grad_(" .. pick({"", "true", "false", "1", "nil"}) .. ")", {"requires_grad_", "requires_grad"}) end
  if r == 3 then return call("requires_grad", x .. ".requires_grad = " .. pick({"true", "false", "nil", "1"}), {"requires_grad"}) end
  if r == 4 then
    local g = chance(0.6) and fresh(copy(m.shape), m.dtype) or (targ())
    if chance(0.1) then g = wrong() end
    return call("grad", x .. ".grad = " .. g, {"grad"})
  end
  if r == 5 then return call("grad", x .. ".grad = nil", {"grad"}) end
  if r == 6 then return store("detach", x .. ":detach()", {"detach"}) end
  if r == 7 then
    local k = slot()
    return call("detach", fmt("T[%d] = %s:detach(); T[%d].requires_grad = true", k, x, k), {"detach", "requires_grad"}, {k})
  end
  if r == 8 then return call("grad", "if " .. x .. ".grad then " .. x .. ".grad:add_(1) end", {"add_", "grad"}) end
  if r == 9 then return call("set_grad_enabled", "torch.set_grad_enabled(" .. pick({"true", "false", "true", "nil"}) .. ")", {"set_grad_enabled"}) end
  if r == 10 then
    return store("no_grad", "torch.no_grad(function(a) return a * 2 end, " .. x .. ")", {"no_grad", "mul"})
  end
  return call("enable_grad", "X.v = torch.enable_grad(function() return torch.is_grad_enabled() end)", {"enable_grad", "is_grad_enabled"})
end)

-- Tensor hooks: functions that keep, replace, break or misuse the gradient; handles removed.
local HOOK_FUNCTIONS = {
  "function(g) return g * 2 end", "function(g) end", "function(g) X.v = g end", "function(g) return g:sum() end",
  "function(g) error('the hook fails') end", "function(g) return 'x' end", "function(g) return g:mul_(2) end",
  "function(g) return g:t() end", "function(g) return g:double() end", "function(g) return g:detach() + 1 end",
  "function(g) if X.h then X.h:remove() end return g end", "function(g) collectgarbage() end",
}
gen("hooks", 6, function()
  local x = targ(function(o) return o.rg end, function() return rand_shape(), pick({"float32", "float64"}), true end)
  local r = rnd(4)
  if r <= 2 then return call("register_hook", "X.h = " .. x .. ":register_hook(" .. pick(HOOK_FUNCTIONS) .. ")", {"register_hook"}) end
  if r == 3 then return call("remove", "if X.h then X.h:remove() end", {"remove"}) end
  return call("register_hook", x .. ":register_hook(" .. pick({"nil", "5", "{}", "function() end, 1"}) .. ")", {"register_hook"})
end)

-- Torch7 indexing (views), writes through it, and the layout calls.
local function index_entry(size)
  local r = rnd(8)
  if r <= 3 then return tostring(chance(0.85) and rnd(-size, size) or rnd(-size - 2, size + 2)) end
  if r == 4 then return "{}" end
  if r == 5 then return "{" .. rnd(-size, size + 1) .. "}" end
  if r == 6 then return "{" .. rnd(-size, size + 1) .. ", " .. rnd(-size, size + 1) .. "}" end
  if r == 7 then return "{" .. rnd(-size, size) .. ", " .. rnd(-size, size) .. ", " .. rnd(-1, 3) .. "}" end
  return pick({"1.5", "'a'", "{1, 2, 3, 4}", "{{}}", "math.maxinteger", "-2^40"})
end

gen("index_view", 10, function()
  local x, m = targ(function(o) return #o.shape >= 1 end, function() return {rnd(1, 4), rnd(1, 4)} end)
  local entries = {}
  for i = 1, rnd(1, #m.shape + 1) do entries[i] = index_entry(m.shape[i] or 2) end
  local key = chance(0.2) and entries[1] or "{" .. join(entries) .. "}"
  -- (a string key, x['a'], is a field: "a: a tensor has no field or method 'a'")
  local names = {"index", "x[i] = value", "assign_", "expand", "copy_", "select", "narrow", "to", "as_strided", "contiguous",
                 "tensor has no field"}
  local r = rnd(6)
  if r <= 2 then return store("index", x .. "[" .. key .. "]", names) end
  local k = slot()
  local value = chance(0.5) and value_lit() or ("T[" .. slot() .. "]")
  local body = fmt("T[%d] = %s; T[%d][%s] = %s", k, chance(0.5) and x or x .. ":clone()", k, key, value)
  if chance(0.4) then body = body .. fmt("; (T[%d] * 1):sum():backward()", k) end
  if r == 6 then
    local op = pick({"permute(" .. join(size_args(m.shape, 0)) .. ")", "select(" .. dim_arg(#m.shape) .. ", " .. rnd(-2, 3) .. ")",
                     "contiguous()", "stride()", "is_contiguous()", "t():contiguous()", "storage_offset()"})
    return call("layout", fmt("X.v = %s:%s", x, op), {"permute", "select", "contiguous", "stride", "is_contiguous", "t",
                                                       "storage_offset", "index"})
  end
  return call("index_assign", body, {"index", "x[i] = value", "assign_", "expand", "copy_", "select", "narrow", "to",
                                     "as_strided", "mul", "sum", "backward", "clone", "fill_", "contiguous"}, {k})
end)

gen("inplace_view", 4, function()
  local x, m = targ(function(o) return #o.shape >= 1 and o.numel > 0 end, function() return {rnd(1, 3), rnd(1, 3)} end)
  local view = pick({x .. ":view(-1)", x .. "[1]", x .. ":reshape(" .. numel(m.shape) .. ")", x .. ":unsqueeze(1)",
                     x .. ":squeeze()", x .. ":narrow(1, 1, 1)", x .. ":detach()", x .. ".data", x .. ":t()", x .. ":expand(" ..
                     join(size_args(m.shape, 0)) .. ")"})
  local op = pick({"add_(1)", "mul_(2)", "zero_()", "fill_(3)", "sub_(" .. x .. ")", "copy_(" .. x .. ")"})
  local wrap = pick({"%s", "torch.no_grad(function() %s end)"})
  local k = slot()
  local body = fmt("T[%d] = %s; %s", k, view, fmt(wrap, fmt("T[%d]:%s", k, op)))
  if chance(0.4) then body = body .. fmt("; (%s * 1):sum():backward()", x) end
  return call("inplace_view", body, {"view", "reshape", "index", "unsqueeze", "squeeze", "narrow", "detach", "t", "expand",
                                     "add_", "mul_", "zero_", "fill_", "sub_", "copy_", "backward", "mul", "sum", "data"}, {k})
end)

-- Long chains (a 50,000-step loop is a normal input): recursive walks or recursive node
-- destruction over them would overflow the stack.
gen("deep_chain", 1, function()
  local n = wpick({{6, 100}, {3, 2000}, {1, 20000}, {avoid.deep_chain and 0 or 0.3, 60000}})
  local x = targ(function(o) return o.numel <= 4 and o.dtype ~= "int64" end,
                 function() return {2}, "float32", true end)
  local body = pick({"y = y * 1.0001", "y = (y + 1):tanh()", "y = y:sum(-1):unsqueeze(-1) * 0.5", "y = torch.Function and y + 0 or y"})
  local after = pick({"", "; y:sum():backward()", "; X.n = #torch.graph(y)", "; y = nil; collectgarbage()",
                      "; X.z = torch.freeze(function(a) local b = a for i = 1, 50 do b = b * 1.0001 end return b:sum() end, y)",
                      "; T[8] = y"})
  if avoid.tape_gc and after:find("graph") then after = "; collectgarbage(); collectgarbage('stop'); X.n = #torch.graph(y); collectgarbage('restart')" end
  local k = slot()
  if avoid.stop_quadratic and n > 1000 then   -- the chain does not outlive the call
    after = after:gsub("; T%[8%] = y", "")
    if after:find("X.z = ") then after = "" end
  end
  -- breakpoints off while it runs: an action doing O(tape) work at each of n stops is the user's O(n^2)
  local src = fmt("local off = {}; for _, b in ipairs(dbg.breaks()) do if b.enabled then dbg.disable(b.id); off[#off + 1] = b.id end end\n" ..
                  "local y = %s; for i = 1, %d do %s end; T[%d] = y%s\nfor _, id in ipairs(off) do dbg.enable(id) end", x, n, body, k, after)
  if avoid.stop_quadratic and n > 1000 then src = src .. fmt("\nT[%d] = nil", k) end
  return call("deep_chain", src, {"mul", "add", "tanh", "sum", "unsqueeze", "backward", "graph", "freeze", "function",
                                  "disable", "enable", "breaks"}, {k, 8})
end)

-- The API from a coroutine (another lua_State): ops, a torch.Function, yields across the bindings.
gen("coroutine", 3, function()
  local x = targ(nil, function() return rand_shape(), "float32", true end)
  local body = pick({
    "local y = a * 2; coroutine.yield(y); return y:sum()",
    "return torch.no_grad(function() coroutine.yield(1); return a + 1 end)",
    "local y = (FN[1] or torch.Function{forward = function(ctx, v) coroutine.yield(); return v end, backward = function(ctx, g) return g end}).apply(a); return y",
    "local l = (a * a):sum(); coroutine.yield(l); l:backward(); return a.grad",
    "error('fuzz_user_error')",
    "return torch.freeze(function(v) coroutine.yield(); return v * 2 end, a)",
  })
  local k = slot()
  local src = fmt("X.co = coroutine.wrap(function(a) %s end)\nT[%d] = X.co(%s)\nif math.random then T[%d] = X.co() end", body, k, x, k)
  if chance(0.3) then src = src .. "\nX.co = nil; collectgarbage()" end
  return call("coroutine", src, {"yield", "no_grad", "apply", "Fn%d", "Function", "backward", "mul", "sum", "add", "freeze",
                                 "fuzz_user_error", "cannot resume dead coroutine", "forward", "frozen", "guard"}, {k})
end)

gen("misc", 2, function()
  local r = rnd(4)
  if r == 1 then return call("require", "X.v = require('tapedeck') == torch and require('nn') == nn and require('optim') == optim", {"require"}) end
  if r == 2 then return call("no_grad_guard", "X.guard = torch.no_grad()", {"no_grad"}) end   -- left open: grad stays off
  if r == 3 then return call("no_grad_guard", "X.guard = nil; torch.set_grad_enabled(true)", {"set_grad_enabled"}) end
  return call("no_grad", "torch.no_grad(" .. pick({"5", "'x'", "{}", "function() error('fuzz_user_error') end", "T[1]"}) .. ")",
              {"no_grad", "fuzz_user_error"})
end)

-- ============================================================================================
-- [SECTION] graph, tape, memory

local function gc_guarded(expr)   -- tape_gc: no garbage pending, and no collection while it runs
  if not avoid.tape_gc then return "X.g = " .. expr end
  return "collectgarbage(); collectgarbage('stop'); local ok, r = pcall(function() return " .. expr ..
         " end); collectgarbage('restart'); if not ok then error(r, 0) end; X.g = r"
end

gen("graph", 6, function()
  local r = rnd(9)
  if r <= 2 then
    local x = targ()
    if chance(0.1) then x = wrong() end
    return call("graph", gc_guarded("torch.graph(" .. x .. ")") .. "; for _, n in ipairs(X.g) do X.s = tostring(n) end",
                {"graph"})
  end
  if r <= 4 then
    local pre, slots = "", {}
    if not avoid.tape_gc and chance(0.5) then
      slots[1] = slot()
      pre = fmt("T[%d] = nil; ", slots[1])
    end
    return call("tape", pre .. gc_guarded("torch.tape()") .. "; X.n = #X.g", {"tape"}, slots)
  end
  if r == 5 then
    local ext = pick({"dot", "dot", "gv", "txt", "svg"})
    if ext == "svg" and avoid.graphviz_render then ext = "dot" end
    local x = targ()
    local path = chance(0.9) and fmt("PATH('g.%s')", ext) or pick({"'/nonexistent/dir/g.dot'", "nil", "true", "''"})
    return call("graphviz", "torch.graphviz(" .. x .. ", " .. path .. ")", {"graphviz"})
  end
  if r == 6 then return call("memory", "X.a, X.b, X.c = torch.memory(); torch.reset_peak_memory()", {"memory", "reset_peak_memory"}) end
  if r == 7 then return call("perf_counter", "X.v = torch.perf_counter()", {"perf_counter"}) end
  if r == 8 then
    return store("scope", "torch.scope(" .. pick({"'blk'", "'a/b'", "5", "nil", "{}"}) .. ", function(a) return a + 1 end, " ..
                 (targ()) .. ")", {"scope", "add"})
  end
  return call("tape", gc_guarded("torch.tape()") .. "; local k = 0; for _, n in ipairs(X.g) do k = k + #n.inputs end", {"tape"})
end)

gen("drop", 6, function()
  local r = rnd(10)
  if r <= 4 then
    local k = slot()
    return call("drop", fmt("T[%d] = nil", k), {}, {k})
  end
  if r == 5 then return call("drop", fmt("M[%d] = nil", rnd(NM)), {}) end
  if r == 6 then return call("drop", fmt("Z[%d] = nil", rnd(NZ)), {}) end
  if r == 7 then return call("drop", fmt("FN[%d] = nil; O[%d] = nil", rnd(NF), rnd(NO)), {}) end
  if r == 8 then return call("collectgarbage", "collectgarbage()", {}) end
  if r == 9 then return call("collectgarbage", "collectgarbage('step', " .. rnd(0, 100) .. ")", {}) end
  local k = slot()
  return call("drop", fmt("T[%d] = nil; collectgarbage()", k), {}, {k})
end)

-- ============================================================================================
-- [SECTION] torch.Function

local FORWARDS = {
  {"ctx:save_for_backward(x); return x:clamp{min = 0}", {"clamp", "save_for_backward"}},
  {"return x * 2", {"mul"}},
  {"return x", {}},                                             -- returns its input
  {"return x, x * 3", {"mul"}},                                 -- two outputs
  {"return 42", {"forward"}},                                   -- not a tensor
  {"return", {"forward"}},                                      -- nothing
  {"error('fuzz_user_error')", {"fuzz_user_error"}},
  {"ctx:save_for_backward(x, 5); return x + 1", {"save_for_backward", "add"}},
  {"ctx:save_for_backward(x); return x:exp()", {"exp"}},
  {"x:mul_(2); return x + 0", {"mul_", "add"}},                 -- in place on the input
  {"ctx.k = 3; return x:sum()", {"sum"}},
  {"return x:tanh(), x:sigmoid(), x:relu()", {"tanh", "sigmoid", "relu"}},
}
local BACKWARDS = {
  {"return g * 2", {"mul"}},
  {"return g", {}},
  {"local x = ctx.saved_tensors and ctx.saved_tensors[1]; local gi = g:clone(); if x then gi[x:lt(0)] = 0 end; return gi",
   {"clone", "lt", "masked_fill", "index"}},
  {"return torch.ones(7)", {"ones"}},                          -- wrong shape
  {"return g, g, g", {"backward"}},                            -- too many
  {"return", {"backward"}},                                    -- none
  {"return 'x'", {"backward"}},                                -- not a tensor
  {"error('fuzz_user_error')", {"fuzz_user_error"}},
  {"return g:detach()", {"detach"}},
  {"g:sum():backward(); return g", {"backward", "sum"}},       -- backward inside backward
  {"return g:double()", {"double", "to"}},                     -- wrong dtype
  {"return nil", {}},
}

gen("function_def", 4, function()
  local k = rnd(NF)
  local name = "Fn" .. rnd(1, 9)
  local f = pick(FORWARDS)
  local b = pick(BACKWARDS)
  local second = chance(0.3) and ", y" or ""
  local src
  local r = rnd(12)
  if r == 1 then src = fmt("FN[%d] = torch.Function(%s)", k, pick({"{}", "nil", "5", "{forward = 1, backward = 2}", "{forward = function() end}"}))
  elseif r == 2 then src = fmt("FN[%d] = torch.Function{name = %s, forward = function(ctx, x) return x end, backward = function(ctx, g) return g end}",
                               k, pick({"5", "{}", "true", "''"}))
  else
    src = fmt("FN[%d] = torch.Function{\n  name = %q,\n  forward = function(ctx, x%s)\n    %s\n  end,\n  backward = function(ctx, g, g2, g3)\n    %s\n  end,\n}",
              k, name, second, f[1], b[1])
  end
  local names = {"Function", name}
  for _, n in ipairs(f[2]) do names[#names + 1] = n end
  for _, n in ipairs(b[2]) do names[#names + 1] = n end
  local c = call("Function", src, {"Function", "torch.Function"})
  c.on_ok = function() FI[k] = {name = name, names = names, two = second ~= ""} end
  return c
end)

gen("function_apply", 8, function()
  local live_f = live_in(FI, NF)
  if #live_f == 0 then return gens.function_def() end
  local k = pick(live_f)
  local info = FI[k]
  local x = targ(nil, function() return rand_shape(), pick({"float32", "float64"}), true end)
  local args = {x}
  if info.two then args[2] = chance(0.8) and (targ()) or value_lit() end
  local r = rnd(10)
  local names = copy(info.names)
  names[#names + 1] = "apply"
  local src
  if r == 1 then src = fmt("FN[%d].apply(%s)", k, pick({"", "3", "'x'", "nil"}))
  elseif r <= 5 then src = fmt("T[%d] = FN[%d].apply(%s)", slot(), k, join(args))
  elseif r <= 8 then
    local s = slot()
    src = fmt("T[%d] = FN[%d](%s); T[%d]:sum():backward()", s, k, join(args), s)
    names[#names + 1] = "backward"
    names[#names + 1] = "sum"
    return call("Function.apply", src, names, {s})
  else
    src = fmt("local y = FN[%d].apply(%s); %s:mul_(3); (y * 1):sum():backward()", k, join(args), x)
    names[#names + 1] = "backward"; names[#names + 1] = "mul_"; names[#names + 1] = "mul"; names[#names + 1] = "sum"
    return call("Function.apply", src, names)
  end
  local slots = {}
  local s = src:match("^T%[(%d+)%]")
  if s then slots[1] = tonumber(s) end
  return call("Function.apply", src, names, slots)
end)

-- ============================================================================================
-- [SECTION] freeze, plans, npy

-- What an error from calling a Sequential may name: any module it holds, or their ops.
local ANY_MODULE_NAMES = {"Sequential", "Linear", "linear", "Conv2d", "conv2d", "MaxPool2d", "max_pool2d", "Flatten",
  "flatten", "ReLU", "relu", "Tanh", "tanh", "Sigmoid", "sigmoid", "Softmax", "softmax", "MSELoss", "mse_loss",
  "CrossEntropyLoss", "cross_entropy", "NLLLoss", "nll_loss", "MultiMarginLoss", "multi_margin_loss", "Module", "forward",
  "matmul", "Net%d", "fuzz_user_error", "Parameter"}

-- Bodies of functions to freeze: source, argument count, names of what they call.
local FROZEN_BODIES = {
  {"function(x) return x:tanh() * 2 end", 1, {"tanh", "mul"}},
  {"function(x, y) local l = (x * y):sum(); l:backward(); return l end", 2, {"mul", "sum", "backward"}},
  {"function(x) if x:sum():item() > 0 then return x:relu() else return -x end end", 1, {"sum", "item", "relu", "neg"}},
  {"function(x) return {a = x + 1, b = 3, c = 's', d = {x * 2}} end", 1, {"add", "mul"}},
  {"function(x) x.grad = nil; local l = (x * x):sum(); l:backward(); return l end", 1, {"grad", "mul", "sum", "backward"}},
  {"function(x) return Z[1](x) end", 1, {"Z1"}},
  {"function(x) error('fuzz_user_error') end", 1, {"fuzz_user_error"}},
  {"function(x) return FN[1].apply(x) end", 1, {"apply", "Fn%d"}},
  {"function(x) return M[1](x) end", 1, {"Module"}},   -- any module: ANY_MODULE_NAMES below
  {"function(x, n) for i = 1, (tonumber(n) or 1) % 4 do x = x * 0.5 end return x end", 2, {"mul"}},
  {"function(x) return x:mm(x:t()):softmax(2) end", 1, {"mm", "t", "softmax"}},
  {"function(x) local y = x:clone(); y:add_(1); return y end", 1, {"clone", "add_"}},
  {"function(x) x:retain_grad(); local y = (x * 3):sum(); y:backward(); return y, x.grad end", 1, {"retain_grad", "mul", "sum", "backward"}},
  {"function(x) local n = #torch.tape(); return x * n end", 1, {"tape", "mul"}},
  {"function() return torch.ones(2) end", 0, {"ones"}},
  {"function(x) return x, x end", 1, {}},
  {"function(x) return x end", 1, {}},
  {"function(x) x:mul_(2); return x end", 1, {"mul_"}},
  {"function(x) local w = T[3]; if w then return (x:sum() + w:sum()) end return x:sum() end", 1, {"sum", "add"}},
  {"function(x) torch.no_grad(function() if T[2] then T[2]:add_(1) end end); return x * 1 end", 1, {"add_", "mul"}},
  {"function(x) local l = x:sum(); l:backward(); if T[4] and T[4].grad then T[4].grad = nil end; return l end", 1,
   {"sum", "backward", "grad"}},
  {"function(x) if x > 0 then return x + 1 end return x - 1 end", 1, {"compare", "add", "sub", "lt", "le"}},
  {"function(x) local t = x:totable(); return x * (type(t) == 'table' and 2 or 3) end", 1, {"totable", "mul"}},
  {"function(x) return x:cross_entropy(torch.tensor({1}, {dtype = 'int64'})) end", 1, {"cross_entropy"}},
  {"function(x) return x:max(1) end", 1, {"max"}},
}

local function frozen_names(body)
  local names = {"freeze", "function"}
  for _, n in ipairs(body[3]) do names[#names + 1] = n end
  if body[3][1] == "Module" then for _, n in ipairs(ANY_MODULE_NAMES) do names[#names + 1] = n end end
  return names
end

gen("freeze", 6, function()
  local k = rnd(NZ)
  local body = pick(FROZEN_BODIES)
  if avoid.tape_gc and body[1]:find("tape") then body = FROZEN_BODIES[1] end
  if avoid.softmax_empty and (body[1]:find("softmax") or body[1]:find("cross_entropy") or body[1]:find("M%[1%]")) then
    body = FROZEN_BODIES[1]
  end
  local args, metas = {}, {}
  for i = 1, body[2] do
    local a, m = targ(nil, function() return rand_shape(), pick({"float32", "float32", "float64"}), chance(0.7) end)
    if body[1]:find("x, n") and i == 2 then a, m = tostring(rnd(0, 3)), nil end
    args[i], metas[i] = a, m
  end
  local names = frozen_names(body)
  local r = rnd(10)
  local src
  local zname = nil
  if r <= 5 then
    src = fmt("Z[%d] = torch.freeze(%s%s)", k, body[1], #args > 0 and ", " .. join(args) or "")
  elseif r <= 9 then
    local fields = {body[1]}
    for _, a in ipairs(args) do fields[#fields + 1] = a end
    if chance(0.4) then fields[#fields + 1] = "strict = " .. pick({"true", "false"}) end
    if chance(0.3) then fields[#fields + 1] = "cache = " .. pick({"1", "2", "8", "0", "-1", "{}", "2^31", "math.maxinteger", "1.5"}) end
    if chance(0.8) then fields[#fields + 1] = "verbose = false" end
    if chance(0.4) then zname = "z" .. k; fields[#fields + 1] = fmt("name = %q", zname) end
    if chance(0.3) then
      fields[#fields + 1] = "passes = " .. pick({"{fuse = false}", "{all = false}", "{dce = false, cse = false}", "{bogus = true}",
                                                 "'x'", "{reuse = false, inplace = false}", "{all = true}"})
    end
    src = fmt("Z[%d] = torch.freeze{%s}", k, join(fields))
  else
    src = fmt("Z[%d] = torch.freeze(%s)", k, pick({"3", "nil", "{}", "{5}", "'f'", "T[1]"}))
  end
  if zname then names[#names + 1] = zname end
  local c = call("freeze", src, names)
  c.on_ok = function() ZI[k] = {body = body, metas = metas, args = args, names = names} end
  return c
end)

local function frozen_slot()
  local z = live_in(ZI, NZ)
  if #z == 0 then return nil end
  return pick(z)
end

local last_call_failed = {}   -- Z slot -> the last call of it raised an error (timeit_after_error)

gen("frozen_call", 10, function()
  local k = frozen_slot()
  if not k then return gens.freeze() end
  local info = ZI[k]
  local args = {}
  local r = rnd(10)
  local call_metas = {}
  for i, a in ipairs(info.args) do
    local m = info.metas[i]
    if m and r <= 5 then
      args[i], call_metas[i] = targ(function(o) return #o.shape == #m.shape and o.dtype == m.dtype end,
                                    function() return copy(m.shape), m.dtype, m.rg end)
    elseif m and r <= 8 then
      args[i], call_metas[i] = targ()
    else
      args[i], call_metas[i] = a, m
    end
  end
  info.call_metas = call_metas   -- timeit reruns the last call's arguments
  if r == 9 and #args > 0 then table.remove(args) end
  if r == 10 then args[#args + 1] = wrong() end
  local names = copy(info.names)
  names[#names + 1] = "guard"
  local s = slot()
  local src = fmt("T[%d] = Z[%d](%s)", s, k, join(args))
  return call("frozen_call", src, names, {s}), k
end)

gen("frozen_methods", 8, function()
  local k = frozen_slot()
  if not k then return gens.freeze() end
  local info = ZI[k]
  local names = copy(info.names)
  local r = rnd(12)
  if r <= 2 then
    local skip = avoid.timeit_after_error and last_call_failed[k]
    if avoid.timeit_empty then
      if info.body[1]:find("%[") or info.loaded then skip = true end   -- captures T[...], or calls Z/FN/M that do
      for _, m in pairs(info.metas) do if has_zero(m.shape) then skip = true end end
      for _, m in pairs(info.call_metas or {}) do if has_zero(m.shape) then skip = true end end
    end
    if skip then return call("plan", fmt("X.s = Z[%d]:plan()", k), {"plan"}) end
    local n = chance(0.85) and tostring(rnd(1, 3)) or pick({"0", "-1", "'x'", "1.5", "2^32", "math.mininteger", "{}"})
    names[#names + 1] = "timeit"
    return call("timeit", fmt("X.t = Z[%d]:timeit(%s)", k, n), names)
  end
  if r == 3 then return call("plan", fmt("X.s = Z[%d]:plan()", k), {"plan"}) end
  if r == 4 then return call("stats", fmt("X.t = Z[%d]:stats()", k), {"stats"}) end
  if r == 5 then
    local j = rnd(NZ)
    local p = pick({"{fuse = false}", "{all = false}", "{cse = false, dce = false}", "{bogus = 1}", "nil", "5", "{fold = false}"})
    names[#names + 1] = "with_passes"
    local c = call("with_passes", fmt("Z[%d] = Z[%d]:with_passes(%s)", j, k, p), names)
    c.on_ok = function() ZI[j] = {body = info.body, metas = info.metas, args = info.args, names = names} end
    return c
  end
  if r == 6 then return call("params", fmt("X.t = Z[%d]:params(); for name, t in pairs(X.t) do X.s = name .. tostring(t) end", k), {"params"}) end
  if r == 7 then
    local field = pick({"strict", "cache_size", "verbose", "name", "bogus", "fn"})
    local v = pick({"true", "false", "0", "1", "-1", "2^31", "math.maxinteger", "'n'", "{}", "nil", "1.5"})
    local c = call("frozen_newindex", fmt("Z[%d].%s = %s", k, field, v), {field, "frozen", "cache_size", "name"})
    if field == "name" then   -- later errors name it so
      c.on_ok = function()
        local names = copy(info.names)
        names[#names + 1] = (v:gsub("'", ""))
        info.names = names
      end
    end
    return c
  end
  if r == 8 then return call("frozen_index", fmt("X.v = Z[%d].%s", k, pick({"strict", "cache_size", "verbose", "name", "fn", "bogus", "plan"})), {"frozen", "index"}) end
  if r == 9 then return call("tostring", fmt("X.s = tostring(Z[%d])", k), {"tostring"}) end
  if r == 10 then return call("is_frozen", fmt("X.v = torch.is_frozen(Z[%d]) and torch.is_frozen(%s)", k, wrong()), {"is_frozen"}) end
  if r == 11 then
    return call("frozen_method_misuse", fmt("X.v = Z[%d].plan(%s)", k, pick({"nil", "5", "T[1]", "Z[2]"})), {"plan", "frozen"})
  end
  return call("frozen_call", fmt("X.v = Z[%d]()", k), names), k
end)

local PLAN_FILES = {"PATH('a.tdp')", "PATH('b.tdp')"}

gen("plan_file", 6, function()
  local r = rnd(10)
  local k = frozen_slot()
  if r <= 3 and k then
    local path = chance(0.9) and pick(PLAN_FILES) or pick({"'/nonexistent/dir/x.tdp'", "nil", "true", "''"})
    return call("save_plan", fmt("torch.save_plan(Z[%d], %s)", k, path), {"save_plan"})
  end
  if r <= 6 then
    local j = rnd(NZ)
    local passes = pick({"", "", ", {fuse = false}", ", {all = false}", ", {bogus = 1}", ", 5"})
    local path = chance(0.9) and pick(PLAN_FILES) or pick({"'/nonexistent.tdp'", "nil", "{}"})
    local c = call("load_plan", fmt("Z[%d] = torch.load_plan(%s%s)", j, path, passes), {"load_plan"})
    -- a loaded plan keeps the saved function's name: "function (fuzz_call_3:1)", "z2", or one set with f.name = ...
    local loaded_names = {"load_plan", "function", "z%d", "n", "0", "1"}
    c.on_ok = function() ZI[j] = {body = {"loaded", 0, {}}, metas = {}, args = {}, names = loaded_names, loaded = true} end
    return c
  end
  if r <= 8 then   -- a saved plan with some bytes changed, then loaded
    local flips = {}
    for i = 1, rnd(1, 4) do flips[i] = fmt("{%d, %d}", rnd(0, 4000), rnd(0, 255)) end
    local src = fmt([[
local f = io.open(%s, 'rb'); local data = f and f:read('a'); if f then f:close() end
if data and #data > 0 then
  for _, flip in ipairs({%s}) do
    local at = flip[1] %% #data + 1
    data = data:sub(1, at - 1) .. string.char(flip[2]) .. data:sub(at + 1)
  end
  local o = io.open(PATH('m.tdp'), 'wb'); o:write(data); o:close()
  X.z = torch.load_plan(PATH('m.tdp'))
end]], pick(PLAN_FILES), join(flips))
    return call("load_plan", src, {"load_plan"})
  end
  -- garbage: random bytes, a valid-looking header, an empty file
  local bytes = {}
  local header = pick({"", "TDPLAN", "TDPLAN\1\0\0\0", "TDPLAN\255\255\255\255"})
  for i = 1, rnd(0, 64) do bytes[i] = fmt("\\%d", rnd(0, 255)) end
  local src = fmt("local o = io.open(PATH('g.tdp'), 'wb'); o:write(%q .. \"%s\"); o:close(); X.z = torch.load_plan(PATH('g.tdp'))",
                  header, table.concat(bytes))
  return call("load_plan", src, {"load_plan"})
end)

local NPY_FILES = {"PATH('a.npy')", "PATH('b.npy')"}
local NPY_HEADERS = {
  "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }",
  "{'descr': '<f4', 'fortran_order': False, 'shape': (abc, 2), }",
  "{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, 4294967296), }",
  "{'descr': '<i8', 'fortran_order': False, 'shape': (-1,), }",
  "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }",
  "{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }",
  "{'descr': '<f2', 'fortran_order': False, 'shape': (), }",
  "{'descr': '>f4', 'fortran_order': False, 'shape': (1, 1, 1, 1, 1, 1, 1, 1), }",
  "{'descr': '<u8', 'fortran_order': False, 'shape': (9223372036854775807,), }",
  "{'descr': '<c8', 'fortran_order': False, 'shape': (2,), }",
  "{'descr': '<f4', 'shape': (2,), }",
  "{'descr': '<f4', 'fortran_order': False, 'shape': (0, 5), }",
  "{'descr': '<f4', 'fortran_order': False, 'shape': (3,)",
  "",
}

gen("npy", 5, function()
  local r = rnd(10)
  if r <= 3 then
    local x = targ()
    local path = chance(0.9) and pick(NPY_FILES) or pick({"'/nonexistent/d/x.npy'", "nil", "{}", "true"})
    return call("save_npy", fmt("torch.save_npy(%s, %s)", chance(0.95) and x or wrong(), path), {"save_npy"})
  end
  if r <= 6 then
    local path = chance(0.9) and pick(NPY_FILES) or pick({"'/nonexistent.npy'", "nil", "{}"})
    return store("load_npy", fmt("torch.load_npy(%s)", path), {"load_npy"})
  end
  -- a hand-made file: magic, version, header length, header, some data
  local header = pick(NPY_HEADERS)
  if avoid.npy_overflow and (header:find("4294967296") or header:find("9223372036854775807")) then header = NPY_HEADERS[1] end
  local version = pick({"\\1\\0", "\\2\\0", "\\3\\0", "\\9\\0"})
  local data = {}
  for i = 1, rnd(0, 48) do data[i] = fmt("\\%d", rnd(0, 255)) end
  local hl = #header + rnd(-2, 2)
  if hl < 0 then hl = 0 end
  local len_bytes = version:sub(1, 2) == "\\1" and fmt("\\%d\\%d", hl % 256, hl // 256)
                    or fmt("\\%d\\%d\\0\\0", hl % 256, hl // 256)
  local magic = chance(0.95) and "\\147NUMPY" or "\\147NUMPZ"
  local src = fmt("local o = io.open(PATH('g.npy'), 'wb'); o:write(\"%s%s%s\" .. %q .. \"%s\"); o:close()",
                  magic, version, len_bytes, header, table.concat(data))
  local k = slot()
  return call("load_npy", src .. fmt("; T[%d] = torch.load_npy(PATH('g.npy'))", k), {"load_npy"}, {k})
end)

-- torch.save_png: pool tensors (any shape, dtype, values: mostly refused), small images scaled
-- into 0..255, odd paths and options.
gen("png", 2, function()
  local image = chance(0.5) and targ() or fmt("(torch.rand({%s}) * %s)", pick({"3, 4, 5", "4, 5, 3", "2, 3", "3, 2, 3", "1, 1, 1", "0, 4",
                                                                              "5", "4, 4, 4, 4", "16385, 1"}), pick({"255", "256", "-1", "0/0"}))
  local path = chance(0.9) and "PATH('p.png')" or pick({"'/nonexistent/d/x.png'", "nil", "{}", "TMP"})
  local options = pick({"", ", {layout = 'HWC'}", ", {layout = 'CHW'}", ", {layout = 'x'}", ", {bogus = 1}", ", 5"})
  return call("save_png", fmt("torch.save_png(%s, %s%s)", chance(0.95) and image or wrong(), path, options), {"save_png"})
end)

-- ============================================================================================
-- [SECTION] nn

local function small_size()
  if chance(0.9) then return tostring(rnd(1, 5)) end
  return pick({"0", "-1", "1.5", "'3'", "nil", "{}", "2^31", "2^40", "math.maxinteger"})
end

-- A module constructor: source, info (kind and sizes for making inputs), acceptable names.
local function module_ctor()
  local r = rnd(16)
  if r <= 4 then
    local a, b = small_size(), small_size()
    local sizes = safe_dims({{a, tonumber(load("return " .. a)()) }, {b, tonumber(load("return " .. b)())}})
    a, b = sizes[1][1], sizes[2][1]
    local o = pick({"", "", ", {bias = false}", ", {dtype = 'float64'}", ", {dtype = 'int64'}", ", 5"})
    return fmt("nn.Linear(%s, %s%s)", a, b, o), {kind = "Linear", inf = tonumber(a), outf = tonumber(b)}, {"Linear", "linear", "rand"}
  end
  if r <= 6 then
    local cin, cout, k = rnd(1, 3), rnd(1, 3), rnd(1, 3)
    local groups = chance(0.2) and cin or 1
    if groups > 1 then cout = cout * groups end
    local o = pick({"", "", fmt(", {stride = %s, padding = %s}", window_size(), window_int()), ", {bias = false}", ", {bogus = 1}",
                    fmt(", {padding = %s, dilation = %s, groups = %d}", pick({"'same'", "'valid'", "1", "{1, 0}"}), window_dilation(), groups),
                    fmt(", {groups = %s}", pick({"0", "2", "-1"}))})
    local ksrc = chance(0.9) and (chance(0.8) and tostring(k) or fmt("{%d, %d}", k, k)) or small_size()
    return fmt("nn.Conv2d(%d, %d, %s%s)", cin, cout, ksrc, o), {kind = "Conv2d", cin = cin, k = k}, {"Conv2d", "conv2d", "rand"}
  end
  if r == 7 then
    local ksrc = chance(0.8) and (chance(0.8) and tostring(rnd(1, 2)) or fmt("{%d, %d}", rnd(1, 2), rnd(1, 2))) or small_size()
    local o = pick({"", "", ", 1", fmt(", {stride = %s, padding = %s, ceil_mode = %s}", window_size(), window_int(), pick({"true", "false"})),
                    fmt(", {dilation = %s}", window_dilation()), ", {return_indices = true}", ", {bogus = 1}"})
    return fmt("nn.MaxPool2d(%s%s)", ksrc, o), {kind = "MaxPool2d"}, {"MaxPool2d", "max_pool2d"}
  end
  if r == 8 then return fmt("nn.Flatten(%s)", pick({"", "2", "1, -1", "3", "0", "'x'"})), {kind = "Flatten"}, {"Flatten", "flatten"} end
  if r == 9 then
    local n = pick({"ReLU", "Tanh", "Sigmoid"})
    return "nn." .. n .. "()", {kind = n}, {n, n:lower()}
  end
  if r == 10 then return fmt("nn.Softmax(%s)", pick({"1", "-1", "2", "", "0", "'x'"})), {kind = "Softmax"}, {"Softmax", "softmax"} end
  if r == 11 then
    local n = pick({"MSELoss", "CrossEntropyLoss", "NLLLoss", "MultiMarginLoss"})
    local fns = {MSELoss = "mse_loss", CrossEntropyLoss = "cross_entropy", NLLLoss = "nll_loss", MultiMarginLoss = "multi_margin_loss"}
    return fmt("nn.%s(%s)", n, pick({"", "{reduction = 'sum'}", "{reduction = 'bogus'}", "5"})), {kind = "loss", fn = fns[n]}, {n, fns[n]}
  end
  if r <= 13 then
    local parts = {}
    for i = 1, rnd(0, 3) do parts[i] = chance(0.7) and fmt("nn.Linear(%d, %d)", rnd(1, 4), rnd(1, 4)) or pick({"nn.ReLU()", "M[1]", "5", "nn.Tanh()"}) end
    return "nn.Sequential(" .. join(parts) .. ")", {kind = "Sequential"}, ANY_MODULE_NAMES
  end
  if r == 14 then return "nn.Parameter(" .. (chance(0.9) and (targ()) or wrong()) .. ")", nil, {"Parameter", "detach", "clone", "requires_grad_"} end
  if r == 15 then return fmt("nn.%s(%s)", pick({"Linear", "Conv2d", "MaxPool2d", "Softmax"}), wrong()), nil,
                         {"Linear", "Conv2d", "MaxPool2d", "Softmax", "linear", "conv2d", "rand"} end
  return "nn.Module()", {kind = "Module"}, {"Module", "forward"}
end

gen("nn_new", 5, function()
  local k = rnd(NM)
  local src, info, names = module_ctor()
  if not info then return store("nn.Parameter", src, names) end
  info.names = names
  local c = call("nn." .. info.kind, fmt("M[%d] = %s", k, src), names)
  c.on_ok = function() MI[k] = info end
  return c
end)

local user_classes = 0
gen("nn_class", 2, function()
  local k = rnd(NM)
  user_classes = user_classes + 1
  local cname = "Net" .. user_classes
  local a, b = rnd(1, 4), rnd(1, 4)
  local init = pick({
    fmt("self.l1 = nn.Linear(%d, %d); self.act = nn.ReLU()", a, b),
    fmt("self.blocks = {nn.Linear(%d, %d), nn.Tanh()}", a, b),
    fmt("self.w = nn.Parameter(torch.randn(%d, %d)); self.n = 3", b, a),
    "self.l1 = nn.Linear(a, b)",   -- a, b nil
    "error('fuzz_user_error')",
  })
  local forward = pick({
    "return self.act(self.l1(x))",
    "local y = x; for _, m in ipairs(self.blocks or {}) do y = m(y) end; return y",
    "return x:matmul(self.w:t())",
    "return x",
    "return nil",
    "error('fuzz_user_error')",
  })
  local ext = chance(0.95) and fmt("%q", cname) or pick({"", "5", "nil"})
  local src = fmt("X.cls = nn.Module:extend(%s)\nfunction X.cls:init(a, b)\n  %s\nend\nfunction X.cls:forward(x)\n  %s\nend\nM[%d] = X.cls(%d, %d)",
                  ext, init, forward, k, a, b)
  local names = {cname, "extend", "init", "Linear", "linear", "relu", "tanh", "matmul", "Parameter", "fuzz_user_error", "forward"}
  local c = call("nn.Module:extend", src, names)
  c.on_ok = function() MI[k] = {kind = "user", inf = a, names = names} end
  return c
end)

-- An input that fits the module (mostly).
local function module_input(info)
  if info.kind == "Linear" or info.kind == "user" then
    local inf = info.inf or 2
    return targ(function(o) return #o.shape >= 1 and o.shape[#o.shape] == inf end,
                function() return {rnd(1, 3), chance(0.9) and inf or rnd(0, 4)}, chance(0.9) and "float32" or rand_dtype() end)
  end
  if info.kind == "Conv2d" then
    return targ(function(o) return #o.shape == 4 and o.shape[2] == info.cin end,
                function() return {rnd(1, 2), chance(0.9) and info.cin or rnd(1, 3), rnd(info.k, 6), rnd(info.k, 6)} end)
  end
  if avoid.softmax_empty then   -- a Softmax, or a Sequential holding one
    return targ(function(o) return not has_zero(o.shape) end, function() return {rnd(1, 3), rnd(1, 3)} end)
  end
  return targ()
end

local function module_slot()
  local live_m = live_in(MI, NM)
  if #live_m == 0 then return nil end
  return pick(live_m)
end

gen("nn_call", 10, function()
  local k = module_slot()
  if not k then return gens.nn_new() end
  local info = MI[k]
  local names = copy(info.names)
  if info.kind == "loss" then
    local x, m = targ(function(o) return #o.shape == 2 and not (avoid.softmax_empty and has_zero(o.shape)) end,
                      function() return {rnd(1, 3), rnd(1, 4)} end)
    local y
    if info.fn == "mse_loss" then y = fresh(copy(m.shape), m.dtype)
    else y = labels_for(m.shape[1] or 1, m.shape[2] or 1) end
    return store("nn_loss", fmt("M[%d](%s, %s)", k, x, y), names)
  end
  if info.kind == "Sequential" or info.kind == "Module" then   -- a Sequential may hold a Softmax
    local pred = avoid.softmax_empty and function(o) return not has_zero(o.shape) end or nil
    return store("nn_call", fmt("M[%d](%s)", k, (targ(pred, function() return {rnd(1, 3), rnd(1, 4)} end))), names)
  end
  local x = module_input(info)
  local r = rnd(10)
  if r <= 7 then return store("nn_call", fmt("M[%d](%s)", k, x), names) end
  if r == 8 then return store("nn_call", fmt("M[%d]:forward(%s)", k, x), names) end
  if r == 9 then
    local s = slot()
    names[#names + 1] = "backward"; names[#names + 1] = "sum"
    return call("nn_call", fmt("T[%d] = M[%d](%s); T[%d]:sum():backward()", s, k, x, s), names, {s})
  end
  return store("nn_call", fmt("M[%d](%s)", k, wrong()), names)
end)

gen("nn_methods", 5, function()
  local k = module_slot()
  if not k then return gens.nn_new() end
  local names = copy(MI[k].names)
  local r = rnd(10)
  if r == 1 then return call("parameters", fmt("X.p = M[%d]:parameters(); X.n = #X.p", k), {"parameters"}) end
  if r == 2 then return call("named_parameters", fmt("for _, p in ipairs(M[%d]:named_parameters()) do X.s = p[1] end", k), {"named_parameters"}) end
  if r == 3 then return call("children", fmt("X.c = M[%d]:children()", k), {"children"}) end
  if r == 4 then return call("zero_grad", fmt("M[%d]:zero_grad()", k), {"zero_grad"}) end
  if r == 5 then return call("train", fmt("M[%d]:train(%s); M[%d]:eval()", k, pick({"", "false", "true", "5"}), k), {"train", "eval"}) end
  if r == 6 then return call("tostring", fmt("X.s = tostring(M[%d])", k), names) end
  if r == 7 then
    local s = slot()
    return call("module_field", fmt("T[%d] = M[%d].weight", s, k), {"weight"}, {s})
  end
  if r == 8 then return call("module_field", fmt("M[%d].extra = %s", k, pick({"nn.Linear(2, 2)", "torch.ones(2)", "{nn.ReLU()}", "5"})), names) end
  if r == 9 then
    local j = rnd(NM)
    local info = {kind = "Sequential", names = ANY_MODULE_NAMES}
    local c = call("nn.Sequential", fmt("M[%d] = nn.Sequential(M[%d], M[%d])", j, k, rnd(NM)), info.names)
    c.on_ok = function() MI[j] = info end
    return c
  end
  local f = pick({"relu", "tanh", "sigmoid", "softmax", "log_softmax", "flatten"})
  local args = {(targ())}
  if f == "softmax" or f == "log_softmax" then
    local pred = avoid.softmax_empty and function(o) return not has_zero(o.shape) and #o.shape > 0 end or nil
    args = {(targ(pred, function() return {rnd(1, 3), rnd(1, 3)} end)), chance(0.9) and "1" or wrong()}
  end
  return store("F", fmt("F.%s(%s)", f, join(args)), {"relu", "tanh", "sigmoid", "softmax", "log_softmax", "flatten"})
end)

-- ============================================================================================
-- [SECTION] optim

gen("optim_new", 3, function()
  local k = rnd(NO)
  local kind = pick({"SGD", "Adam"})
  local params
  local r = rnd(10)
  local mk = module_slot()
  if r <= 4 and mk then params = fmt("M[%d]:parameters()", mk)
  elseif r <= 6 and mk then params = fmt("M[%d]", mk)
  elseif r <= 8 then
    local list = {}
    for i = 1, rnd(1, 3) do list[i] = targ(function(o) return o.rg and o.leaf end, function() return rand_shape(), "float32", true end) end
    params = "{" .. join(list) .. "}"
  else params = pick({"{}", "nil", "5", "{1, 2}", "T[1]", "{T[1], 'x'}"}) end
  local opts
  if kind == "SGD" then
    opts = pick({"{lr = 0.01}", "{lr = 0.1, momentum = 0.9}", "{lr = 0.1, momentum = 0.9, nesterov = true}", "{lr = -1}",
                 "{}", "{lr = 'x'}", "{lr = 0.1, weight_decay = 0.01, dampening = 0.1}", "{lr = 0.1, bogus = 1}", "nil", "5",
                 "{lr = 0/0}", "{lr = 1/0}"})
  else
    opts = pick({"{lr = 1e-3}", "", "{betas = {0.9, 0.999}, eps = 1e-8}", "{betas = 5}", "{lr = -1}", "{eps = 'x'}",
                 "{weight_decay = 0.1}", "{bogus = 1}", "{betas = {}}"})
  end
  local c = call("optim." .. kind, fmt("O[%d] = optim.%s(%s%s)", k, kind, params, opts ~= "" and ", " .. opts or ""), {kind})
  c.on_ok = function() OI[k] = {kind = kind} end
  return c
end)

gen("optim_use", 6, function()
  local live_o = live_in(OI, NO)
  if #live_o == 0 then return gens.optim_new() end
  local k = pick(live_o)
  local names = {OI[k].kind, "step", "zero_grad"}
  local r = rnd(6)
  if r <= 2 then return call("optim.step", fmt("O[%d]:step()", k), names) end
  if r == 3 then return call("optim.zero_grad", fmt("O[%d]:zero_grad()", k), names) end
  if r == 4 then
    local mk = module_slot()
    if mk and MI[mk].kind ~= "loss" then
      local x = module_input(MI[mk])
      for _, n in ipairs(MI[mk].names) do names[#names + 1] = n end
      names[#names + 1] = "sum"; names[#names + 1] = "backward"
      return call("train_step", fmt("O[%d]:zero_grad(); local l = M[%d](%s):sum(); l:backward(); O[%d]:step()", k, mk, x, k), names)
    end
  end
  if r == 5 then return call("optim.step", fmt("O[%d].step(%s)", k, pick({"nil", "5", "{}"})), names) end
  return call("optim.step", fmt("for _, p in ipairs(O[%d].params) do if p.requires_grad then (p * p):sum():backward() end end; O[%d]:step()", k, k),
              {OI[k].kind, "step", "mul", "sum", "backward"})
end)

-- ============================================================================================
-- [SECTION] debugger

local OP_NAMES = {"add", "sub", "mul", "div", "pow", "tanh", "exp", "mm", "sum", "mean", "max", "relu", "sigmoid", "softmax",
                  "reshape", "clone", "linear", "conv2d", "cross_entropy", "function", "zeros", "randn", "expand", "nosuchop"}

local ACTIONS = {
  "stop.out = stop.out and stop.out * 2",
  "stop.out = torch.zeros(7)",
  "stop.out = 5",
  "if stop.grad_input and stop.grad_input[1] then stop.grad_input[1] = stop.grad_input[1] * 0 end",
  "if stop.grad_input then stop.grad_input[1] = torch.ones(9, 9) end",
  "stop.grad_input = {}",
  "dbg.step()", "dbg.stepi()", "dbg.finish()", "dbg.next()", "dbg.continue()", "dbg.abort()",
  "error('fuzz_user_error')",
  "X.s = dbg.where() .. dbg.banner()",
  "dbg.command(':graph')",
  "dbg.command(':where')",
  "X.g = torch.tape()",
  "collectgarbage()",
  "if T[1] then T[5] = T[1] + 1 end",
  "dbg.delete(1)",
  "dbg.break_on{op = 'add', action = function() end}",
  "if stop.out then X.i = dbg.inspect(stop.out) end",
  "stop.node = 5",
  "X.st = dbg.stopped()",
  "dbg.detach(); dbg.attach()",
  "if stop.inputs and stop.inputs[1] then stop.inputs[1]:mul_(2) end",
  "T[6] = nil; collectgarbage()",
  "if stop.out then stop.out:zero_() end",
}

local function action_src()
  local body = pick(ACTIONS)
  if avoid.dbg_actions then body = "X.s = dbg.where()" end
  if avoid.tape_gc and (body:find("tape") or body:find("collectgarbage")) then body = "X.s = dbg.banner()" end
  return "function(stop) " .. body .. " end"
end

gen("dbg_break", 4, function()
  local fields = {}
  local r = rnd(8)
  if r <= 3 then fields[#fields + 1] = fmt("op = %q", pick(OP_NAMES))
  elseif r == 4 then fields[#fields + 1] = fmt("fn = %q", "Fn" .. rnd(1, 9))
  elseif r == 5 then fields[#fields + 1] = "node = " .. pick({tostring(rnd(1, 500)), "-1", "2^31", "math.maxinteger", "'x'"})
  elseif r == 6 then   -- only in fuzz_call chunks: a bare line number would stop in the fuzzer's own code
    fields[#fields + 1] = "line = " .. pick({fmt("'fuzz_call_%d:1'", rnd(1, 200)), fmt("'fuzz_call_%d:2'", rnd(1, 200)),
                                              fmt("%d, file = 'fuzz_call_%d'", rnd(1, 3), rnd(1, 200)), "'nocolon'", "'f.lua:x'", "{}"})
  elseif r == 7 then fields[#fields + 1] = "bogus = 1" end
  if chance(0.5) then fields[#fields + 1] = "phase = " .. pick({"'fwd'", "'bwd'", "'both'", "'line'", "'forward'", "'nope'", "5"}) end
  if chance(0.3) then fields[#fields + 1] = "once = true" end
  if chance(0.4) then
    fields[#fields + 1] = "when = " .. pick({"'nan'", "'max > 1e3'", "'absmax > 0'", "'))('", "'t:sum():item() > 0'", "5",
      "function(t, node) return t:sum():item() > 0 end", "function() error('fuzz_user_error') end", "function(t) t:mul_(2) return true end"})
  end
  if chance(0.7) or avoid.dbg_actions then fields[#fields + 1] = "action = " .. (chance(0.95) and action_src() or "5") end
  return call("break_on", "BP[#BP + 1] = dbg.break_on{" .. join(fields) .. "}", {"break_on", "dbg.break_on"})
end)

gen("dbg_misc", 4, function()
  local r = rnd(16)
  if r == 1 then return call("breaks", "for _, b in ipairs(dbg.breaks()) do X.s = b.description; if b.hits > 3 then dbg.delete(b.id) end end",
                             {"breaks", "delete"}) end
  if r == 2 then return call("delete", "for _, b in ipairs(dbg.breaks()) do dbg.delete(b.id) end; BP = {}", {"breaks", "delete"}) end
  if r == 3 then
    local f = pick({"delete", "disable", "enable"})
    local id = pick({"BP[#BP]", "1", "0", "-1", "'x'", "2^31", "math.maxinteger", "nil"})
    return call(f, fmt("X.v = dbg.%s(%s)", f, id), {f})
  end
  if r == 4 then
    local f = pick({"step", "stepi", "next", "finish", "abort", "continue"})
    return call(f, fmt("dbg.%s()", f), {f})
  end
  if r == 5 then   -- stops at the next line of this chunk, where the on_stop handler (or an action) runs
    local x = targ()
    return call("pause", "dbg.pause()" .. (chance(0.3) and "; dbg.continue()" or "") .. "\nT[5] = " .. x .. " * 2\nX.v = 1",
                {"pause", "continue", "mul"}, {5})
  end
  if r == 6 then
    local h = chance(0.9) and action_src() or pick({"5", "nil"})
    -- With no handler a stop would prompt, and stdin is empty: input ending at a stop quits the
    -- program (docs/debugger.md), which ends the run. Taking the handler away is tried; a no-op
    -- handler comes back at once.
    local restore = h == "nil" and "; dbg.on_stop(function() end)" or ""
    return call("on_stop", "dbg.on_stop(" .. h .. ")" .. restore, {"on_stop"})
  end
  if r == 7 then return call("stopped", "X.v = dbg.stopped()", {"stopped"}) end
  if r == 8 then return call("where", "X.s = dbg.where() .. dbg.banner()", {"where", "banner"}) end
  if r == 9 then
    local bins = chance(0.7) and "" or ", " .. pick({"1", "0", "-1", "1.5", "2^32", "math.maxinteger", "2^31", "math.mininteger", "'x'"})
    return call("inspect", "X.i = dbg.inspect(" .. (chance(0.9) and (targ()) or wrong()) .. bins .. ")", {"inspect"})
  end
  if r == 10 then
    return call("watch", "X.w = dbg.watch(" .. pick({"'T[1]'", "'))('", "'1 + 1'", "'error(\"fuzz_user_error\")'", "5", "nil"}) .. ")", {"watch"})
  end
  if r == 11 then return call("unwatch", "X.v = dbg.unwatch(" .. pick({"X.w or 1", "0", "-1", "'x'", "2^31"}) .. ")", {"unwatch"}) end
  if r == 12 then
    local c = pick({":graph", ":breaks", ":where", ":help", ":graph T[1]", ":inspect T[1]", ":nosuch", ":break ))(", ":break bwd tanh",
                    ":delete 99", ":watch ))(", ":plan Z", ":break if nan", ":unwatch 1", ":step", ":continue", ":break node 3",
                    "", ":", ":inspect", ":break", ":delete", ":timeit", ":freeze"})
    return call("command", fmt("dbg.command(%q)", c), {"command"})
  end
  if r == 13 then
    local body = pick({"return torch.ones(2) + 1", "error('fuzz_user_error')", "return (", "local x = ...; return x",
                       "T[7] = torch.randn(2, 2):tanh()"})
    return call("run", fmt("local o = io.open(PATH('s.lua'), 'w'); o:write(%q); o:close(); X.v = dbg.run(PATH('s.lua'), 1, 2)", body),
                {"run", "fuzz_user_error", "add"})
  end
  if r == 14 then return call("run", "dbg.run(" .. pick({"'/nonexistent.lua'", "nil", "5"}) .. ")", {"run"}) end
  if r == 15 then return call("attach", pick({"dbg.detach()", "dbg.attach()", "X.v = dbg.attached()", "dbg.detach(); dbg.attach()"}),
                              {"attach", "detach", "attached"}) end
  return call("break_on", "BP[#BP + 1] = dbg.break_on(" .. wrong() .. ")", {"break_on", "dbg.break_on"})
end)

-- ============================================================================================
-- [SECTION] message accounting

local stats = {calls = 0, errors = 0, named = 0, located = 0, oneline = 0, oracle = 0, lua_errors = 0, gen_errors = 0,
               escaped = 0}
local offenders = {}   -- key -> {count, kind, fails, normalized, example}
local current          -- the call being run

local function normalize(msg)
  msg = msg:gsub("fuzz_call_%d+:%d+", "CALL:N")
  msg = msg:gsub("/tmp/lua_%w+", "TMP")
  msg = msg:gsub("0x%x+", "ADDR")
  msg = msg:gsub("%[[%d,%-]*%]", "[S]")
  msg = msg:gsub("#%d+", "#N")
  msg = msg:gsub("%-?%d+%.?%d*e?[%+%-]?%d*", "N")
  msg = msg:gsub("\n.*", " ...")
  if #msg > 160 then msg = msg:sub(1, 160) .. "..." end
  return msg
end

-- Lua's own messages for mistakes in the generated code, not the API's (not counted).
local function is_lua_core_error(msg)
  return msg:find("attempt to index a %w+ value") or msg:find("attempt to call a %w+ value") or
         msg:find("attempt to perform arithmetic on a %w+ value") or msg:find("attempt to concatenate a %w+ value") or
         msg:find("attempt to compare") or msg:find("attempt to get length of a %w+ value") or
         msg:find("'for' initial value must be a number")
end

local function names_function(msg, names)
  for _, name in ipairs(names) do
    if #name <= 2 then   -- "ne: ...", or as the library names it: "torch.ne: ...", "x:to: ..."
      for _, form in ipairs({name, "torch." .. name, "x:" .. name}) do
        if msg:sub(1, #form + 1) == form .. ":" then return true end
      end
    elseif name:find("%%d") then
      if msg:find(name) then return true end
    else
      local plain = name:gsub("([%.%-%+%*%?%[%]%^%$%(%)%%])", "%%%1")
      if msg:find("%f[%w_]" .. plain .. "%f[^%w_]") then return true end
    end
  end
  return false
end

-- Whether msg carries a user's line: "(fuzz_call_12:1)" at its end (the bindings' form),
-- "fuzz_call_12:1:" (Lua's error()), or fuzz_call_12:1 anywhere else except inside a frozen
-- function's default name "function (fuzz_call_3:1)" (where it was defined, not where it failed).
local function is_located(msg)
  if msg:find("%(fuzz_call_%d+:%d+%)%s*$") or msg:find("^fuzz_call_%d+:%d+:") then return true end
  if msg:find("^/[^:]*_s%.lua:%d+:") then return true end   -- an error of a dbg.run script, at its line
  return msg:gsub("function %(fuzz_call_%d+:%d+%)", ""):find("fuzz_call_%d+:%d+") ~= nil
end

local findings = {}

function APIFUZZ_ORACLE(n, what)
  stats.oracle = stats.oracle + 1
  local line = fmt("APIFUZZ_FINDING oracle call %d (%s): %s", n, current and current.kind or "?", what)
  findings[#findings + 1] = line
  io.stderr:write(line, "\n")
end

function APIFUZZ_RESULT(n, ok, err)
  if ok or not current then return end
  local msg = type(err) == "string" and err or ("(error object is a " .. type(err) .. ": " .. tostring(err) .. ")")
  if msg:find("^APIFUZZ generated code does not compile") then
    stats.gen_errors = stats.gen_errors + 1
    io.stderr:write("api_fuzz: BUG in the generator, call ", n, ": ", msg, "\n", current.src, "\n")
    return
  end
  if is_lua_core_error(msg) and msg:find("^fuzz_call_%d+:%d+: ") then
    stats.lua_errors = stats.lua_errors + 1
    return
  end
  stats.errors = stats.errors + 1
  -- a breakpoint action's dbg.abort() ends whatever call is running, with the debugger's message;
  -- the user's own error() (from a callback, or a wrong argument's __index) is the user's message
  local named = #current.names == 0 or names_function(msg, current.names) or
                msg:find("abandoned at a debugger stop (", 1, true) or msg:find("fuzz_user_error", 1, true)
  local located = is_located(msg)
  local oneline = not msg:find("\n") and not msg:find("stack traceback")
  if named then stats.named = stats.named + 1 end
  if located then stats.located = stats.located + 1 end
  if oneline then stats.oneline = stats.oneline + 1 end
  if not (named and located and oneline) then
    local fails = {}
    if not named then fails[#fails + 1] = "name" end
    if not located then fails[#fails + 1] = "line" end
    if not oneline then fails[#fails + 1] = "oneline" end
    local f = join(fails, "+")
    local norm = normalize(msg)
    local key = current.kind .. "\t" .. f .. "\t" .. norm
    local o = offenders[key]
    if not o then
      o = {count = 0, kind = current.kind, fails = f, norm = norm,
           example = msg:gsub("\n", "\\n"):sub(1, 300) .. "  <= " .. current.src:gsub("\n", " "):sub(1, 200) ..
                     (named and "" or "  [accepted: " .. join(current.names, " ") .. "]")}
      offenders[key] = o
    end
    o.count = o.count + 1
  end
end

-- ============================================================================================
-- [SECTION] main loop

local log
if opt.log then
  log = assert(io.open(opt.log, "w"))
  log:write("-- api_fuzz log: seed ", opt.seed, ", gc ", opt.gc, ", avoid ",
            (function() local a = {} for k in pairs(avoid) do a[#a + 1] = k end table.sort(a) return join(a, ",") end)(), "\n")
end
local runtime = RUNTIME:gsub("@SEED@", tostring(opt.seed)):gsub("@GC@", opt.gc)
if log then
  log:write(runtime, "\n-- the calls\n")
  log:flush()
end
assert(load(runtime, "=apifuzz_runtime"))()

local started = os.time()
local n = 0
while n < opt.calls do
  if opt.seconds and os.difftime(os.time(), started) >= opt.seconds then break end
  n = n + 1
  local name = wpick(weights)
  no_huge_wrong = false
  local c, frozen_k = gens[name]()
  current = c
  local slots = {}
  for i, s in ipairs(c.slots) do slots[i] = tostring(s) end
  local line = fmt("C(%d, %q, {%s})\n", n, c.src, join(slots))
  line = line:gsub("\\\n", "\\n")
  if log then
    log:write(line)
    log:flush()
  end
  stats.calls = n
  local errors_before = stats.errors + stats.lua_errors
  local escaped_ok, escaped = pcall(C, n, c.src, c.slots)
  if not escaped_ok then   -- an error raised outside the call's pcall (a stop in the runtime's lines)
    stats.escaped = stats.escaped + 1
    io.stderr:write("api_fuzz: call ", n, ": an error escaped the call: ", tostring(escaped), "\n")
  end
  local failed = stats.errors + stats.lua_errors > errors_before
  if not failed and c.on_ok then c.on_ok() end
  -- keep the generator's view in step with what the call left behind
  for i = 1, NM do if MI[i] and M[i] == nil then MI[i] = nil end end
  for i = 1, NZ do if ZI[i] and Z[i] == nil then ZI[i] = nil end end
  for i = 1, NF do if FI[i] and FN[i] == nil then FI[i] = nil end end
  for i = 1, NO do if OI[i] and O[i] == nil then OI[i] = nil end end
  if c.kind == "frozen_call" and frozen_k then last_call_failed[frozen_k] = failed end
  current = nil
end
if log then
  log:write("APIFUZZ_CLEANUP()\n")
  log:close()
end
APIFUZZ_CLEANUP()
pcall(dbg and dbg.on_stop or function() end, function() end)

-- ============================================================================================
-- [SECTION] summary

local seconds = os.difftime(os.time(), started)
local function pct(a, b) return b == 0 and 100 or 100 * a / b end
local groups = {}
for _, o in pairs(offenders) do groups[#groups + 1] = o end
table.sort(groups, function(a, b) if a.count ~= b.count then return a.count > b.count end return a.norm < b.norm end)
if not opt.quiet then
  print(fmt("api_fuzz: seed %d: %d calls in %d s, %d errors (%.1f%% of calls)", opt.seed, stats.calls, seconds, stats.errors,
            pct(stats.errors, stats.calls)))
  print(fmt("  errors naming the function: %d (%.2f%%)   with the user's file:line: %d (%.2f%%)   one line: %d (%.2f%%)",
            stats.named, pct(stats.named, stats.errors), stats.located, pct(stats.located, stats.errors), stats.oneline,
            pct(stats.oneline, stats.errors)))
  print(fmt("  not counted: %d Lua errors of the generated code itself, %d generator bugs, %d errors that escaped a call; " ..
            "oracle findings: %d", stats.lua_errors, stats.gen_errors, stats.escaped, stats.oracle))
  if #groups > 0 then
    print("  offending messages (count, call kind, failed checks, message; top 30):")
    for i = 1, math.min(30, #groups) do
      local o = groups[i]
      print(fmt("  %5d  %-16s %-14s %s", o.count, o.kind, o.fails, o.example))
    end
  end
end
print(fmt("APIFUZZ_SUMMARY seed=%d calls=%d errors=%d named=%d located=%d oneline=%d oracle=%d gen_errors=%d seconds=%d",
          opt.seed, stats.calls, stats.errors, stats.named, stats.located, stats.oneline, stats.oracle, stats.gen_errors, seconds))
if opt.report then
  local r = assert(io.open(opt.report, "a"))
  for _, o in ipairs(groups) do
    r:write(fmt("%d\t%s\t%s\t%s\t%s\n", o.count, o.kind, o.fails, o.norm:gsub("\t", " "), o.example:gsub("\t", " ")))
  end
  r:close()
end
local unnamed = stats.errors - stats.named
if stats.gen_errors > 0 then os.exit(2, true) end
if opt.strict and unnamed > 0 then os.exit(1, true) end
