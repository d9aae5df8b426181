-- Not a test of tapedeck's API: a failed assert must make `tapedeck this.lua` exit non-zero.
assert(torch.ones(1):item() == 2, "this assert fails on purpose")
