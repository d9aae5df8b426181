-- grad_rules.lua: a small graph whose backward visits mm (plain, and nn.Linear's mm(Bᵀ)), exp, pow
-- and pow_tensor, for the transcript debug_grad_rules (each backward group's banner shows its
-- forward op's rules).
torch.manual_seed(0)
A = torch.randn(3, 4, {requires_grad = true})
B = torch.randn(4, 2, {requires_grad = true})
e = torch.tensor({0.5, 1.5}, {requires_grad = true})
fc = nn.Linear(2, 2)
Y = torch.mm(A, B)
E = Y:exp()
P = E:pow(3)
Q = fc(P ^ e)
loss = Q:sum()
