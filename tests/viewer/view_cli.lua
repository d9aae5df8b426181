-- view_cli.lua: the viewer from the program's side. Without a display the viewer says so and the
-- REPL carries on; at the REPL the window closed by the user opens again with :view; and
-- `tapedeck --view --screenshot out.png --frames N script` writes a PNG of the window (checked:
-- the PNG signature and a 1280x800 header).
--   tapedeck view_cli.lua TESTS SHOTS SOURCE TAPEDECK
local tests, shots, source, tapedeck = arg[1], arg[2], arg[3], arg[4]
local function run(command)
  local pipe = io.popen(command .. " 2>&1")
  local out = pipe:read("a")
  local ok, _, code = pipe:close()
  return out, ok and 0 or code
end

-- No display: a clear message, and the REPL goes on.
local out, code = run(("printf ':view\\nprint(1 + 1)\\nprint(viewer.open())\\n' | env -u DISPLAY -u WAYLAND_DISPLAY %s")
                      :format(tapedeck))
print(out)
assert(code == 0, "the REPL exits normally")
assert(out:find("viewer: cannot open a window", 1, true), "a message says why there is no window")
assert(out:find("no display", 1, true), "... and that there is no display")
assert(out:find("\n2\n", 1, true) or out:find("^2\n"), "the REPL goes on after :view")
assert(out:find("nil\tcannot open a window", 1, true), "viewer.open() returns nil and the message")

-- At the REPL (stdin a pipe): :view opens, the user closes the window (as its close button does),
-- the REPL goes on, :view opens it again.
out, code = run(("printf ':view\nviewer.request_close()\nviewer.frame()\nprint(\"open:\", viewer.is_open())\n'"
                 .. "'x = torch.ones(2) * 2\nprint(x:sum():item())\n:view x\nprint(\"again:\", viewer.is_open(), "
                 .. "viewer.model().selected == x.node)\n' | %s"):format(tapedeck))
print(out)
if out:find("cannot open a window", 1, true) then
  print("SKIP: no X server for the window")
  os.exit(77)
end
assert(code == 0, "the REPL exits normally")
assert(out:find("open:\tfalse", 1, true), "the window closed")
assert(out:find("4.0", 1, true), "the REPL went on")
assert(out:find("again:\ttrue\ttrue", 1, true), ":view opened it again, on x's node")

-- --screenshot: under this test's X server (the wrapper's xvfb-run), a PNG.
local png = shots .. "/cli_rnn_cell.png"
os.remove(png)
out, code = run(("%s --view --screenshot %s --frames 3 %s/scripts/rnn_cell.lua %s/cli.svg"):format(tapedeck, png, source, shots))
print(out)
if out:find("cannot open a window", 1, true) then
  print("SKIP: no X server for the screenshot")
  os.exit(77)
end
assert(code == 0, "tapedeck --screenshot exits 0")
local f = assert(io.open(png, "rb"), "the PNG was written")
local bytes = f:read("a")
f:close()
assert(bytes:sub(1, 8) == "\137PNG\r\n\26\n", "a PNG signature")
local width, height = string.unpack(">I4I4", bytes, 17)
assert(width == 1280 and height == 800, ("a 1280x800 image, got %dx%d"):format(width, height))
assert(#bytes > 20000, "an image with something in it")
print("ok")
