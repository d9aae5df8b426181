-- Not a test of tapedeck's API: an uncaught op error must make `tapedeck this.lua` exit non-zero.
torch.mm(torch.ones(2, 3), torch.ones(2, 3))   -- fails on purpose
print("never printed")
