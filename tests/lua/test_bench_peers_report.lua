-- bench/peers_report.lua, what `tapedeck bench --peers` writes, on made-up times: the markdown's
-- table (cells "min / median", the row's fastest in bold, "-" for a column that did not run), its
-- the peer targets (ratios to the fastest peer named, met or missed), the W10 slide's table in ms
-- per 10 calls, the reasons for the "-" cells, and the chart's data file. No peer process runs.
local here = arg[0]:match("^(.*[/\\])") or "./"
local report = dofile(here .. "../../bench/peers_report.lua")

local COLUMNS = {
  {peer = "torch", mode = "eager", label = "PyTorch eager"},
  {peer = "torch", mode = "script", label = "TorchScript"},
  {peer = "torch", mode = "compile", label = "torch.compile"},
  {peer = "tf", mode = "eager", label = "TF eager"},
  {peer = "tf", mode = "function", label = "tf.function"},
}

-- A result as bench.lua makes one: tapedeck's two cells, then the peers' by label.
local function result(name, title, eager, frozen, peers)
  return {workload = {name = name, title = title}, eager = eager, frozen = frozen, peers = peers}
end
local results = {
  result("W1", "scalar", {1.12, 1.18}, {0.27, 0.28}, {["PyTorch eager"] = {15.4, 16}, ["TorchScript"] = {16.1, 17},
    ["torch.compile"] = {51.8, 54.9}, ["TF eager"] = {143, 147}, ["tf.function"] = {63.3, 81}}),
  result("W5", "dense", {165, 177}, {142, 146}, {["PyTorch eager"] = {300, 308}, ["tf.function"] = {130, 140},
    ["TorchScript"] = {failed = "RuntimeError: cannot trace"}}),
  result("W7", "char_lstm", {4264, 4822}, {2625, 2935}, {["PyTorch eager"] = {3105, 3304}, ["TorchScript"] = {2817, 3113}}),
  result("W10a", "slide, first 10 calls", {224, 242}, {373, 404}, {["tf.function"] = {1855, 1942}}),
}

local out_dir = os.tmpname()
os.remove(out_dir)
report.begin({}, {"TensorFlow is not installed (python3 cannot import tensorflow); its columns are skipped"}, 25)
for _, r in ipairs(results) do report.row(r, COLUMNS) end
report.finish(results, COLUMNS, out_dir)

local function read(path)
  local file = assert(io.open(path))
  local text = file:read("a")
  file:close()
  return text
end
local md = read(out_dir .. "/peers.md")
local function has(text, what) assert(md:find(text, 1, true), what .. ": " .. text) end

has("| workload | what | tapedeck eager | tapedeck frozen | PyTorch eager | TorchScript | torch.compile | TF eager | tf.function |",
    "the header")
has("| W1 | scalar | 1.12 / 1.18 | **0.27 / 0.28** | 15.4 / 16.0 | 16.1 / 17.0 | 51.8 / 54.9 | 143 / 147 | 63.3 / 81.0 |",
    "a row, the fastest in bold")
has("| W5 | dense | 165 / 177 | 142 / 146 | 300 / 308 | - | - | - | **130 / 140** |", "a peer faster, cells without times")
has("- W5 TorchScript: RuntimeError: cannot trace", "why a cell has no time")
has("- TensorFlow is not installed", "the note on a missing framework")
-- the targets: ratios to the fastest peer named, on the minima
has("| eager ahead of PyTorch eager and TF eager | W1 | 1.12 | PyTorch eager | 15.4 | 0.07x | met |", "eager target met")
has("| eager ahead of PyTorch eager and TF eager | W7 | 4264 | PyTorch eager | 3105 | 1.37x | missed |", "eager target missed")
has("| frozen ahead of TorchScript, torch.compile and tf.function | W7 | 2625 | TorchScript | 2817 | 0.93x | met |",
    "frozen target against the static peers")
has("| frozen within 1.1x of the fastest peer | W5 | 142 | tf.function | 130 | 1.09x | met |", "within 1.1x")
-- the slide: ms per 10 calls
has("| tapedeck frozen | 3.73 | - |", "W10a in ms per 10 calls")
has("| tf.function | 18.55 | - |", "a peer's W10a")

local tsv = read(out_dir .. "/peers.tsv")
assert(tsv:find("W5\ttf.function\t130.0000\t140.0000\tdense\n", 1, true), "the chart's data: one line per bar")
assert(not tsv:find("W5\tTorchScript", 1, true), "no bar for a cell without a time")

for _, name in ipairs({"peers.md", "peers.tsv", "peers.png"}) do os.remove(out_dir .. "/" .. name) end
os.remove(out_dir)
print("test_bench_peers_report: ok")
