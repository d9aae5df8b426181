// heat_colour.cpp: colour scales for the Tensor window.
#include "heat_colour.h"

#include <algorithm>
#include <cmath>

namespace td {

namespace {

uint32_t rgb(double r, double g, double b) {
    auto byte = [](double v) { return static_cast<uint32_t>(std::lround(std::clamp(v, 0.0, 1.0) * 255.0)); };
    return 0xFF000000u | (byte(b) << 16) | (byte(g) << 8) | byte(r);
}

}  // namespace

uint32_t heat_colour(double x, double lo, double hi) {
    if (std::isnan(x)) return HEAT_NAN;
    if (std::isinf(x)) return x > 0 ? HEAT_POS_INF : HEAT_NEG_INF;
    if (lo < 0 && hi > 0) {   // diverging: blue (negative) - white (0) - red (positive)
        double m = std::max(-lo, hi);
        double t = std::clamp(x / m, -1.0, 1.0);
        if (t < 0) return rgb(1 + t * 0.85, 1 + t * 0.7, 1 + t * 0.25);
        return rgb(1 - t * 0.25, 1 - t * 0.8, 1 - t * 0.85);
    }
    double t = hi > lo ? std::clamp((x - lo) / (hi - lo), 0.0, 1.0) : 0.5;   // sequential: dark blue - green - yellow
    double r = std::clamp(1.6 * t - 0.45, 0.0, 1.0);
    double g = std::clamp(0.15 + 0.85 * t, 0.0, 1.0);
    double b = std::clamp(0.45 + 0.4 * std::sin(t * 3.14159) - 0.45 * t, 0.0, 1.0);
    return rgb(r * 0.9 + 0.05, g * 0.9 + 0.02, b);
}

HeatGrid heat_grid_sample(const Value& host, int side) {
    HeatGrid g;
    int64_t cols = host.shape.ndim == 0 ? 1 : host.shape.dims[host.shape.ndim - 1];
    int64_t rows = cols > 0 ? host.numel() / cols : 0;
    if (rows <= 0 || side <= 0) return g;
    g.row_step = std::max<int64_t>(1, (rows + side - 1) / side);
    g.col_step = std::max<int64_t>(1, (cols + side - 1) / side);
    g.rows = (rows + g.row_step - 1) / g.row_step;
    g.cols = (cols + g.col_step - 1) / g.col_step;
    g.values.reserve(static_cast<size_t>(g.rows * g.cols));
    for (int64_t r = 0; r < g.rows; ++r)
        for (int64_t c = 0; c < g.cols; ++c) g.values.push_back(value_get(host, r * g.row_step * cols + c * g.col_step));
    return g;
}

}  // namespace td
