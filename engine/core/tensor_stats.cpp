// tensor_stats.cpp: min, max, mean, std (unbiased, as PyTorch), norm, NaN/Inf/zero/negative counts and a
// histogram of a value, in two passes over its elements (the second one for the deviations from
// the mean, which keeps std exact where sum-of-squares minus squared mean would cancel).
#include "tensor_stats.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace td {

namespace {

// First pass: counts, min, max, sum, absmax, sum of squares (for the norm).
void count_and_sum(const Value& value, TensorStats& s, double& sum_squares) {
    for (int64_t i = 0; i < s.count; ++i) {
        double x = value_get(value, i);
        if (std::isnan(x)) {
            ++s.nan;
            continue;
        }
        if (std::isinf(x)) {
            ++(x > 0 ? s.pos_inf : s.neg_inf);
            continue;
        }
        if (x == 0) ++s.zeros;
        if (x < 0) ++s.negatives;
        if (s.finite == 0 || x < s.min) s.min = x;
        if (s.finite == 0 || x > s.max) s.max = x;
        ++s.finite;
        s.sum += x;
        sum_squares += x * x;
        s.absmax = std::max(s.absmax, std::fabs(x));
    }
}

// Second pass: deviations from the mean (for std) and the histogram.
void deviations_and_histogram(const Value& value, TensorStats& s, int bins) {
    double deviations = 0;
    double span = s.max - s.min;
    if (bins > 0) s.histogram.assign(static_cast<size_t>(bins), 0);
    for (int64_t i = 0; i < s.count; ++i) {
        double x = value_get(value, i);
        if (!std::isfinite(x)) continue;
        deviations += (x - s.mean) * (x - s.mean);
        if (bins > 0) {
            int b = span > 0 ? static_cast<int>((x - s.min) / span * bins) : bins / 2;
            ++s.histogram[static_cast<size_t>(std::clamp(b, 0, bins - 1))];
        }
    }
    s.std = s.finite > 1 ? std::sqrt(deviations / static_cast<double>(s.finite - 1))
                         : std::numeric_limits<double>::quiet_NaN();
}

}  // namespace

TensorStats tensor_stats(const Value& value, int bins) {
    TensorStats s;
    s.std = std::numeric_limits<double>::quiet_NaN();
    if (value_freed(value)) return s;
    Value host = value_to_host(value);   // one copy for a device value; the value itself on the CPU
    s.count = host.numel();
    double sum_squares = 0;
    count_and_sum(host, s, sum_squares);
    if (s.finite == 0) return s;
    s.mean = s.sum / static_cast<double>(s.finite);
    s.norm = std::sqrt(sum_squares);
    deviations_and_histogram(host, s, bins);
    return s;
}

}  // namespace td
