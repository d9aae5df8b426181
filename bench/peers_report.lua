-- peers_report.lua: what `tapedeck bench --peers` prints and writes. bench.lua calls
--   report.begin(running_peers, notes, samples)   the machine, the versions and the table's header
--   report.row(result, columns)                   one workload's row, as soon as it is measured
--   report.finish(results, columns, out_dir)      the notes, the targets, then out_dir/peers.md,
--                                                 peers.tsv and peers.png (plot_peers.py)
-- A result is {workload = w, eager = cell, frozen = cell, peers = {label = cell}}; a cell is
-- {min, median} in µs per call (per step for a per_step workload) or {failed = why}.
local report = {}

local bench_dir = debug.getinfo(1, "S").source:match("^@(.*[/\\])") or ""
local peers = dofile(bench_dir .. "peers.lua")

-- The run's description: filled by report.begin, used by every output.
local run = {}

-- ============================================================================================
-- The machine and the versions

local function read_file(path)
  local file = io.open(path)
  if not file then return nil end
  local text = file:read("a")
  file:close()
  return text
end

local function load_average()
  return (read_file("/proc/loadavg") or ""):match("^(%S+ %S+ %S+)") or "?"
end

-- "AMD EPYC, 2 cores (AVX-512), 23 GiB, Debian GNU/Linux 12 (bookworm)", from /proc and /etc.
local function machine()
  local cpuinfo = read_file("/proc/cpuinfo") or ""
  local _, cores = cpuinfo:gsub("\nprocessor%s*:", "")
  if cpuinfo:find("^processor%s*:") then cores = cores + 1 end
  local model = cpuinfo:match("model name%s*:%s*([^\n]+)") or "unknown CPU"
  local kib = tonumber((read_file("/proc/meminfo") or ""):match("MemTotal:%s*(%d+)")) or 0
  local os_name = (read_file("/etc/os-release") or ""):match('PRETTY_NAME="([^"]+)"') or "Linux"
  return ("%s, %d cores%s, %d GiB, %s"):format(model, cores, cpuinfo:find("avx512f", 1, true) and " (AVX-512)" or "",
    math.floor(kib / 1048576 + 0.5), os_name)
end

-- The versions, one line per framework: tapedeck's build, then each peer that started.
local function versions(running)
  local lines = {TAPEDECK_BUILD or ("tapedeck " .. torch.version)}
  if running.torch then
    local v = table.concat(running.torch.versions, " ")
    lines[#lines + 1] = ("PyTorch %s (BLAS: %s), Python %s"):format(v:match("torch (%S+)") or "?",
      v:match("blas (%S+)") or "?", running.torch.python_version)
  end
  if running.tf then
    local v = table.concat(running.tf.versions, " ")
    lines[#lines + 1] = ("TensorFlow %s, Keras %s, oneDNN %s, Python %s"):format(v:match("tensorflow (%S+)") or "?",
      v:match("keras (%S+)") or "?", v:match("onednn (%S+)") or "?", running.tf.python_version)
  end
  return lines
end

-- ============================================================================================
-- Cells

-- A time with three significant digits or so: 0.262, 3.71, 52.3, 1288.
local function number(us)
  if us < 10 then return ("%.2f"):format(us) end
  if us < 100 then return ("%.1f"):format(us) end
  return ("%.0f"):format(us)
end

local function cell_text(cell)
  if not cell[1] then return "-" end
  return number(cell[1]) .. " / " .. number(cell[2])
end

-- The cells of one result in the columns' order: tapedeck eager, tapedeck frozen, then the peers
-- ({} for a peer that did not run: not installed).
local function cells(result, columns)
  local list = {result.eager, result.frozen}
  for i, column in ipairs(columns) do list[2 + i] = result.peers[column.label] or {} end
  return list
end

local function labels(columns)
  local list = {"tapedeck eager", "tapedeck frozen"}
  for _, column in ipairs(columns) do list[#list + 1] = column.label end
  return list
end

-- ============================================================================================
-- The terminal

local CELL = "%16s"

function report.begin(running, notes, samples)
  run.date = os.date("%Y-%m-%d %H:%M")
  run.machine = machine()
  run.load_start = load_average()
  run.versions = versions(running)
  run.notes = notes
  run.samples = samples
  print(("tapedeck bench --peers, %s: %s; load average %s"):format(run.date, run.machine, run.load_start))
  for _, line in ipairs(run.versions) do print("  " .. line) end
  for _, note in ipairs(notes) do print("  " .. note) end
  print(("µs per call, one thread, min / median of %d samples (W9: per unrolled step); "):format(samples) ..
        "each round samples every column in turn")
end

function report.row(result, columns)
  if not run.header_printed then
    local header = ("%-5s"):format("")
    for _, label in ipairs(labels(columns)) do header = header .. " " .. CELL:format(label) end
    print(header)
    run.header_printed = true
  end
  local line = ("%-5s"):format(result.workload.name)
  for _, cell in ipairs(cells(result, columns)) do line = line .. " " .. CELL:format(cell_text(cell)) end
  print(line)
end

-- ============================================================================================
-- Issue 17's targets, on the minima of this run

local EAGER_PEERS = {"PyTorch eager", "TF eager"}
local STATIC_PEERS = {"TorchScript", "torch.compile", "tf.function"}
local ALL_PEERS = {"PyTorch eager", "TorchScript", "torch.compile", "TF eager", "tf.function"}

-- The fastest of the columns `among` in result (its label and minimum), or nil when none was measured.
local function fastest(result, among)
  local best_label, best
  for _, label in ipairs(among) do
    local cell = result.peers[label]
    if cell and cell[1] and (not best or cell[1] < best) then best_label, best = label, cell[1] end
  end
  return best_label, best
end

-- The targets, each {target = text, workload = name, ours = µs, peer = label, theirs = µs,
-- ratio = ours / theirs, met = bool} (peer, ratio and met are nil when no peer column it names
-- was measured).
local function targets(results)
  local rows = {}
  local function add(target, result, cell, among, meets)
    local label, theirs = fastest(result, among)
    local row = {target = target, workload = result.workload.name, ours = cell[1],
                 peer = label, theirs = theirs}
    if row.ours and theirs then
      row.ratio = row.ours / theirs
      row.met = meets(row.ratio)
    end
    rows[#rows + 1] = row
  end
  local function ahead(ratio) return ratio < 1 end
  local function within_1_1(ratio) return ratio <= 1.1 end
  local function on(names, result) return names[result.workload.name] end
  local eager_on = {W1 = true, W2 = true, W3 = true, W4 = true, W5 = true, W6 = true, W7 = true, W8 = true}
  local static_on = {W1 = true, W2 = true, W3 = true, W7 = true}
  local gemm_bound = {W4 = true, W5 = true}
  for _, r in ipairs(results) do
    if on(eager_on, r) then add("eager ahead of PyTorch eager and TF eager", r, r.eager, EAGER_PEERS, ahead) end
  end
  for _, r in ipairs(results) do
    if on(static_on, r) then add("frozen ahead of TorchScript, torch.compile and tf.function", r, r.frozen, STATIC_PEERS, ahead) end
  end
  for _, r in ipairs(results) do
    if on(gemm_bound, r) then add("frozen within 1.1x of the fastest peer", r, r.frozen, ALL_PEERS, within_1_1) end
  end
  return rows
end

local function verdict(row)
  if row.met == nil then return "not measured" end
  return row.met and "met" or "missed"
end

local function print_targets(rows)
  print("The peer targets (minima, this run; ratio = tapedeck / the fastest peer named):")
  for _, row in ipairs(rows) do
    print(("  %-4s %-58s %s"):format(row.workload, row.target, row.ratio and
      ("%.2fx of %s (%s vs %s µs): %s"):format(row.ratio, row.peer, number(row.ours), number(row.theirs), verdict(row))
      or verdict(row)))
  end
end

-- Why each "-" cell is one, as lines "W9A TorchScript: not traced: ...".
local function failures(results, columns)
  local lines = {}
  for _, r in ipairs(results) do
    local list, names = cells(r, columns), labels(columns)
    for i, cell in ipairs(list) do
      if cell.failed then lines[#lines + 1] = ("%s %s: %s"):format(r.workload.name, names[i], cell.failed) end
    end
  end
  return lines
end

-- ============================================================================================
-- The slide (W10): ms per 10 calls, first and warm

local function slide_rows(results, columns)
  local first, warm
  for _, r in ipairs(results) do
    if r.workload.name == "W10a" then first = r end
    if r.workload.name == "W10b" then warm = r end
  end
  if not first and not warm then return nil end
  local rows = {}
  for i, label in ipairs(labels(columns)) do
    local function ms(r)
      local cell = r and cells(r, columns)[i]
      return (cell and cell[1]) and ("%.2f"):format(cell[1] * 10 / 1000) or "-"
    end
    rows[#rows + 1] = {label, ms(first), ms(warm)}
  end
  return rows
end

-- ============================================================================================
-- Files: markdown, the chart's data and the chart

local function write_markdown(path, results, columns, target_rows)
  local out = {}
  local function add(line) out[#out + 1] = line end
  add("# tapedeck beside its peers")
  add("")
  add(("%s, %s. One thread each; µs per call (W9: per unrolled step), min / median of %d samples."):format(
    run.date, run.machine, run.samples))
  add(("Load average %s at the start, %s at the end. Written by `tapedeck bench --peers` "):format(run.load_start, run.load_end) ..
      "(`./run.sh bench-peers`).")
  add("")
  for _, line in ipairs(run.versions) do add("- " .. line) end
  for _, note in ipairs(run.notes) do add("- " .. note) end
  add("")
  local names = labels(columns)
  add("| workload | what | " .. table.concat(names, " | ") .. " |")
  add("|---|---|" .. ("---|"):rep(#names))
  for _, r in ipairs(results) do
    local list = cells(r, columns)
    local best
    for _, cell in ipairs(list) do if cell[1] and (not best or cell[1] < best) then best = cell[1] end end
    local texts = {}
    for i, cell in ipairs(list) do
      texts[i] = cell_text(cell)
      if cell[1] and cell[1] == best then texts[i] = "**" .. texts[i] .. "**" end
    end
    add(("| %s | %s | %s |"):format(r.workload.name, r.workload.title, table.concat(texts, " | ")))
  end
  add("")
  add("Bold: the fastest minimum of the row. Each workload's columns were sampled in rounds, one sample of " ..
      "each column per round (the peers are processes that time a sample when asked), so they saw the same " ..
      "machine; the workloads ran one after the other.")
  local failed = failures(results, columns)
  if #failed > 0 then
    add("")
    add("No time (-):")
    add("")
    for _, line in ipairs(failed) do add("- " .. line) end
  end
  add("")
  add("## Targets")
  add("")
  add("| target | workload | tapedeck µs | fastest peer | its µs | ratio | |")
  add("|---|---|---|---|---|---|---|")
  for _, row in ipairs(target_rows) do
    add(("| %s | %s | %s | %s | %s | %s | %s |"):format(row.target, row.workload, row.ours and number(row.ours) or "-",
      row.peer or "-", row.theirs and number(row.theirs) or "-", row.ratio and ("%.2fx"):format(row.ratio) or "-",
      verdict(row)))
  end
  local slide = slide_rows(results, columns)
  if slide then
    add("")
    add("## The lecture's tf.function slide (W10)")
    add("")
    add("ms for 10 calls of the slide's model (Dense(100, relu), Dense(1000), MSE; N = 64, D = 1000), " ..
        "the slide's timeit(number=10). First 10 calls: the static function is made anew for each sample " ..
        "(torch.freeze, tf.function, torch.jit.trace, torch.compile) and the making is counted, as in the " ..
        "slide; warm: the same 10 calls afterwards. The slide (Google Colab, April 2020): dynamic 25.2 ms, " ..
        "static 39.3 ms.")
    add("")
    add("| | first 10 calls (W10a) | 10 calls, warm (W10b) |")
    add("|---|---|---|")
    for _, row in ipairs(slide) do add(("| %s | %s | %s |"):format(row[1], row[2], row[3])) end
  end
  add("")
  add("![µs per call, log scale](peers.png)")
  local file = assert(io.open(path, "w"))
  file:write(table.concat(out, "\n"), "\n")
  file:close()
end

-- The chart's data, one line per bar: workload, column, min µs, median µs, the workload's title;
-- "#" lines first: the chart's title, subtitle and versions.
local function write_tsv(path, results, columns)
  local file = assert(io.open(path, "w"))
  file:write(("#title\ttapedeck beside its peers: µs per call, one thread (bars: minimum, ticks: median)\n"))
  file:write(("#subtitle\t%s, %s\n"):format(run.machine, run.date))
  file:write(("#versions\t%s\n"):format(table.concat(run.versions, "; ")))
  local names = labels(columns)
  for _, r in ipairs(results) do
    for i, cell in ipairs(cells(r, columns)) do
      if cell[1] then
        file:write(("%s\t%s\t%.4f\t%.4f\t%s\n"):format(r.workload.name, names[i], cell[1], cell[2], r.workload.title))
      end
    end
  end
  file:close()
end

-- Draw the PNG with plot_peers.py in the python3 that has matplotlib. Returns true, or nil and why.
local function plot(tsv, png)
  local python = peers.find_python("matplotlib")
  if not python then return nil, "no PNG: python3 cannot import matplotlib (pip install matplotlib)" end
  local command = ("%s '%s' '%s' '%s' 2>&1"):format(python, bench_dir .. "plot_peers.py", tsv, png)
  local pipe = io.popen(command)
  local out = pipe:read("a")
  local ok = pipe:close()
  if not ok then return nil, "no PNG: plot_peers.py failed: " .. out end
  return true
end

function report.finish(results, columns, out_dir)
  run.load_end = load_average()
  for _, line in ipairs(failures(results, columns)) do print("  - " .. line) end
  print(("load average at the end: %s"):format(run.load_end))
  local target_rows = targets(results)
  print_targets(target_rows)
  os.execute(("mkdir -p '%s'"):format(out_dir))
  local md, tsv, png = out_dir .. "/peers.md", out_dir .. "/peers.tsv", out_dir .. "/peers.png"
  write_markdown(md, results, columns, target_rows)
  write_tsv(tsv, results, columns)
  local plotted, why = plot(tsv, png)
  print(("wrote %s%s"):format(md, plotted and (" and " .. png) or ""))
  if not plotted then print(why) end
end

return report
