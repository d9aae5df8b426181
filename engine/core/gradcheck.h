// gradcheck.h: finite differences in float64 against computed gradients, the numbers behind
// torch.autograd.gradcheck (lua_bindings/lua_gradcheck.cpp) and the debugger's :gradcheck at a
// backward stop (repl/debugger/debugger_gradcheck.cpp). Nothing here records a node or calls Lua: the
// caller gives the function to differentiate as an evaluation of its inputs' current values.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ops.h"

namespace td {

// PyTorch's gradcheck test for one Jacobian element: |analytic - numeric| <= atol + rtol * |numeric|.
struct GradcheckTolerance {
    double atol = 1e-5;
    double rtol = 1e-3;
};

// The eps a check accepts: central differences taken in float64 (what :gradcheck and PyTorch's
// gradcheck compute in). Below GRADCHECK_MIN_EPS, x ± eps keeps fewer than ~4 digits of eps for an
// x near 1, so a difference is mostly rounding error (float64 has ~16 digits); above
// GRADCHECK_MAX_EPS the difference measures a secant, whose error grows as eps².
constexpr double GRADCHECK_MIN_EPS = 1e4 * 2.220446049250313e-16;
constexpr double GRADCHECK_MAX_EPS = 0.1;

// Why `eps` cannot be a check's step ("" when it can): not a number, <= 0, or outside
// [GRADCHECK_MIN_EPS, GRADCHECK_MAX_EPS], with the reason and the range.
std::string gradcheck_eps_refusal(double eps);

// The default budget: at most this many evaluations of the function for one check (each checked
// input element costs two; beyond it a sample of the elements is checked, gradcheck_sample).
constexpr int64_t GRADCHECK_MAX_EVALUATIONS = 1000000;

// The element indices (row-major, 0-based) of a tensor of `numel` elements that a check looks at
// when it can afford `limit` of them: all, in order, when numel <= limit; else `limit` distinct
// ones drawn with a fixed seed (the same sample every time), in increasing order, the first and
// last element always among them (the first alone when limit is 1).
std::vector<int64_t> gradcheck_sample(int64_t numel, int64_t limit);

// Evaluates the function at its inputs' current values and returns its outputs' values (any
// dtype, device or layout). gradcheck_numeric_column changes an input's elements between calls.
typedef std::function<std::vector<Value>()> GradcheckEvaluate;

// Column k of the numerical Jacobian with respect to `input`: (f(x + eps e_k) - f(x - eps e_k)) /
// (2 eps), one entry per element of every floating-point output of f, the outputs one after the
// other, each row-major. `input` is a CPU value that f reads (any layout); its element k is
// written in place for the two evaluations and restored to its exact value afterwards, also when
// f fails (the error goes on).
std::vector<double> gradcheck_numeric_column(const GradcheckEvaluate& f, const Value& input, int64_t k, double eps);

// Every floating-point element of `outputs`, as gradcheck_numeric_column orders them.
std::vector<double> gradcheck_flatten_outputs(const std::vector<Value>& outputs);

// The comparison of analytic with numeric values over the elements of one gradient (or one
// Jacobian block), element by element with a tolerance. The worst element is the one whose
// difference is the largest part of its tolerance (|a - n| / (atol + rtol |n|) largest; past 1 it
// is a mismatch; a NaN on either side is worst of all).
struct GradcheckComparison {
    int64_t checked = 0;      // elements compared
    int64_t mismatched = 0;   // of those, how many are past their tolerance
    int64_t worst = -1;       // the caller's index of the worst element; -1 before any
    double worst_analytic = 0, worst_numeric = 0;
    double max_abs_diff = 0;  // the largest |analytic - numeric| (NaN when one was NaN)

    void add(int64_t index, double analytic, double numeric, const GradcheckTolerance& tolerance);
    bool ok() const { return mismatched == 0; }

private:
    double worst_excess_ = 0;
};

// A row-major element index as a Lua user writes it: 1-based per dim, "[3,1]"; "[]" for a 0-d shape.
std::string gradcheck_index_text(const Shape& shape, int64_t flat);

// Runs op's kernel on `inputs` (CPU values) with `attrs` and returns its outputs, as exec_node
// would, but without a node: nothing is recorded, no observer is called (no breakpoint can
// stop), no autograd. A view's output shares its input's storage. For the ops of the table that
// have a kernel (not a torch.Function's, not creation or in-place ops: an error says so).
std::vector<Value> op_evaluate_untracked(OpId op, const OpAttrs& attrs, const std::vector<Value>& inputs);

}  // namespace td
