-- progress.lua: the progress line of a training loop (as tqdm's), require "tapedeck.progress".
--
--   local progress = require "tapedeck.progress"
--   local bar = progress.new{total = steps}
--   for step = 1, steps do
--     local loss = train_step(x, y)
--     bar:update(step, {loss = loss})     -- numbers or 1-element tensors, shown in key order
--   end
--   bar:close()
--
-- On a terminal the line is rewritten in place (a carriage return; at most 20 redraws a second):
--   step 1200/2000  loss 0.0412  873.1 steps/s  ETA 0m01s
-- When stdout is not a terminal (a pipe, a log file, a test) the same text is printed as plain
-- lines, one every `every` steps (default: a tenth of total) and one for the last step, so logs
-- stay short and readable.
-- Embedded in tapedeck (no global); the C side gives it isatty (require "tapedeck.terminal").
local progress = {}

local errors = require "tapedeck.errors"
local terminal = require "tapedeck.terminal"
local fail, describe = errors.fail, errors.describe

local REDRAW_SECONDS = 0.05   -- a terminal line is redrawn at most this often (and at the last step)

-- Whether `file` (io.stdout when nil; io.stderr, an open file) is a terminal.
function progress.isatty(file)
  file = file or io.stdout
  if io.type(file) ~= "file" then fail("progress.isatty: expected an open file such as io.stdout, got " .. describe(file)) end
  return terminal.isatty(file)
end

local Bar = {}
Bar.__index = Bar

local function is_count(v, min) return math.type(v) == "integer" and v >= min end

local OPTION_KEYS = "total every label out terminal clock"
torch._options.declare("progress.new", OPTION_KEYS)

-- progress.new{total = N, every = K, label = "train", out = io.stdout, terminal = bool, clock = fn}
--   total     the last step (an integer >= 1), for "step i/N" and the ETA; nil: no ETA
--   every     when not on a terminal: print every K-th step (default: total / 10, at least 1)
--   label     a word in front of the line ("train step 10/100 ...")
--   out       where to write (anything with :write(...), default io.stdout)
--   terminal  rewrite in place (true) or print lines (false); default: whether `out` is a terminal
--   clock     a function returning seconds (default torch.perf_counter), for tests
function progress.new(opts)
  opts = opts or {}
  if type(opts) ~= "table" then fail("progress.new: options must be a table ({total = 100}), got " .. describe(opts)) end
  torch._options.check("progress.new", opts, OPTION_KEYS)
  if opts.total ~= nil and not is_count(opts.total, 1) then
    fail("progress.new: total must be an integer >= 1, got " .. describe(opts.total))
  end
  if opts.every ~= nil and not is_count(opts.every, 1) then
    fail("progress.new: every must be an integer >= 1, got " .. describe(opts.every))
  end
  if opts.label ~= nil and type(opts.label) ~= "string" then
    fail("progress.new: label must be a string, got " .. describe(opts.label))
  end
  if opts.clock ~= nil and type(opts.clock) ~= "function" then
    fail("progress.new: clock must be a function, got " .. describe(opts.clock))
  end
  local out = opts.out or io.stdout
  local on_terminal = opts.terminal
  if on_terminal == nil then on_terminal = io.type(out) == "file" and terminal.isatty(out) end
  local clock = opts.clock or torch.perf_counter
  local bar = setmetatable({
    total = opts.total,
    every = opts.every or (opts.total and math.max(1, opts.total // 10)) or 100,
    label = opts.label,
    out = out,
    terminal = on_terminal and true or false,
    clock = clock,
    started = clock(),
    first_step = nil,     -- one before the first update's step: the rate counts steps done since new
    last_step = nil,
    last_text = nil,
    printed_step = nil,   -- plain mode: the step of the last line printed
    last_draw = -math.huge,
    drawn_step = nil,     -- terminal mode: the step whose line is on screen
    width = 0,            -- terminal mode: the length of the line on screen
    closed = false,
  }, Bar)
  return bar
end

-- "0m07s", "1h02m", "--" for an unknown time.
local function duration(seconds)
  if seconds ~= seconds or seconds == math.huge or seconds < 0 then return "--" end
  seconds = math.floor(seconds + 0.5)
  if seconds >= 3600 then return string.format("%dh%02dm", seconds // 3600, seconds % 3600 // 60) end
  return string.format("%dm%02ds", seconds // 60, seconds % 60)
end

-- A value shown on the line: a number, or a tensor of one element (its item).
local function shown_value(key, v)
  if torch.is_tensor(v) then
    if v:numel() ~= 1 then fail("update: " .. key .. " must be a number or a 1-element tensor, got a tensor of shape " .. tostring(v.shape)) end
    v = v:item()
  end
  if type(v) ~= "number" then fail("update: " .. key .. " must be a number or a 1-element tensor, got " .. describe(v)) end
  if math.type(v) == "integer" then return tostring(v) end
  return string.format("%.4g", v)
end

-- The text of the line for `step`: label, step, the values in key order, rate, ETA.
function Bar:text(step, values, now)
  local parts = {}
  if self.label then parts[1] = self.label .. " " end
  parts[#parts + 1] = self.total and string.format("step %d/%d", step, self.total) or string.format("step %d", step)
  local keys = {}
  for key in pairs(values) do
    if type(key) ~= "string" then fail("update: value names must be strings, got " .. describe(key)) end
    keys[#keys + 1] = key
  end
  table.sort(keys)
  for _, key in ipairs(keys) do parts[#parts + 1] = "  " .. key .. " " .. shown_value(key, values[key]) end
  local steps_done, elapsed = step - self.first_step, now - self.started
  local rate = elapsed > 0 and steps_done / elapsed or 0
  if steps_done > 0 and elapsed > 0 then
    parts[#parts + 1] = string.format("  %.1f steps/s", rate)
    if self.total then parts[#parts + 1] = "  ETA " .. duration((self.total - step) / rate) end
  end
  return table.concat(parts)
end

-- Writes the line in place: back to the start, the text, blanks over what is left of a longer line.
function Bar:draw(text)
  local pad = math.max(0, self.width - #text)
  self.out:write("\r", text, string.rep(" ", pad))
  if self.out.flush then self.out:flush() end
  self.width = #text
end

-- Reports that `step` (an integer) is done, with named values to show (e.g. {loss = 0.25}).
function Bar:update(step, values)
  if getmetatable(self) ~= Bar then fail("update: call it as bar:update(step, values)") end
  if self.closed then fail("update: the progress line was closed") end
  if math.type(step) ~= "integer" then fail("update: step must be an integer, got " .. describe(step)) end
  values = values or {}
  if type(values) ~= "table" then fail("update: values must be a table ({loss = 0.5}), got " .. describe(values)) end
  local now = self.clock()
  if not self.first_step then self.first_step = step - 1 end   -- steps/s: the steps since progress.new
  local last = self.total ~= nil and step >= self.total
  if self.terminal then
    if last or now - self.last_draw >= REDRAW_SECONDS then
      self:draw(self:text(step, values, now))
      self.last_draw, self.drawn_step = now, step
    end
  elseif last or step % self.every == 0 then
    self.out:write(self:text(step, values, now), "\n")
    self.printed_step = step
  end
  self.last_step, self.last_values, self.last_now = step, values, now
end

-- Ends the line: on a terminal, the last step's text and a newline; otherwise the last step's line
-- when it was not printed yet. Calling close twice is harmless.
function Bar:close()
  if getmetatable(self) ~= Bar then fail("close: call it as bar:close()") end
  if self.closed then return end
  self.closed = true
  if not self.last_step then return end
  if self.terminal then
    if self.drawn_step ~= self.last_step then self:draw(self:text(self.last_step, self.last_values, self.last_now)) end
    self.out:write("\n")
  elseif self.printed_step ~= self.last_step then
    self.out:write(self:text(self.last_step, self.last_values, self.last_now), "\n")
  end
  if self.out.flush then self.out:flush() end
end

return progress
