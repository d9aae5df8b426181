// fuzz_checks.h: what the loader harnesses ask of every tensor a file gave them.
#pragma once

#include <cstdint>
#include <cstdlib>

#include "tensor.h"

namespace td_fuzz {

// A loaded tensor holds as many elements as its shape says, and every one of them reads; else abort.
inline void check_loaded_value(const td::Value& v) {
    int64_t numel = 0;
    if (!td::shape_numel_fits(v.shape, &numel) || v.storage->bytes < static_cast<size_t>(numel) * td::dtype_size(v.dtype))
        abort();
    for (int64_t i = 0; i < numel; ++i) (void)td::value_get(v, i);
}

}  // namespace td_fuzz
