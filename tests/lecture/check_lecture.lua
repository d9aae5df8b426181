-- check_lecture.lua: runs one lecture script through tapedeck and checks what it prints.
--   tapedeck check_lecture.lua <tapedeck> <scripts dir> <script name> [script args...]
-- Each script's expectations are below: lines it must print (Lua patterns) and, for training
-- scripts, that the printed loss falls. A failed check raises an error (the test fails).
local tapedeck, scripts_dir, name = arg[1], arg[2], arg[3]
local script_args = {}
for i = 4, #arg do script_args[#script_args + 1] = arg[i] end

local function shell_quote(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end
local command = shell_quote(tapedeck) .. " " .. shell_quote(scripts_dir .. "/" .. name)
for _, a in ipairs(script_args) do command = command .. " " .. shell_quote(a) end
local pipe = assert(io.popen(command .. " 2>&1"))
local output = pipe:read("a")
local ok, _, status = pipe:close()
io.write(output)
if not ok then error(name .. " exited with status " .. tostring(status)) end

local function must_print(pattern)
  if not output:find(pattern) then error(name .. " did not print a line matching: " .. pattern) end
end

-- The losses printed as "loss <number>", in order; the last must be well below the first.
local function loss_falls(factor)
  local losses = {}
  for value in output:gmatch("loss%s+([%d%.e%+%-]+)") do losses[#losses + 1] = tonumber(value) end
  if #losses < 2 then error(name .. " printed fewer than two losses") end
  if not (losses[#losses] < losses[1] * factor) then
    error(("%s: the loss went from %g to %g, expected below %g x the first"):format(name, losses[1],
          losses[#losses], factor))
  end
end

local expectations = {
  ["scalar.lua"] = function()
    must_print("c = 300") must_print("respect to a = 20") must_print("respect to b = 15")
  end,
  ["numpy_vs_torch.lua"] = function() must_print("hand%-written and autograd gradients agree") end,
  ["rnn_cell.lua"] = function() must_print("loss%s+%-?%d") must_print("|dloss/dW_h|") end,
  ["rnn_unrolled.lua"] = function()
    must_print("steps%s+" .. (script_args[1] or "50")) must_print("|dloss/dW_x|") must_print("graph%s+%d+ nodes")
  end,
  ["two_layer_net.lua"] = function() loss_falls(0.01) end,
  ["two_layer_net_manual.lua"] = function() loss_falls(0.01) end,
  ["two_layer_net_nn.lua"] = function() must_print("Sequential%(") loss_falls(0.9) end,
  ["custom_relu.lua"] = function() loss_falls(0.01) end,
  ["parallel_block.lua"] = function() must_print("ParallelBlock%(") loss_falls(0.9) end,
  ["sigmoid_neuron.lua"] = function()
    must_print("f%(w, x%) = 0%.1192") must_print("df/dw0 = %-0%.1050") must_print("df/dx0 =  0%.1050")
    must_print("df/dw1 =  0%.1050") must_print("df/dx1 = %-0%.2100") must_print("df/dw2 =  0%.1050")
    must_print("exp%s+7%.3891%s+%-0%.0142")
  end,
  ["conv_homework.lua"] = function()
    must_print("conv %(stride 2%)") must_print("%[%[%s*1%.?%d*,%s*%-2") must_print("max%-pool:%s*3")
  end,
  ["svm_softmax.lua"] = function()
    must_print("example 1: 1%.5000") must_print("example 2: 1%.4000") must_print("example 3: 0%.9000")
    must_print("SVM loss %(lecture: mean of L_i%)%s+= 1%.2667") must_print("softmax loss = 0%.8386")
  end,
  ["small_cnn.lua"] = function() loss_falls(0.95) end,
}
local check = expectations[name]
if not check then error("no expectations for " .. name .. " in check_lecture.lua") end
check()
print("check_lecture: " .. name .. " ok")
