// big_array.h: growing arrays of a million elements (a long loop's plan: its steps, values and
// backward groups; the recorder's tables), mapped straight from the system.
//
// std::vector grows by copying into a block twice the size and freeing the old one. glibc serves
// a block below its mmap threshold (which rises as high as 32 MB once big blocks are freed) from
// the heap, where the outgrown copies stay resident until something else fits in them: recording
// a 50,000-step loop left ~37 MB of them while the eager run's graph was alive, at the freeze's
// peak. BigArrayAllocator maps blocks of BIG_ARRAY_MAP_BYTES and more directly and unmaps them
// when freed, so an outgrown copy goes back to the system at once; smaller blocks are operator
// new's. (Lowering glibc's threshold for the whole process instead made every large temporary of
// Eigen and OpenBLAS a fresh mapping: W7 took 1.4x as long.) Sanitizer builds (no
// ENGINE_RECYCLES_MEMORY) use operator new for all, so the checkers see every array.
#pragma once

#include <cstddef>
#include <vector>

namespace td {

constexpr size_t BIG_ARRAY_MAP_BYTES = size_t(1) << 20;

void* big_array_allocate(size_t bytes);          // raises std::bad_alloc when the system has no memory
void big_array_free(void* block, size_t bytes);  // `bytes` as given to big_array_allocate

template <class T>
struct BigArrayAllocator {
    using value_type = T;
    BigArrayAllocator() = default;
    template <class U>
    BigArrayAllocator(const BigArrayAllocator<U>&) {}
    T* allocate(size_t n) { return static_cast<T*>(big_array_allocate(n * sizeof(T))); }
    void deallocate(T* block, size_t n) { big_array_free(block, n * sizeof(T)); }
    template <class U>
    bool operator==(const BigArrayAllocator<U>&) const { return true; }
};

template <class T>
using BigVector = std::vector<T, BigArrayAllocator<T>>;

}  // namespace td
