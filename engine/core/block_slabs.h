// block_slabs.h: memory blocks of one size, laid out in the order they are taken.
//
// Nodes, a node's own attributes and edges' own values come and go by the thousand per training
// step. A plain free list hands back the block freed last, so after a few loops the blocks of one
// pass lie anywhere in memory, and a long unroll's backward walk (by decreasing id) misses the
// cache on every node. BlockSlabs cuts 64 KB slabs into blocks and always hands out the lowest
// free block of a slab: the nodes of one pass lie in record order, and walking them in either
// direction streams through memory, which the CPU prefetches.
//
// Blocks freed go back to their slab. Slabs that become wholly free are kept for reuse up to a
// budget (SlabBudget, which several BlockSlabs may share) and given back to the system beyond it;
// release_spares() gives back every wholly free slab. Blocks are 64-byte aligned when their size
// is a multiple of 64. Without ENGINE_RECYCLES_MEMORY (sanitizer builds) take/give are plain
// operator new/delete, so the checkers see every block.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "tensor.h"   // ENGINE_RECYCLES_MEMORY

namespace td {

constexpr size_t BLOCK_SLAB_BYTES = 64 * 1024;   // a slab is aligned to its size: a block finds its slab by masking

// How many wholly free slabs may be kept, and how many are.
struct SlabBudget {
    size_t max_spare_slabs;
    size_t spare_slabs = 0;
};

class BlockSlabs {
public:
    BlockSlabs(size_t block_bytes, SlabBudget& budget);   // block_bytes: at most a slab's, less a header
    void* take() {
        if (!ENGINE_RECYCLES_MEMORY) return take_unpooled();
        if (!current_ || current_->free_count == 0) next_current();
        return current_->take_lowest(block_bytes_);
    }
    void give(void* block) {
        if (!ENGINE_RECYCLES_MEMORY) return give_unpooled(block);
        Slab* slab = slab_of(block);
        slab->mark_free(static_cast<size_t>(static_cast<char*>(block) - slab->blocks()) * block_reciprocal_ >> 32);
        if (slab != current_) gave_to_other_slab(slab);
    }
    void release_spares();   // gives every wholly free slab back to the system
    size_t slab_count() const { return slabs_.size(); }

private:
    static constexpr size_t MAX_BLOCKS_PER_SLAB = 2048;

    struct Slab {
        size_t index = 0;                   // in slabs_
        size_t free_count = 0;
        size_t first_free_word = 0;         // no free block lies in a word below it
        Slab* prev = nullptr;               // in with_free_, when listed
        Slab* next = nullptr;
        bool listed = false;
        uint64_t free_bits[MAX_BLOCKS_PER_SLAB / 64] = {};   // bit set: the block is free

        static constexpr size_t BLOCKS_OFFSET = 384;   // the header, rounded up to 64 bytes
        char* blocks() { return reinterpret_cast<char*>(this) + BLOCKS_OFFSET; }
        void* take_lowest(size_t block_bytes) {   // free_count > 0
            size_t word = first_free_word;
            while (free_bits[word] == 0) ++word;
            first_free_word = word;
            int bit = __builtin_ctzll(free_bits[word]);
            free_bits[word] &= free_bits[word] - 1;
            --free_count;
            return blocks() + (word * 64 + bit) * block_bytes;
        }
        void mark_free(size_t b) {
            free_bits[b / 64] |= uint64_t(1) << (b % 64);
            if (b / 64 < first_free_word) first_free_word = b / 64;
            ++free_count;
        }
    };
    static_assert(sizeof(Slab) <= Slab::BLOCKS_OFFSET, "BlockSlabs: the slab header outgrew its room");

    static Slab* slab_of(void* block) {
        return reinterpret_cast<Slab*>(reinterpret_cast<uintptr_t>(block) & ~(uintptr_t(BLOCK_SLAB_BYTES) - 1));
    }
    void* take_unpooled();
    void give_unpooled(void* block);
    void next_current();                  // current_ is full: take a listed slab, or a new one
    void gave_to_other_slab(Slab* slab);  // lists it; gives it back when wholly free beyond the budget
    Slab* slab_new();
    void slab_delete(Slab* slab);
    void with_free_push(Slab* slab);
    void with_free_remove(Slab* slab);

    size_t block_bytes_;
    uint64_t block_reciprocal_;      // ceil(2^32 / block_bytes_): (offset * it) >> 32 = offset / block_bytes_ in a slab
    size_t blocks_per_slab_;
    SlabBudget& budget_;             // counts this allocator's wholly free slabs (and maybe others')
    Slab* current_ = nullptr;        // the slab blocks are taken from
    Slab* with_free_ = nullptr;      // other slabs with a free block: a doubly linked list
    std::vector<Slab*> slabs_;       // every slab (each knows its index here)
};

}  // namespace td
