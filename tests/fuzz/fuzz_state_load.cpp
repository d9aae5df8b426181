// fuzz_state_load.cpp: libFuzzer harness for the state-dict loaders, built once per format
// (CMakeLists.txt: fuzz_npz_load with FUZZ_FORMAT=STATE_NPZ, fuzz_safetensors_load with
// STATE_SAFETENSORS). Any bytes are a file of that format: load them (state_load_bytes, as
// torch.load does). An EngineError is the right answer to a bad file; a crash, a hang, a sanitizer
// report, a leak or a giant allocation is a bug. A tensor that loads must hold as many elements as
// its shape says, and a number is a 0-d value.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "fuzz_checks.h"
#include "state_file.h"

using namespace td;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    memory_set_limit_bytes(size_t(256) << 20);
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    try {
        StateEntries entries = state_load_bytes(std::string(reinterpret_cast<const char*>(data), size), FUZZ_FILE_NAME, FUZZ_FORMAT);
        for (const StateEntry& e : entries) {
            if (e.kind == STATE_STRING || e.kind == STATE_METADATA) continue;
            if (e.kind == STATE_TABLE) {   // an empty table: a path and nothing else
                if (e.path.empty() || e.value.storage) abort();
                continue;
            }
            if ((e.kind == STATE_NUMBER || e.kind == STATE_BOOLEAN) && e.value.shape.ndim != 0) abort();
            if (e.kind == STATE_BOOLEAN && (e.value.dtype != DTYPE_I64 || *e.value.data<int64_t>() > 1 || *e.value.data<int64_t>() < 0)) abort();
            td_fuzz::check_loaded_value(e.value);
        }
    } catch (const EngineError&) {
    }
    return 0;
}
