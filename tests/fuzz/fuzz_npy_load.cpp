// fuzz_npy_load.cpp: libFuzzer harness for the .npy loader. Any bytes are a .npy file: load them
// (npy_load_bytes). An EngineError is the right answer to a bad file; a crash, a hang, a sanitizer
// report or a leak is a bug. A tensor that loads must hold as many elements as its shape says.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "fuzz_checks.h"
#include "npy.h"

using namespace td;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    memory_set_limit_bytes(size_t(256) << 20);
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    try {
        Value v = npy_load_bytes(std::string(reinterpret_cast<const char*>(data), size), "fuzz.npy");
        td_fuzz::check_loaded_value(v);
    } catch (const EngineError&) {
    }
    return 0;
}
