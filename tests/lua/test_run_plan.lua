-- `tapedeck run-plan`: a saved plan runs on .npy inputs and writes its results; hostile inputs (a
-- .npy of the wrong shape or dtype, a missing file, inputs a plan does not take, a plan file that
-- is not one, a memory bound too small) are each a clear error naming run-plan or the loader.
local check = dofile((arg[0]:match("^(.*[/\\])") or "") .. "check.lua")
local tapedeck = assert(arg[-1], "the tapedeck program (arg[-1])")
local dir = (os.getenv("TMPDIR") or "/tmp") .. "/tapedeck_run_plan_" .. tostring(os.time()) .. "_" .. tostring(math.random(1e9))
assert(os.execute("mkdir -p '" .. dir .. "'"))

-- Runs `tapedeck run-plan args`: its output (stdout and stderr) and exit status.
local function run_plan(args)
  local pipe = assert(io.popen("'" .. tapedeck .. "' run-plan " .. args .. " 2>&1; echo \"rc=$?\""))
  local out = pipe:read("a")
  pipe:close()
  local rc = tonumber(out:match("rc=(%d+)%s*$"))
  return out:gsub("rc=%d+%s*$", ""), rc
end

local function fails_with(args, rc, text)
  local out, got = run_plan(args)
  assert(got == rc, ("run-plan %s: exit status %s, expected %d\n%s"):format(args, tostring(got), rc, out))
  assert(out:find(text, 1, true), ("run-plan %s: expected %q in\n%s"):format(args, text, out))
end

torch.manual_seed(5)
local w = torch.randn(32, 2, {requires_grad = true})
local function step(x, y)
  local loss = ((x:mm(w) - y):pow(2)):sum()
  loss:backward()
  return loss
end
local x, y = torch.randn(64, 32), torch.randn(64, 2)   -- the file is small, the values not
local f = torch.freeze(step, x, y)
local plan = dir .. "/step.tdp"
torch.save_plan(f, plan)
torch.save_npy(x, dir .. "/x.npy")
torch.save_npy(y, dir .. "/y.npy")
torch.save_npy(torch.randn(3, 3), dir .. "/wrong_shape.npy")
torch.save_npy(x:double(), dir .. "/wrong_dtype.npy")

-- It runs, and writes what the function returned and the gradient it accumulated.
w.grad = nil
local expected = step(x, y)
local out, rc = run_plan(("'%s' --input x='%s/x.npy' --input y='%s/y.npy' --out '%s/out'"):format(plan, dir, dir, dir))
assert(rc == 0, out)
check.close(torch.load_npy(dir .. "/out/output1.npy"), expected, 1e-5, "run-plan's result")
check.close(torch.load_npy(dir .. "/out/w.grad.npy"), w.grad, 1e-5, "run-plan's gradient")

-- Hostile inputs.
local inputs = ("--input x='%s/x.npy' --input y='%s/y.npy'"):format(dir, dir)
fails_with(("'%s' --input x='%s/wrong_shape.npy' --input y='%s/y.npy'"):format(plan, dir, dir), 1,
           "run-plan: input 1 (x) must be float32 [64,32], but " .. dir .. "/wrong_shape.npy holds float32 [3,3]")
fails_with(("'%s' --input x='%s/wrong_dtype.npy' --input y='%s/y.npy'"):format(plan, dir, dir), 1,
           "run-plan: input 1 (x) must be float32 [64,32], but " .. dir .. "/wrong_dtype.npy holds float64 [64,32]")
fails_with(("'%s' --input x='%s/missing.npy' --input y='%s/y.npy'"):format(plan, dir, dir), 1,
           "run-plan: input 1 (x): load_npy: cannot open " .. dir .. "/missing.npy: No such file or directory")
fails_with(("'%s' --input y='%s/y.npy'"):format(plan, dir), 1,
           "run-plan: input 1 (x, float32 [64,32]) is missing: give --input x=file.npy")
fails_with(("'%s' %s --input x='%s/x.npy'"):format(plan, inputs, dir), 1, "run-plan: input 1 (x) is given twice")
fails_with(("'%s' %s --input z='%s/x.npy'"):format(plan, inputs, dir), 1, "run-plan: the plan has no input 'z' (its inputs: x y)")
fails_with(("'%s' '%s/x.npy' '%s/y.npy' '%s/y.npy'"):format(plan, dir, dir, dir), 2, "unknown argument")
fails_with(("'%s/missing.tdp' %s"):format(dir, inputs), 1, "load_plan: cannot open " .. dir .. "/missing.tdp")
fails_with(("'%s/x.npy' %s"):format(dir, inputs), 1, "load_plan: " .. dir .. "/x.npy: not a tapedeck plan file")
fails_with(("'%s' %s --max-bytes 100"):format(plan, inputs), 1, "the file is larger than the bound of 100 bytes")
fails_with(("'%s' %s --max-bytes 5K"):format(plan, inputs), 1, "the bound is 5120 bytes")
fails_with(("'%s' %s --max-bytes lots"):format(plan, inputs), 2, "--max-bytes needs a positive number of bytes")
fails_with(("'%s' %s --max-bytes"):format(plan, inputs), 2, "--max-bytes needs a value")
out, rc = run_plan(("'%s' %s --max-bytes 64M --out '%s/out2'"):format(plan, inputs, dir))
assert(rc == 0, out)

-- A plan with no inputs runs without any, and refuses one; one recorded under no_grad runs too.
local constant = torch.freeze(function() return torch.ones(2, 2):sum() end)
torch.save_plan(constant, dir .. "/constant.tdp")
out, rc = run_plan(("'%s/constant.tdp' --out '%s/out3'"):format(dir, dir))
assert(rc == 0, out)
check.close(torch.load_npy(dir .. "/out3/output1.npy"), torch.tensor(4.0), 0, "a plan with no inputs")
fails_with(("'%s/constant.tdp' --input '%s/x.npy'"):format(dir, dir), 1, "run-plan: more inputs given than the plan takes (0)")
fails_with(("'%s/constant.tdp' --input x='%s/x.npy'"):format(dir, dir), 1, "run-plan: the plan has no input 'x' (its inputs: none)")
local no_grad = torch.no_grad(function() return torch.freeze(function(a) return a * 2 end, x) end)
torch.save_plan(no_grad, dir .. "/no_grad.tdp")
out, rc = run_plan(("'%s/no_grad.tdp' --input '%s/x.npy' --out '%s/out4'"):format(dir, dir, dir))
assert(rc == 0, out)
check.close(torch.load_npy(dir .. "/out4/output1.npy"), x * 2, 0, "a plan recorded under no_grad")

-- An input that requires grad is given one that does.
local needs_grad = torch.freeze(function(a) local s = (a * a):sum(); s:backward(); return s end,
                                torch.randn(3, {requires_grad = true}))
torch.save_plan(needs_grad, dir .. "/needs_grad.tdp")
torch.save_npy(torch.ones(3), dir .. "/ones3.npy")
out, rc = run_plan(("'%s/needs_grad.tdp' --input '%s/ones3.npy' --out '%s/out5'"):format(dir, dir, dir))
assert(rc == 0, out)
check.close(torch.load_npy(dir .. "/out5/output1.npy"), torch.tensor(3.0), 0, "an input that requires grad")

os.execute("rm -rf '" .. dir .. "'")
print("run-plan: ok")
