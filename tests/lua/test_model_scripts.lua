-- The model scripts run as a user runs them (a child tapedeck, stdout a pipe): spiral_mlp reaches
-- >= 98% training accuracy at its default --steps and writes its PNG; with --freeze both scripts
-- print the same losses and accuracies as eager (a replayed step rounds as eager's); the progress
-- line prints plain lines (not a terminal); a bad option is an error naming it.
local check = dofile((arg[0]:match("^(.*[/\\])") or "") .. "check.lua")
local here = arg[0]:match("^(.*[/\\])") or "./"
local models = here .. "../../scripts/models/"
local tapedeck = arg[-1]

-- The output (stdout and stderr) and whether the command succeeded.
local function run(script, options)
  local pipe = assert(io.popen(string.format("%q %q %s 2>&1", tapedeck, models .. script, options)))
  local text = pipe:read("a")
  local ok = pipe:close()
  return text, ok
end

local png = os.tmpname() .. ".png"
local eager, ok = run("spiral_mlp.lua", "--out " .. png)
check.equal(ok, true, "spiral_mlp runs:\n" .. eager)
local accuracy = tonumber(eager:match("training accuracy: ([%d.]+)%%"))
check.equal(accuracy ~= nil and accuracy >= 98, true, "spiral_mlp: accuracy >= 98% at the default steps, got " .. tostring(accuracy))
check.equal(eager:find("step 1000/1000  loss", 1, true) ~= nil, true, "spiral_mlp: the progress line's last step")
check.equal(eager:find("\r", 1, true), nil, "spiral_mlp: plain lines on a pipe")
local f = assert(io.open(png, "rb"))
local header = f:read(24)
f:close()
os.remove(png)
check.equal(header:sub(1, 8), "\137PNG\r\n\26\n", "spiral_mlp: a PNG file")
check.equal(string.unpack(">I4>I4", header, 17), 320, "spiral_mlp: 320 pixels wide")

-- --freeze: the same losses (4 significant digits, every 100 steps) and the same accuracy.
local function losses_and_results(text)
  return (text:gsub("step (%d+/%d+)  loss (%S+)  [%d.]+ steps/s  ETA %S+", "step %1 loss %2"):gsub("decision regions written to %S+", ""))
end
local frozen = run("spiral_mlp.lua", "--freeze --out " .. png)
os.remove(png)
check.equal(losses_and_results(frozen), losses_and_results(eager), "spiral_mlp --freeze: the same output as eager")

local shapes_eager, shapes_ok = run("shapes_cnn.lua", "--steps 40")
check.equal(shapes_ok, true, "shapes_cnn runs:\n" .. shapes_eager)
check.equal(shapes_eager:find("eval mode:  train accuracy [%d.]+%%, test accuracy [%d.]+%%") ~= nil, true, "shapes_cnn: eval accuracy")
check.equal(shapes_eager:find("train mode: test accuracy [%d.]+%%") ~= nil, true, "shapes_cnn: train-mode accuracy")
check.equal(losses_and_results(run("shapes_cnn.lua", "--steps 40 --freeze")), losses_and_results(shapes_eager),
            "shapes_cnn --freeze: the same output as eager")

local message, bad_ok = run("shapes_cnn.lua", "--step 3")
check.equal(bad_ok, nil, "an unknown option fails")
check.equal(message:find("args: unknown argument \"--step\" (options: --freeze, --steps N)", 1, true) ~= nil, true,
            "the error names the argument:\n" .. message)

print("test_model_scripts: ok")
