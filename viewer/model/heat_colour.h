// heat_colour.h: the Tensor window's colour scales, with no GL in it. (Its statistics are the
// engine's tensor_stats, shared with the debugger.)
#pragma once

#include <cstdint>

namespace td {

// A colour for x on a scale lo..hi, as 0xAABBGGRR (ImGui's ImU32): blue-white-red around 0 when
// lo < 0 < hi, else a dark-to-bright sequential scale; NaN magenta, +Inf yellow, -Inf cyan.
uint32_t heat_colour(double x, double lo, double hi);
constexpr uint32_t HEAT_NAN = 0xFFFF00FFu;
constexpr uint32_t HEAT_POS_INF = 0xFF00E6FFu;
constexpr uint32_t HEAT_NEG_INF = 0xFFFFE600u;

}  // namespace td
