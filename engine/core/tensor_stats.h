// tensor_stats.h: the statistics of a tensor's value, computed in one place for every caller
// (the REPL's :inspect, dbg.inspect, breakpoint conditions such as `std > 1`, the viewer's Tensor
// window), so that they all agree with each other and with PyTorch.
//
// NaN and infinities are counted apart and never enter min/max/mean/sum/norm/std: those are over
// the finite elements. std is PyTorch's default, the unbiased one (divides by n - 1): std of
// [1, 2, 3] is 1, and std of a single element is NaN, as torch.tensor([5.]).std().
#pragma once

#include <cstdint>
#include <vector>

#include "tensor.h"

namespace td {

struct TensorStats {
    int64_t count = 0;    // elements (0 for a value whose bytes were freed)
    int64_t finite = 0;   // of them finite: what the numbers below are computed over
    int64_t nan = 0, pos_inf = 0, neg_inf = 0, zeros = 0;
    int64_t negatives = 0;   // finite elements below 0
    double min = 0, max = 0, mean = 0, sum = 0, absmax = 0, norm = 0;   // 0 when no element is finite
    double std = 0;                    // unbiased (n - 1); NaN with fewer than two finite elements
    std::vector<int64_t> histogram;    // counts of the finite values in equal bins over [min, max]

    int64_t inf() const { return pos_inf + neg_inf; }
};

// The statistics of a value, with a histogram of `bins` bins (none when 0). A value on another
// device is read through one host copy (value_to_host); one whose bytes were freed gives count 0.
TensorStats tensor_stats(const Value& value, int bins = 0);

}  // namespace td
