-- io_script.lua: a script that reads stdin and writes to both streams (tests/dap/test_bad_input.py):
-- under `tapedeck --dap` its stdin is /dev/null (the protocol is not its to read), and what it
-- writes comes as output events, stdout's and stderr's.
io.stderr:write("to stderr\n")
local line = io.read("l")
print("stdin gave", line == nil and "nothing" or line)
io.write("no newline at the end")
