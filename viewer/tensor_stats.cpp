// tensor_stats.cpp: statistics and colour scales for the Tensor window.
#include "tensor_stats.h"

#include <algorithm>
#include <cmath>

namespace td {

TensorStats tensor_stats_compute(const Value& value, int bins) {
    TensorStats s;
    if (!value.storage || value.device() != DEVICE_CPU) return s;
    s.count = value.numel();
    double sum = 0, sum_sq = 0;
    bool first = true;
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
        ++s.finite;
        sum += x;
        sum_sq += x * x;
        if (first || x < s.min) s.min = x;
        if (first || x > s.max) s.max = x;
        first = false;
    }
    if (s.finite > 0) {
        s.mean = sum / static_cast<double>(s.finite);
        double var = sum_sq / static_cast<double>(s.finite) - s.mean * s.mean;
        s.std = var > 0 ? std::sqrt(var) : 0;
    }
    if (bins > 0 && s.finite > 0) {
        s.histogram.assign(bins, 0.0f);
        double width = s.max - s.min;
        for (int64_t i = 0; i < s.count; ++i) {
            double x = value_get(value, i);
            if (!std::isfinite(x)) continue;
            int b = width > 0 ? static_cast<int>((x - s.min) / width * bins) : bins / 2;
            s.histogram[std::clamp(b, 0, bins - 1)] += 1.0f;
        }
    }
    return s;
}

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

}  // namespace td
