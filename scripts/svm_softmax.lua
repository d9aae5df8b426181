-- svm_softmax.lua: the lecture's exercise on a classifier's score matrix. Row i holds the
-- scores of example i for the three classes; the correct class of example i is class i.
-- Prints the multiclass SVM (hinge) loss and the softmax (cross-entropy) loss, per example and
-- averaged, and the gradients of both with respect to the scores.
--   tapedeck scripts/svm_softmax.lua

local scores_table = {
  { 2.1, 1.6, 2.1},
  { 3.0, 3.2, 2.8},
  {-2.0, 3.7, 3.8},
}
local labels = torch.tensor({1, 2, 3}, {dtype = "int64"})   -- class labels are 1-based
local N, C = 3, 3

-- Multiclass SVM: L_i = sum over j ~= y_i of max(0, s_j - s_yi + 1). PyTorch's multi_margin_loss
-- divides each L_i by the number of classes; the lecture's loss does not, so it is C times that.
scores = torch.tensor(scores_table, {requires_grad = true, dtype = "float64"})
svm_loss = F.multi_margin_loss(scores, labels)
svm_loss:backward()
svm_grad = scores.grad:clone()

print("per-example SVM losses:")
for i = 1, N do
  local per_example = F.multi_margin_loss(scores:narrow(1, i, 1), labels:narrow(1, i, 1), {reduction = "sum"})
  print(("  example %d: %.4f"):format(i, per_example:item() * C))
end
print(("SVM loss (lecture: mean of L_i)      = %.4f"):format(svm_loss:item() * C))
print(("SVM loss (PyTorch multi_margin_loss) = %.4f"):format(svm_loss:item()))
print("d(SVM loss)/d(scores):")
print(svm_grad)

-- Softmax: L_i = -log(e^s_yi / sum_j e^s_j), averaged over the examples.
local scores2 = torch.tensor(scores_table, {requires_grad = true, dtype = "float64"})
softmax_loss = F.cross_entropy(scores2, labels)
softmax_loss:backward()
print("per-example softmax losses:")
local probabilities = scores2:detach():softmax(2)
for i = 1, N do
  print(("  example %d: %.4f   (p of the correct class %.4f)"):format(i,
        -math.log(probabilities:totable()[i][i]), probabilities:totable()[i][i]))
end
print(("softmax loss = %.4f"):format(softmax_loss:item()))
print("d(softmax loss)/d(scores) = (softmax - onehot) / N:")
print(scores2.grad)
