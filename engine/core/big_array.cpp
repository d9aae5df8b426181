// big_array.cpp: BigArrayAllocator's blocks (big_array.h).
#include "big_array.h"

#include <sys/mman.h>

#include <new>

#include "tensor.h"   // ENGINE_RECYCLES_MEMORY

namespace td {

namespace {
bool mapped(size_t bytes) { return ENGINE_RECYCLES_MEMORY && bytes >= BIG_ARRAY_MAP_BYTES; }
}  // namespace

void* big_array_allocate(size_t bytes) {
    if (!mapped(bytes)) return ::operator new(bytes);
    void* block = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (block == MAP_FAILED) throw std::bad_alloc();
    return block;
}

void big_array_free(void* block, size_t bytes) {
    if (!block) return;
    if (!mapped(bytes)) {
        ::operator delete(block);
        return;
    }
    munmap(block, bytes);
}

}  // namespace td
