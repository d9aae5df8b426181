-- viewer.export_page (viewer/page/page.h, docs/page.md): the graph as one self-contained HTML page.
--   1. tiny GPT's training step (scripts/models/tiny_gpt_model.lua): the page is self-contained,
--      its JSON parses, the parameters' module paths and the module boxes are in it, every node
--      drawn is an SVG node titled n<id>, values are summaries (grids within the page's side).
--   2. the lecture's RNN cell, two SGD steps, stepped by the debugger and exported inside the second
--      backward pass: the history's events (forward ops, backward groups) are in the page, with
--      the values as they were (W_h before the optimizer changed it in place).
--   3. a 2,000-node graph (tiny GPT with 10 layers, backward kept): laid out capped, the page says
--      what was left out, and its size stays under 4 MB (printed: the figure for docs/page.md).
--      Without the backward graph kept, the page says how to keep it.
--   4. bad input: a bad path and a bad tensor are errors naming viewer.export_page.
local check = dofile((arg[0]:match("^(.*[/\\])") or "") .. "check.lua")
local root = (arg[0]:match("^(.*[/\\])") or "./") .. "../../"
local gpt = dofile(root .. "scripts/models/tiny_gpt_model.lua")
local out_dir = os.tmpname()
os.remove(out_dir)
assert(os.execute("mkdir -p " .. out_dir))

-- ---------------------------------------------------------------------------------------------
-- A small strict JSON reader: the page's data must be JSON, not merely look like it.
local json_null = setmetatable({}, {__tostring = function() return "null" end})
local function json_decode(text)
  local at = 1
  local function fail(why) error(string.format("JSON: %s at byte %d: %q", why, at, text:sub(at, at + 20))) end
  local function space() at = text:find("[^ \t\r\n]", at) or #text + 1 end
  local value
  local function string_literal()
    local out = {}
    at = at + 1
    while true do
      local c = text:sub(at, at)
      if c == "" then fail("unterminated string") end
      if c == '"' then at = at + 1; return table.concat(out) end
      if c:byte() < 32 then fail("control character in a string") end
      if c == "\\" then
        local e = text:sub(at + 1, at + 1)
        local simple = {['"'] = '"', ["\\"] = "\\", ["/"] = "/", b = "\b", f = "\f", n = "\n", r = "\r", t = "\t"}
        if simple[e] then out[#out + 1] = simple[e]; at = at + 2
        elseif e == "u" and text:sub(at + 2, at + 5):match("^%x%x%x%x$") then
          out[#out + 1] = utf8.char(tonumber(text:sub(at + 2, at + 5), 16)); at = at + 6
        else fail("bad escape") end
      else
        out[#out + 1] = c; at = at + 1
      end
    end
  end
  function value()
    space()
    local c = text:sub(at, at)
    if c == "{" then
      local object = {}
      at = at + 1; space()
      if text:sub(at, at) == "}" then at = at + 1; return object end
      while true do
        space()
        if text:sub(at, at) ~= '"' then fail("a key must be a string") end
        local key = string_literal()
        space()
        if text:sub(at, at) ~= ":" then fail("':' expected") end
        at = at + 1
        object[key] = value()
        space()
        local sep = text:sub(at, at); at = at + 1
        if sep == "}" then return object end
        if sep ~= "," then fail("',' or '}' expected") end
      end
    elseif c == "[" then
      local array = {n = 0}
      at = at + 1; space()
      if text:sub(at, at) == "]" then at = at + 1; return array end
      while true do
        array.n = array.n + 1
        array[array.n] = value()
        space()
        local sep = text:sub(at, at); at = at + 1
        if sep == "]" then return array end
        if sep ~= "," then fail("',' or ']' expected") end
      end
    elseif c == '"' then return string_literal()
    elseif text:sub(at, at + 3) == "true" then at = at + 4; return true
    elseif text:sub(at, at + 4) == "false" then at = at + 5; return false
    elseif text:sub(at, at + 3) == "null" then at = at + 4; return json_null
    else
      local number = text:match("^-?%d+%.?%d*[eE]?[-+]?%d*", at)
      if not number or number == "" or number == "-" then fail("unexpected character") end
      at = at + #number
      return tonumber(number)
    end
  end
  local result = value()
  space()
  if at <= #text then fail("text after the value") end
  return result
end

local function read(path)
  local f = assert(io.open(path, "rb"))
  local text = f:read("a")
  f:close()
  return text
end

-- The page's text and its data, with the checks every page passes: nothing outside the file.
local function page_of(path, result)
  local html = read(path)
  check.equal(#html, result.bytes, path .. ": the size viewer.export_page returned")
  assert(not html:find("http", 1, true), path .. ": names an http(s) URL")
  for attribute, target in html:gmatch("(%a+)%s*=%s*[\"']?([^\"' >]*)") do
    if attribute == "src" or attribute == "href" then
      assert(target:sub(1, 1) == "#" or target:sub(1, 5) == "data:", path .. ": refers to " .. target)
    end
  end
  assert(not html:find("<link", 1, true) and not html:find("@import", 1, true) and not html:find("url(", 1, true),
         path .. ": loads a stylesheet, a font or an image")
  local json = html:match('<script type="application/json" id="page%-data">(.-)</script>')
  assert(json, path .. ": no page-data script")
  assert(not json:find("<", 1, true), path .. ": a '<' in the data is not escaped")
  local data = json_decode(json)
  check.equal(data.nodes.n, result.nodes, path .. ": nodes in the data")
  local grid_cells = 0
  for i = 1, data.values.n do
    local v = data.values[i]
    if v.grid then
      assert(v.grid.rows <= data.grid_side and v.grid.cols <= data.grid_side, path .. ": a grid larger than the page's side")
      check.equal(v.grid.v.n, v.grid.rows * v.grid.cols, path .. ": a grid's cells")
      grid_cells = grid_cells + v.grid.v.n
    end
  end
  for i = 1, data.nodes.n do
    local n = data.nodes[i]
    assert(html:find("<title>n" .. n.id .. "</title>", 1, true), path .. ": node #" .. n.id .. " is not drawn")
    for k = 1, n.outputs.n do assert(n.outputs[k] < data.values.n, path .. ": a value index out of range") end
  end
  return html, data, grid_cells
end

local function node_named(data, name)
  for i = 1, data.nodes.n do if data.nodes[i].name == name then return data.nodes[i] end end
end

-- ---------------------------------------------------------------------------------------------
-- 1. tiny GPT's training step
torch.autograd.keep_backward_graph(true)
torch.manual_seed(1)
local config = gpt.config{vocab_size = 40, block_size = 16, n_layer = 2, n_head = 4, n_embd = 32}
model = gpt.GPT(config)
local optimizer = model:configure_optimizers(0.1, 3e-3, {0.9, 0.99})
local x = torch.randint(1, 40, {8, 16}, {dtype = "int64"})
local y = torch.randint(1, 40, {8, 16}, {dtype = "int64"})
local _, gpt_loss = model(x, y)
loss = gpt_loss
loss:backward()
optimizer:step()

local gpt_path = out_dir .. "/tiny_gpt.html"
local r = viewer.export_page(gpt_path, loss)
check.equal(r.events, 0, "nothing watched values: no history events")
assert(r.message:find("wrote " .. gpt_path, 1, true), r.message)
local html, data = page_of(gpt_path, r)
check.equal(r.nodes, #torch.graph(loss), "every node of the loss's graph is drawn")
assert(data.title == "the graph of loss", data.title)
assert(data.history_note:find("No rewind history", 1, true), "the page says why it has no slider")
local weight = node_named(data, "model.transformer.h.1.attn.c_attn.weight")
assert(weight and weight.parameter, "the attention's weight is a named parameter")
assert(weight.grad and weight.grad >= 0, "a parameter's .grad is in the page")
assert(weight.module == nil, "a parameter is made outside any module call")
local c_attn = node_named(data, "model.transformer.h.1.attn.c_attn.weight")
local in_module = 0
for i = 1, data.nodes.n do
  local n = data.nodes[i]
  if n.module and data.strings[n.module + 1] == "GPT/1:Block/attn:CausalSelfAttention/c_attn:Linear" then in_module = in_module + 1 end
end
assert(c_attn and in_module > 0, "the nodes say the module call they were recorded in")
for _, box in ipairs{"attn (CausalSelfAttention)", "c_attn (Linear)", "mlp (MLP)", "grad of attn (CausalSelfAttention)"} do
  assert(html:find(">" .. box .. "</text>", 1, true), "the module box '" .. box .. "' is drawn")
end
assert(html:find('class="cluster"', 1, true), "module calls are Graphviz clusters")
local backward = 0
for i = 1, data.nodes.n do if data.nodes[i].backward then backward = backward + 1 end end
assert(backward > 0, "the backward nodes are drawn")

-- The whole tape, and the same page as text (what the Jupyter kernel shows).
local tape = viewer.export_page(out_dir .. "/tape.html")
assert(tape.nodes >= r.nodes, "the tape holds the loss's graph")
check.equal(select(2, page_of(out_dir .. "/tape.html", tape)).title, "the tape", "the whole tape's title")

-- ---------------------------------------------------------------------------------------------
-- 2. the RNN cell, stepped: the history's events and the values as they were
W_h = torch.randn(4, 4, {requires_grad = true})
W_x = torch.randn(4, 3, {requires_grad = true})
local xs = torch.randn(1, 3)
prev_h = torch.randn(1, 4)
local sgd = optim.SGD({W_h, W_x}, {lr = 0.5})
local cell_path, cell, step = out_dir .. "/rnn_cell.html", nil, 0
dbg.on_stop(function(stop)
  if step == 2 and stop.stop.phase == "backward" and stop.node and stop.node.op == "tanh" and not cell then
    cell = viewer.export_page(cell_path)   -- the whole tape: both steps' nodes live
    return dbg.continue()
  end
  dbg.step()
end)
local h2h_of, w_at = {}, {}
for s = 1, 2 do
  step = s
  w_at[s] = W_h:clone()   -- W_h as this step's forward reads it (the optimizer changes it in place)
  sgd:zero_grad()
  dbg.pause()
  h2h = torch.mm(W_h, prev_h:t())
  h2h_of[s] = h2h
  i2h = torch.mm(W_x, xs:t())
  next_h = (h2h + i2h):tanh()
  loss = next_h:sum()
  loss:backward()
  dbg.continue()   -- not stopped: cancels the step the last stop asked for
  sgd:step()
end
dbg.on_stop(nil)
assert(cell, "the second backward pass stopped in tanh's group")
local _, cell_data = page_of(cell_path, cell)
assert(cell.events > 0 and cell.events == cell_data.events.n, "the history's events are in the page")
local forward, groups = 0, 0
for i = 1, cell_data.events.n do
  local e = cell_data.events[i]
  if e.group then groups = groups + 1 else forward = forward + 1 end
  if i > 1 then assert(e.serial > cell_data.events[i - 1].serial, "events in the order they happened") end
end
assert(forward > 0 and groups > 0, "forward ops and backward groups: " .. forward .. ", " .. groups)
local last = cell_data.events[cell_data.events.n]
assert(last.group and last.backward and last.op == "tanh", "the newest event is the stop: tanh's backward group")
assert(node_named(cell_data, "h2h") and node_named(cell_data, "next_h"), "the script's names are in the page")
-- Each step's mm event holds W_h as that step read it: the first one the bytes from before the
-- optimizer changed them in place (the history's copy), not W_h as it is now.
local function four(x) return tonumber(string.format("%.4g", x)) end
for s = 1, 2 do
  local event
  for i = 1, cell_data.events.n do
    local e = cell_data.events[i]
    if e.node == h2h_of[s].node and not e.group then event = e end
  end
  assert(event, "the event of step " .. s .. "'s mm")
  check.equal(event.inputs[1][1], W_h.node, "the mm's first input is W_h")
  local grid, w_then = cell_data.values[event.inputs[1][2] + 1].grid, w_at[s]:totable()
  check.equal(grid.v.n, 16, "a 4x4 value's grid holds every element")
  for k = 1, 16 do
    check.equal(grid.v[k], four(w_then[(k - 1) // 4 + 1][(k - 1) % 4 + 1]), "W_h[" .. k .. "] as step " .. s .. "'s mm read it")
  end
end
assert((w_at[1] - W_h):abs():max():item() > 1e-3, "the optimizer changed W_h since the first step")

-- ---------------------------------------------------------------------------------------------
-- 3. a 2,000-node graph: capped layout, the size bounded
torch.manual_seed(2)
local big = gpt.GPT(gpt.config{vocab_size = 40, block_size = 16, n_layer = 10, n_head = 4, n_embd = 32})
local _, big_loss = big(x, y)
big_loss:backward()
local total = #torch.graph(big_loss)
assert(total > 2000, "the big graph has more than 2,000 nodes: " .. total)
local clock = os.clock()
local big_page = viewer.export_page(out_dir .. "/big.html", big_loss)
local seconds = os.clock() - clock
local _, big_data = page_of(out_dir .. "/big.html", big_page)
check.equal(big_page.nodes, 2000, "a page lays out at most 2,000 nodes")
assert(big_page.nodes_total > 2000, "the graph's size is reported: " .. big_page.nodes_total)
assert(big_data.notes[1] and big_data.notes[1]:find("older nodes", 1, true), "the page says what was left out")
assert(big_page.bytes < 4e6, "a 2,000-node page stays under 4 MB: " .. big_page.bytes)
print(string.format("2,000-node page: %.2f MB, %.1f s (graph of %d nodes)", big_page.bytes / 1e6, seconds, big_page.nodes_total))

-- Without the backward graph kept (a script run without -i), the page says how to draw it.
torch.autograd.keep_backward_graph(false)
local w = torch.randn(3, 3, {requires_grad = true})
local small_loss = (w * 2):sum()
small_loss:backward()
local small = viewer.export_page(out_dir .. "/small.html", small_loss)
local _, small_data = page_of(out_dir .. "/small.html", small)
assert(small_data.notes[1] and small_data.notes[1]:find("keep_backward_graph(true)", 1, true), "the page says the backward nodes were not kept")
torch.autograd.keep_backward_graph(true)

-- ---------------------------------------------------------------------------------------------
-- 4. bad input
local ok, message = pcall(viewer.export_page, out_dir .. "/no/such/folder/page.html", loss)
assert(not ok and message:find("viewer.export_page", 1, true) and message:find("no/such/folder/page.html", 1, true), message)
ok, message = pcall(viewer.export_page, out_dir .. "/x.html", 42)
assert(not ok and message:find("viewer.export_page", 1, true) and message:find("tensor", 1, true), message)
ok, message = pcall(viewer.export_page)
assert(not ok and message:find("viewer.export_page", 1, true), message)

os.execute("rm -rf " .. out_dir)
print("ok")
