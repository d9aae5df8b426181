// block_slabs.cpp: see block_slabs.h.
#include "block_slabs.h"

#include <cstdlib>
#include <new>
#include <stdexcept>

namespace td {

BlockSlabs::BlockSlabs(size_t block_bytes, SlabBudget& budget) : block_bytes_((block_bytes + 7) / 8 * 8), budget_(budget) {
    // (offset * reciprocal) >> 32 is offset / block_bytes_ exactly for offset < 2^16: the
    // reciprocal's rounding error adds less than offset / 2^32 < 2^-16 <= 1 / block_bytes_.
    block_reciprocal_ = ((uint64_t(1) << 32) + block_bytes_ - 1) / block_bytes_;
    blocks_per_slab_ = (BLOCK_SLAB_BYTES - Slab::BLOCKS_OFFSET) / block_bytes_;
    if (blocks_per_slab_ > MAX_BLOCKS_PER_SLAB) blocks_per_slab_ = MAX_BLOCKS_PER_SLAB;
    if (blocks_per_slab_ == 0) throw std::logic_error("BlockSlabs: a block does not fit in a slab");
}

void* BlockSlabs::take_unpooled() { return ::operator new(block_bytes_, std::align_val_t(64)); }

void BlockSlabs::give_unpooled(void* block) { ::operator delete(block, std::align_val_t(64)); }

void BlockSlabs::next_current() {
    if (!with_free_) {
        current_ = slab_new();
        return;
    }
    current_ = with_free_;
    with_free_remove(current_);
    if (current_->free_count == blocks_per_slab_) --budget_.spare_slabs;
}

void BlockSlabs::gave_to_other_slab(Slab* slab) {
    if (!slab->listed) with_free_push(slab);
    if (slab->free_count < blocks_per_slab_) return;
    if (budget_.spare_slabs < budget_.max_spare_slabs) {
        ++budget_.spare_slabs;
        return;
    }
    with_free_remove(slab);
    slab_delete(slab);
}

BlockSlabs::Slab* BlockSlabs::slab_new() {
    void* memory = std::aligned_alloc(BLOCK_SLAB_BYTES, BLOCK_SLAB_BYTES);
    if (!memory) throw std::bad_alloc();
    Slab* slab = new (memory) Slab;
    slab->index = slabs_.size();
    slab->free_count = blocks_per_slab_;
    for (size_t b = 0; b < blocks_per_slab_; ++b) slab->free_bits[b / 64] |= uint64_t(1) << (b % 64);
    slabs_.push_back(slab);
    return slab;
}

void BlockSlabs::slab_delete(Slab* slab) {
    Slab* last = slabs_.back();
    slabs_[slab->index] = last;
    last->index = slab->index;
    slabs_.pop_back();
    slab->~Slab();
    std::free(slab);
}

void BlockSlabs::with_free_push(Slab* slab) {
    slab->prev = nullptr;
    slab->next = with_free_;
    if (with_free_) with_free_->prev = slab;
    with_free_ = slab;
    slab->listed = true;
}

void BlockSlabs::with_free_remove(Slab* slab) {
    if (slab->prev) slab->prev->next = slab->next;
    else with_free_ = slab->next;
    if (slab->next) slab->next->prev = slab->prev;
    slab->prev = slab->next = nullptr;
    slab->listed = false;
}

void BlockSlabs::release_spares() {
    for (size_t i = slabs_.size(); i-- > 0;) {
        Slab* slab = slabs_[i];
        if (slab->free_count != blocks_per_slab_) continue;
        if (slab == current_) current_ = nullptr;
        else --budget_.spare_slabs;   // a wholly free slab other than the current one is listed and counted
        if (slab->listed) with_free_remove(slab);
        slab_delete(slab);
    }
}

}  // namespace td
