// test_block_slabs.cpp: BlockSlabs hands out blocks in address order (a pass's nodes lie in record
// order), reuses the lowest free block first, keeps wholly free slabs only up to its budget.
// Under AddressSanitizer blocks are plain allocations (ENGINE_RECYCLES_MEMORY): only the
// properties every allocation has are checked there.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "block_slabs.h"

using namespace td;

namespace {
uintptr_t address(void* p) { return reinterpret_cast<uintptr_t>(p); }
}  // namespace

TEST_CASE("block slabs: blocks are distinct, writable and 64-byte aligned when their size is a multiple of 64") {
    SlabBudget budget{4};
    BlockSlabs slabs(192, budget);
    std::vector<void*> taken;
    for (int i = 0; i < 1000; ++i) {
        taken.push_back(slabs.take());
        std::memset(taken.back(), i & 0xff, 192);
        CHECK(address(taken.back()) % 64 == 0);
    }
    std::vector<void*> sorted = taken;
    std::sort(sorted.begin(), sorted.end());
    for (size_t i = 1; i < sorted.size(); ++i) CHECK(address(sorted[i]) - address(sorted[i - 1]) >= 192);
    for (int i = 0; i < 1000; ++i) CHECK(static_cast<unsigned char*>(taken[i])[191] == (i & 0xff));
    for (void* p : taken) slabs.give(p);
    slabs.release_spares();
}

TEST_CASE("block slabs: blocks come in address order, and the lowest free block is taken first") {
    if (!ENGINE_RECYCLES_MEMORY) return;
    SlabBudget budget{4};
    BlockSlabs slabs(360, budget);   // a node's size: 181 to a slab
    std::vector<void*> taken;
    for (int i = 0; i < 100; ++i) taken.push_back(slabs.take());
    for (int i = 1; i < 100; ++i) CHECK(address(taken[i]) == address(taken[i - 1]) + 360);
    slabs.give(taken[50]);
    slabs.give(taken[10]);
    slabs.give(taken[20]);
    CHECK(slabs.take() == taken[10]);
    CHECK(slabs.take() == taken[20]);
    CHECK(slabs.take() == taken[50]);
    CHECK(address(slabs.take()) == address(taken[99]) + 360);
}

TEST_CASE("block slabs: wholly free slabs are kept up to the budget and the rest given back") {
    if (!ENGINE_RECYCLES_MEMORY) return;
    SlabBudget budget{1};
    BlockSlabs slabs(4000, budget);   // 16 to a slab
    std::vector<void*> taken;
    for (int i = 0; i < 16 * 5; ++i) taken.push_back(slabs.take());
    CHECK(slabs.slab_count() == 5);
    for (void* p : taken) slabs.give(p);
    CHECK(slabs.slab_count() == 2);   // the current slab, and one spare
    CHECK(budget.spare_slabs == 1);
    for (int i = 0; i < 16 * 2; ++i) taken[i] = slabs.take();   // both reused: no new slab
    CHECK(slabs.slab_count() == 2);
    CHECK(budget.spare_slabs == 0);
    for (int i = 0; i < 16 * 2; ++i) slabs.give(taken[i]);
    slabs.release_spares();
    CHECK(slabs.slab_count() == 0);
    CHECK(budget.spare_slabs == 0);
}
