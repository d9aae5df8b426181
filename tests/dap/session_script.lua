-- session_script.lua: says whether its Lua state is fresh (tests/dap/test_bad_input.py runs it in
-- two sessions of one `tapedeck --dap-port` server: each must print "fresh").
print(marker == nil and "fresh" or "reused")
marker = true
