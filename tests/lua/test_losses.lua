-- The losses against values worked out by hand: the lecture's score matrix (multiclass SVM and
-- softmax / cross-entropy losses and their gradients), nll_loss, mse_loss, the reduction
-- options, float labels, large logits, and the errors for bad labels and shapes.
local check = dofile((arg[0]:match("^(.*[/\\])") or "") .. "check.lua")
torch.autograd.keep_backward_graph(true)   -- checks below read the backward nodes after backward()

-- The lecture's scores: row i is example i, whose correct class is class i (labels are 1-based).
local function lecture_scores()
  return torch.tensor({{2.1, 1.6, 2.1}, {3.0, 3.2, 2.8}, {-2, 3.7, 3.8}}, {requires_grad = true})
end
local labels = torch.tensor({1, 2, 3}, {dtype = "int64"})

-- Multiclass SVM (hinge) loss, margin 1: hinge_ij = max(0, 1 - x[i,y_i] + x[i,j]) for j ~= y_i.
--   row 1 (class 1, x = 2.1): j=2: 1 - 2.1 + 1.6 = 0.5;   j=3: 1 - 2.1 + 2.1 = 1.0   -> 1.5
--   row 2 (class 2, x = 3.2): j=1: 1 - 3.2 + 3.0 = 0.8;   j=3: 1 - 3.2 + 2.8 = 0.6   -> 1.4
--   row 3 (class 3, x = 3.8): j=1: 1 - 3.8 - 2.0 = -3.8 -> 0;  j=2: 1 - 3.8 + 3.7 = 0.9 -> 0.9
-- The lecture's SVM loss is the mean of the row sums: (1.5 + 1.4 + 0.9) / 3 = 3.8 / 3 = 1.26667.
-- multi_margin_loss (PyTorch) also divides each row by C = 3: 3.8 / 9 = 0.42222.
local scores = lecture_scores()
local svm = torch.multi_margin_loss(scores, labels)
check.close(svm, 3.8 / 9, 1e-6, "multi_margin_loss, mean")
check.close(svm * 3, 3.8 / 3, 1e-6, "the lecture's SVM loss = multi_margin_loss * C")
check.close(scores:multi_margin_loss(labels, "sum"), 3.8 / 3, 1e-6, "multi_margin_loss, sum")
check.shape(svm, {})
-- Gradient: each hinge that is on (> 0) gives +1 to its column and -1 to the correct class's,
-- scaled by 1 / (C N) = 1/9. Row 3's first hinge is off.
svm:backward()
check.close(scores.grad, {{-2 / 9, 1 / 9, 1 / 9}, {1 / 9, -2 / 9, 1 / 9}, {0, 1 / 9, -1 / 9}}, 1e-6, "SVM gradient")

-- Softmax / cross-entropy loss: loss_i = log(sum_j e^x[i,j]) - x[i,y_i]. Shifting each row by its
-- correct score x[i,y_i]:
--   row 1: e^0 + e^-0.5 + e^0          = 2 + 0.606531             = 2.606531 -> log = 0.958020
--   row 2: e^-0.2 + e^0 + e^-0.4       = 0.818731 + 1 + 0.670320  = 2.489051 -> log = 0.911901
--   row 3: e^-5.8 + e^-0.1 + e^0       = 0.003028 + 0.904837 + 1  = 1.907865 -> log = 0.645985
-- mean = (0.958020 + 0.911901 + 0.645985) / 3 = 2.515906 / 3 = 0.838635
scores = lecture_scores()
local ce = torch.cross_entropy(scores, labels)
check.close(ce, 0.838635, 1e-5, "cross_entropy, mean")
check.close(scores:cross_entropy(labels, {reduction = "sum"}), 2.515906, 1e-5, "cross_entropy, sum")
-- Gradient: (softmax - onehot) / N. softmax of row 1 = [1, 0.606531, 1] / 2.606531, and so on:
--   row 1: [0.383652, 0.232697, 0.383652] - [1, 0, 0] -> / 3 = [-0.205449, 0.077566, 0.127884]
--   row 2: [0.328933, 0.401760, 0.269307] - [0, 1, 0] -> / 3 = [0.109644, -0.199413, 0.089769]
--   row 3: [0.001587, 0.474267, 0.524146] - [0, 0, 1] -> / 3 = [0.000529, 0.158089, -0.158618]
ce:backward()
check.close(scores.grad, {{-0.205449, 0.077566, 0.127884}, {0.109644, -0.199413, 0.089769},
                          {0.000529, 0.158089, -0.158618}}, 1e-4, "cross-entropy gradient")
check.close(scores.grad:sum(2), {0, 0, 0}, 1e-6, "each row of the gradient sums to 0")

-- The backward pass is one recorded node: cross_entropy_backward, in the backward phase.
local found = false
for _, node in ipairs(torch.graph(ce)) do
  if node.op == "cross_entropy_backward" then
    found = true
    check.equal(node.phase, "backward", "phase of cross_entropy_backward")
  end
end
assert(found, "cross_entropy_backward is on the graph after backward()")

-- cross_entropy = nll_loss of log_softmax; nll_loss picks -x[i,y_i].
local x = torch.tensor({{2.1, 1.6, 2.1}, {3.0, 3.2, 2.8}, {-2, 3.7, 3.8}})
check.close(x:log_softmax(2):nll_loss(labels), 0.838635, 1e-5, "nll_loss(log_softmax)")
check.close(torch.nll_loss(x, labels), -(2.1 + 3.2 + 3.8) / 3, 1e-6, "nll_loss, mean")
check.close(torch.nll_loss(x, labels, "sum"), -(2.1 + 3.2 + 3.8), 1e-6, "nll_loss, sum")

-- Float labels holding whole numbers work as int64 ones (torch.tensor{1, 2, 3} is float32).
check.close(torch.cross_entropy(x, torch.tensor({1, 2, 3})), 0.838635, 1e-5, "float labels")

-- One example: scores [C] with a 0-d label.
check.close(torch.cross_entropy(torch.tensor({2.1, 1.6, 2.1}), torch.tensor(1, {dtype = "int64"})), 0.958020, 1e-5,
            "one example")

-- Large logits stay finite: loss = 3000 - 1000 + log(1 + e^-1000 + e^-2000) = 2000; gradient
-- softmax - onehot = [0, 0, 1] - [1, 0, 0].
local big = torch.tensor({{1000, 2000, 3000}}, {requires_grad = true})
local big_loss = big:cross_entropy(torch.tensor({1}, {dtype = "int64"}))
check.close(big_loss, 2000, 1e-6, "cross_entropy of large logits")
big_loss:backward()
check.close(big.grad, {{-1, 0, 1}}, 1e-6, "gradient for large logits")

-- mse_loss: mean (default) or sum of (a - b)^2; gradient 2 (a - b) / n.
-- (1 - 0)^2 + (2 - 4)^2 + (3 - 3)^2 + (4 - 1)^2 = 1 + 4 + 0 + 9 = 14
local a = torch.tensor({{1, 2}, {3, 4}}, {requires_grad = true})
local b = torch.tensor({{0, 4}, {3, 1}})
check.close(torch.mse_loss(a, b), 14 / 4, 1e-6, "mse_loss, mean")
check.close(a:mse_loss(b, "mean"), 14 / 4, 1e-6, "mse_loss, \"mean\"")
check.close(torch.mse_loss(a, b, "sum"), 14, 1e-6, "mse_loss, \"sum\"")
local mse = torch.mse_loss(a, b, {reduction = "sum"})
check.close(mse, 14, 1e-6, "mse_loss, {reduction = \"sum\"}")
mse:backward()
check.close(a.grad, {{2, -4}, {0, 6}}, 1e-6, "mse_loss gradient, sum")

-- Errors name the op, the label or shapes, and this line.
local two = torch.tensor({{1, 2, 3}, {4, 5, 6}})
local int_labels = torch.tensor({1, 4}, {dtype = "int64"})
check.fails("cross_entropy", "label 4 at position 2 is out of range: there are 3 classes (labels 1..3)", function() return two:cross_entropy(int_labels) end)
check.fails("cross_entropy", "label 0 at position 1 is out of range", function() return two:cross_entropy(torch.tensor({0, 1})) end)
check.fails("multi_margin_loss", "label 2.5 at position 2 is not a whole number", function() return two:multi_margin_loss(torch.tensor({1, 2.5})) end)
check.fails("nll_loss", "input [2,3] and labels [3] do not match", function() return two:nll_loss(labels) end)
check.fails("mse_loss", "input [2,3] and target [3] must have the same shape", function() return two:mse_loss(torch.ones(3)) end)
check.fails("cross_entropy", "the input must be float32 or float64, got int64", function() return two:long():cross_entropy(torch.tensor({1, 2})) end)
check.fails("mse_loss", "unknown reduction 'none'", function() return two:mse_loss(two, "none") end)
check.fails("x:mse_loss", "unknown option 'reduce'", function() return two:mse_loss(two, {reduce = "sum"}) end)
check.fails("cross_entropy", "argument 2: tensor expected, got table", function() return two:cross_entropy({1, 2}) end)
check.fails("cross_entropy", "argument 3", function() return two:cross_entropy(torch.tensor({1, 2}), 1) end)

-- F.cross_entropy / F.nll_loss on [N, C, d1, ...] scores (a sequence model's [batch, vocab, time]):
-- the same numbers as the [N * d1, C] flattening (PyTorch's values: tests/oracle rows), and a
-- target of another shape is an error naming both shapes
local scores = torch.randn(2, 5, 3, {dtype = "float64", requires_grad = true})
local labels = torch.tensor({{1, 5, 2}, {3, 3, 4}}, {dtype = "int64"})
local flat = scores:permute(1, 3, 2):reshape(6, 5)
check.close(F.cross_entropy(scores, labels), F.cross_entropy(flat, labels:reshape(6)), 1e-12, "K-dim cross_entropy")
check.close(F.cross_entropy(scores, labels, {reduction = "none"}), F.cross_entropy(flat, labels:reshape(6), {reduction = "none"}):reshape(2, 3),
            1e-12, "K-dim cross_entropy, reduction none: [N, d1]")
check.close(nn.NLLLoss()(scores:log_softmax(2), labels), F.cross_entropy(scores, labels), 1e-12, "K-dim nll_loss")
local ce_shape = "for input [2,5,3] ([N, C, d1, ...]) the target must be class labels [N, d1, ...] = [2,3] or probabilities of the input's shape, got [2,5]"
check.fails("cross_entropy", ce_shape, function() local l = F.cross_entropy(scores, torch.ones(2, 5, {dtype = "int64"})); return l end)
check.fails("nll_loss", "the target must be class labels [N, d1, ...] = [2,3]", function() local l = F.nll_loss(scores, torch.ones(6, {dtype = "int64"})); return l end)

-- A loss module's options are its fields, with PyTorch's defaults (crit.ignore_index is -100),
-- and a field changed after construction counts, as in PyTorch (it was ignored: the constructor's
-- options were kept apart).
local lecture_labels = torch.tensor({1, 2, 3}, {dtype = "int64"})
local crit = nn.CrossEntropyLoss()
check.equal(crit.ignore_index, -100, "CrossEntropyLoss().ignore_index")
check.equal(crit.label_smoothing, 0.0, "CrossEntropyLoss().label_smoothing")
check.equal(crit.reduction, "mean", "CrossEntropyLoss().reduction")
check.equal(nn.NLLLoss().ignore_index, -100, "NLLLoss().ignore_index")
check.equal(nn.SmoothL1Loss({beta = 0.5}).beta, 0.5, "SmoothL1Loss{beta = 0.5}.beta")
check.equal(nn.MultiMarginLoss().margin, 1, "MultiMarginLoss().margin")
crit.ignore_index = 2
check.close(crit(lecture_scores(), lecture_labels), F.cross_entropy(lecture_scores(), lecture_labels, {ignore_index = 2}), 1e-12,
            "crit.ignore_index = 2 after construction")
crit.label_smoothing = 0.1
check.close(crit(lecture_scores(), lecture_labels),
            F.cross_entropy(lecture_scores(), lecture_labels, {ignore_index = 2, label_smoothing = 0.1}), 1e-12,
            "crit.label_smoothing = 0.1 after construction")
