// heat_colour.h: the Tensor window's colour scales, and the grid a heatmap samples, with no GL in
// it. (Its statistics are the engine's tensor_stats, shared with the debugger.)
#pragma once

#include <cstdint>
#include <vector>

#include "tensor.h"

namespace td {

// A colour for x on a scale lo..hi, as 0xAABBGGRR (ImGui's ImU32): blue-white-red around 0 when
// lo < 0 < hi, else a dark-to-bright sequential scale; NaN magenta, +Inf yellow, -Inf cyan.
uint32_t heat_colour(double x, double lo, double hi);
constexpr uint32_t HEAT_NAN = 0xFFFF00FFu;
constexpr uint32_t HEAT_POS_INF = 0xFF00E6FFu;
constexpr uint32_t HEAT_NEG_INF = 0xFFFFE600u;

// The elements a heatmap of `host` shows (a value on the CPU): the value as rows of its last dim,
// every row_step-th row and col_step-th column, so that the grid has at most `side` cells a side
// (:animate's panel, the exported page, a notebook's tensor). Row-major.
struct HeatGrid {
    int64_t rows = 0, cols = 0;           // the grid's
    int64_t row_step = 1, col_step = 1;   // of the value's rows and columns
    std::vector<double> values;
};
HeatGrid heat_grid_sample(const Value& host, int side);

}  // namespace td
