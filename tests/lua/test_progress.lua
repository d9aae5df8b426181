-- The progress line of the model scripts (require "tapedeck.progress") and their options
-- (require "tapedeck.args"): what is printed on a terminal (rewritten in place) and elsewhere
-- (plain lines every `every` steps), steps/s and ETA from a fake clock, auto-detection of a
-- terminal (a pipe is not one; under `script`, a pseudo-terminal, it is), and the errors.
local check = dofile((arg[0]:match("^(.*[/\\])") or "") .. "check.lua")
local progress = require "tapedeck.progress"
local args = require "tapedeck.args"

-- An `out` that keeps what is written, and a clock that says what the test sets.
local function recorder()
  local r = {text = ""}
  function r:write(...) for _, s in ipairs({...}) do self.text = self.text .. s end end
  return r
end
local now = 0
local function clock() return now end

-- Not a terminal: a line every 5 steps and the last step; 2 steps a second, so ETA = remaining / 2.
local out = recorder()
now = 100
local bar = progress.new{total = 12, every = 5, out = out, terminal = false, clock = clock}
for step = 1, 12 do
  now = 100 + step / 2
  bar:update(step, {loss = 1 / step, acc = step})
end
bar:close()
check.equal(out.text, "step 5/12  acc 5  loss 0.2  2.0 steps/s  ETA 0m04s\n" ..
                      "step 10/12  acc 10  loss 0.1  2.0 steps/s  ETA 0m01s\n" ..
                      "step 12/12  acc 12  loss 0.08333  2.0 steps/s  ETA 0m00s\n", "plain lines")

-- Stopped early (no total reached): close prints the last step once; a tensor value shows its item.
out = recorder()
now = 0
bar = progress.new{every = 2, out = out, terminal = false, clock = clock, label = "eval"}
for step = 1, 3 do now = step * 10; bar:update(step, {loss = torch.tensor({0.5})}) end
bar:close()
bar:close()
check.equal(out.text, "eval step 2  loss 0.5  0.1 steps/s\neval step 3  loss 0.5  0.1 steps/s\n", "no total, close")

-- A terminal: each redraw starts with \r and blanks the rest of a longer line; redraws at most
-- every 0.05 s and always at the last step; close ends the line.
out = recorder()
now = 0
bar = progress.new{total = 3, out = out, terminal = true, clock = clock}
now = 1; bar:update(1, {loss = 10.5})
now = 1.01; bar:update(2, {loss = 2})     -- too soon: not drawn
now = 3; bar:update(3, {loss = 1})
bar:close()
check.equal(out.text, "\rstep 1/3  loss 10.5  1.0 steps/s  ETA 0m02s" ..
                      "\rstep 3/3  loss 1  1.0 steps/s  ETA 0m00s   \n", "terminal redraws")

-- Minutes and hours in the ETA.
out = recorder()
now = 0
bar = progress.new{total = 100000, every = 1, out = out, terminal = false, clock = clock}
now = 1; bar:update(1)
check.equal(out.text, "step 1/100000  1.0 steps/s  ETA 27h46m\n", "long ETA")

-- Auto-detection: a pipe is not a terminal, so a child tapedeck prints plain lines.
local tapedeck = arg[-1]
local script = os.tmpname()
local f = assert(io.open(script, "w"))
f:write([[local bar = require("tapedeck.progress").new{total = 4, every = 2}
for i = 1, 4 do bar:update(i, {loss = i}) end
bar:close()
print(require("tapedeck.progress").isatty())]])
f:close()
local child = assert(io.popen(string.format("%q %q", tapedeck, script)))
local piped = child:read("a")
child:close()
check.equal(piped:find("\r", 1, true), nil, "piped: no carriage return")
check.equal(select(2, piped:gsub("\n", "")), 3, "piped: two progress lines and isatty's")
check.equal(piped:match("(%a+)\n$"), "false", "piped: isatty() is false")
-- Under `script` (util-linux), stdout is a pseudo-terminal: the line is rewritten in place.
if os.execute("command -v script > /dev/null 2>&1") then
  local pty = assert(io.popen(string.format("script -q -c %q /dev/null < /dev/null",
                                            string.format("%q %q", tapedeck, script))))
  local shown = pty:read("a")
  pty:close()
  check.equal(shown:find("\rstep 4/4  loss 4", 1, true) ~= nil, true, "terminal: the line is rewritten in place")
  check.equal(shown:match("(%a+)%s*$"), "true", "terminal: isatty() is true")
else
  print("test_progress: `script` not found, terminal auto-detection not checked")
end
os.remove(script)
check.equal(progress.isatty(io.stderr) == true or progress.isatty(io.stderr) == false, true, "isatty(io.stderr)")

-- Errors name the function and the user's line.
check.fails("progress.new", "total must be an integer >= 1, got 0", function() progress.new{total = 0} end)
check.fails("progress.new", "every must be an integer >= 1, got 1.5", function() progress.new{every = 1.5} end)
check.fails("progress.new", "unknown option 'totl' (did you mean 'total'?", function() progress.new{totl = 5} end)
check.fails("progress.new", "options must be a table", function() progress.new(5) end)
check.fails("progress.isatty", "expected an open file such as io.stdout, got \"x\"", function() progress.isatty("x") end)
bar = progress.new{total = 2, out = recorder(), terminal = false}
check.fails("update", "step must be an integer, got 1.5", function() bar:update(1.5) end)
check.fails("update", "loss must be a number or a 1-element tensor, got \"x\"", function() bar:update(1, {loss = "x"}) end)
check.fails("update", "a tensor of shape [2]", function() bar:update(1, {loss = torch.zeros(2)}) end)
check.fails("update", "call it as bar:update(step, values)", function() bar.update(1, 2) end)
bar:close()
check.fails("update", "the progress line was closed", function() bar:update(2) end)

-- tapedeck.args: flags, integers (--steps 5 and --steps=5), numbers, strings, dashes for underscores.
local defaults = {steps = 100, freeze = false, lr = 0.1, out = "a.png", hidden_size = 8}
local o = args.parse(defaults, {})
check.equal(o.steps, 100, "default steps")
check.equal(o.freeze, false, "default freeze")
o = args.parse(defaults, {"--steps", "5", "--freeze", "--lr=0.5", "--out", "b.png", "--hidden-size", "4"})
check.equal(math.type(o.steps) == "integer" and o.steps, 5, "--steps 5")
check.equal(o.freeze, true, "--freeze")
check.equal(o.lr, 0.5, "--lr=0.5")
check.equal(o.out, "b.png", "--out")
check.equal(o.hidden_size, 4, "--hidden-size")
check.equal(defaults.steps, 100, "the defaults are not changed")
check.equal(args.parse({steps = 7}, {"--steps=9"}).steps, 9, "--steps=9")
local options_text = "(options: --freeze, --hidden_size N, --lr X, --out TEXT, --steps N)"
check.fails("args", "unknown argument \"--step\" " .. options_text, function() args.parse(defaults, {"--step", "5"}) end)
check.fails("args", "--steps must be an integer, got \"1.5\"", function() args.parse(defaults, {"--steps", "1.5"}) end)
check.fails("args", "--steps needs a value", function() args.parse(defaults, {"--steps"}) end)
check.fails("args", "--lr must be a number, got \"fast\"", function() args.parse(defaults, {"--lr", "fast"}) end)
check.fails("args", "--freeze is a flag and takes no value", function() args.parse(defaults, {"--freeze=yes"}) end)
check.fails("args", "unknown argument \"extra\"", function() args.parse(defaults, {"extra"}) end)
check.fails("args", "each default is name = boolean, number or string", function() args.parse({steps = {}}, {}) end)
-- The global arg by default: this test was started with no arguments.
check.equal(args.parse{steps = 3}.steps, 3, "reads the global arg")

print("test_progress: ok")
