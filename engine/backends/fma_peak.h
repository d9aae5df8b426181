// fma_peak.h: the arithmetic limit of one CPU core, measured (the bench's `limit` column).
#pragma once

namespace td {

// Floating-point operations per second one core reaches on float32 fused multiply-adds (2 per
// FMA) at the widest vectors this build uses, in a loop of independent FMAs: the machine's peak,
// measured over about `seconds` (the best of several short runs).
double cpu_fma_peak_flops(double seconds = 0.1);

}  // namespace td
