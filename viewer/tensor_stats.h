// tensor_stats.h: what the Tensor window shows of a value (statistics, histogram, colours), with
// no GL in it. NaN and infinities are counted apart and never enter min/max/mean/std.
#pragma once

#include <cstdint>
#include <vector>

#include "tensor.h"

namespace td {

struct TensorStats {
    int64_t count = 0;        // elements
    int64_t finite = 0;       // of them finite
    int64_t nan = 0, pos_inf = 0, neg_inf = 0, zeros = 0;
    double min = 0, max = 0, mean = 0, std = 0;   // over the finite elements (0 when none)
    std::vector<float> histogram;                 // counts of finite values in equal bins min..max
};

// Statistics of a CPU value (a value on another device gives count 0).
TensorStats tensor_stats_compute(const Value& value, int bins);

// A colour for x on a scale lo..hi, as 0xAABBGGRR (ImGui's ImU32): blue-white-red around 0 when
// lo < 0 < hi, else a dark-to-bright sequential scale; NaN magenta, +Inf yellow, -Inf cyan.
uint32_t heat_colour(double x, double lo, double hi);
constexpr uint32_t HEAT_NAN = 0xFFFF00FFu;
constexpr uint32_t HEAT_POS_INF = 0xFF00E6FFu;
constexpr uint32_t HEAT_NEG_INF = 0xFFFFE600u;

}  // namespace td
