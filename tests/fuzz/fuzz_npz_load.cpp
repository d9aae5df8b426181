// fuzz_npz_load.cpp: libFuzzer harness for the .npz loader (a zip of .npy files). Any bytes are a
// .npz file: load them (state_load_bytes, as torch.load does). An EngineError is the right answer
// to a bad file; a crash, a hang, a sanitizer report, a leak or a giant allocation is a bug. A
// tensor that loads must hold as many elements as its shape says, and a number is a 0-d value.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "state_file.h"

using namespace td;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    memory_set_limit_bytes(size_t(256) << 20);
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    try {
        StateEntries entries = state_load_bytes(std::string(reinterpret_cast<const char*>(data), size), "fuzz.npz", STATE_NPZ);
        for (const StateEntry& e : entries) {
            if (e.kind == STATE_STRING) continue;
            int64_t numel = 0;
            if (!shape_numel_fits(e.value.shape, &numel) || e.value.storage->bytes < static_cast<size_t>(numel) * dtype_size(e.value.dtype)) abort();
            if (e.kind == STATE_NUMBER && e.value.shape.ndim != 0) abort();
            for (int64_t i = 0; i < numel; ++i) (void)value_get(e.value, i);   // every element readable
        }
    } catch (const EngineError&) {
    }
    return 0;
}
