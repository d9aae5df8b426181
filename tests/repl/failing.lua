-- used by the script_error transcript: an op error in a script stops it with status 1
x = torch.ones(2, 3)
print("before the error")
y = x:mm(torch.ones(2, 3))
print("never printed")
