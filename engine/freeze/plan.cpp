// plan.cpp: freeze — the plan's own data structures: ValueIds, interned shapes (ShapeRef), the
// table of attribute sets (PlanAttrsTable), and the helpers the room's files share (plan_internal.h).
// The layers are in files of their own (plan.h says the contract):
//
//   plan_record.cpp     the node and gradient observers, plan_record_*
//   plan_compile.cpp    dead nodes, common subexpressions, constants, fusion, gradients in place,
//                       guard hoisting, liveness-based buffers; plan_compile
//   plan_run.cpp        the run-time state, guards, fused loops, plan_check_inputs, plan_run
//   plan_describe.cpp   plan_describe and the names of values and guards
//   plan_pack.cpp       packed steps; plan_file.cpp plan files; plan_log.cpp the pass log
#include "plan.h"
#include "plan_internal.h"

#include <algorithm>
#include <cstring>
#include <deque>
#include <unordered_map>

namespace td {


// The root of every value: the value whose bytes it shares, following alias_of to the end of the
// chain. O(values) for all of them: a loop of in-place ops makes a chain as long as the loop, and
// walking it per lookup made freeze quadratic (x:add_(w) 20,000 times took 11 s to compile).
std::vector<int> plan_value_roots(const Plan& plan) {
    std::vector<int> roots(plan.values.size(), -1);
    std::vector<int> path;
    for (size_t v = 0; v < roots.size(); ++v) {
        int w = static_cast<int>(v);
        while (roots[w] < 0 && plan.values[w].alias_of >= 0) {
            path.push_back(w);
            w = plan.values[w].alias_of;
        }
        int root = roots[w] >= 0 ? roots[w] : w;
        roots[w] = root;
        for (int on_path : path) roots[on_path] = root;
        path.clear();
    }
    return roots;
}

FreezeState& freeze_state() {
    static FreezeState state;
    return state;
}

double plan_seconds_since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

namespace {

// A hash of the attributes that tell steps apart (equal attributes hash equal; attrs_equal decides).
size_t attrs_hash(const OpAttrs& a) {
    size_t h = 0;
    auto mix = [&h](size_t x) { h = h * 1000003u ^ x; };
    for (int64_t x : {int64_t(a.dim), int64_t(a.dim2), a.start, a.length, int64_t(a.shape.ndim), int64_t(a.strides.ndim),
                      int64_t(a.dtype), int64_t(a.trans_a) * 2 + a.trans_b + 4 * a.accumulate + 8 * a.keepdim + 16 * a.all,
                      int64_t(a.kernel_h), int64_t(a.stride_h), int64_t(a.padding_h), int64_t(a.groups)})
        mix(std::hash<int64_t>()(x));
    for (double x : {a.scalar, a.lo, a.hi}) mix(std::hash<double>()(x));
    for (int i = 0; i < a.shape.ndim; ++i) mix(std::hash<int64_t>()(a.shape[i]));
    for (int i = 0; i < a.strides.ndim; ++i) mix(std::hash<int64_t>()(a.strides[i]));
    return h;
}

}  // namespace

const Value& plan_captured_value(const PlanCaptured& captured) { return captured.tensor.value(); }

// A long loop's plan has a million steps and values: these sizes are most of its memory.
static_assert(sizeof(ValueIds) == 16, "ValueIds: 3 ids, or a capacity and a pointer, and a count");
static_assert(sizeof(PlanValue) == 32, "PlanValue: its shape is interned (ShapeRef)");
static_assert(sizeof(PlanStep) <= 80, "PlanStep: fused lists behind one pointer, no padding");

ValueIds::ValueIds(std::initializer_list<int> ids) : ValueIds() {
    reserve(ids.size());
    for (int id : ids) push_back(id);
}

ValueIds::ValueIds(const std::vector<int>& ids) : ValueIds() {
    reserve(ids.size());
    for (int id : ids) push_back(id);
}

ValueIds::ValueIds(const ValueIds& other) : ValueIds() { *this = other; }

ValueIds::ValueIds(ValueIds&& other) noexcept : ValueIds() { *this = std::move(other); }

ValueIds& ValueIds::operator=(const ValueIds& other) {
    if (this == &other) return *this;
    clear();
    reserve(other.size_);
    for (int id : other) push_back(id);
    return *this;
}

ValueIds& ValueIds::operator=(ValueIds&& other) noexcept {
    if (this == &other) return *this;
    if (on_heap_) delete[] heap();
    std::copy(other.words_, other.words_ + INLINE, words_);   // the ids, or the capacity and the pointer
    size_ = other.size_;
    on_heap_ = other.on_heap_;
    other.size_ = 0;
    other.on_heap_ = 0;   // the pointer, if any, is ours now
    return *this;
}

int* ValueIds::heap() const {
    int* ids;
    std::memcpy(&ids, &words_[1], sizeof ids);
    return ids;
}

void ValueIds::set_heap(int* ids, size_t capacity) {
    words_[0] = static_cast<int>(capacity);
    std::memcpy(&words_[1], &ids, sizeof ids);
    on_heap_ = 1;
}

void ValueIds::reserve(size_t n) {
    if (n <= capacity()) return;
    if (n > 0x7fffffff) engine_fail("a plan step with %zu values (at most 2^31 - 1)", n);
    int* grown = new int[n];
    std::copy(begin(), end(), grown);
    if (on_heap_) delete[] heap();
    set_heap(grown, n);   // over the inline ids, copied above
}

void ValueIds::push_back(int id) {
    if (size_ == capacity()) reserve(2 * capacity());
    data()[size_++] = id;
}

bool ValueIds::operator==(const ValueIds& other) const {
    return size_ == other.size_ && std::equal(begin(), end(), other.begin());
}

OpAttrs& plan_step_own_attrs(Plan& plan, PlanStep& step) {
    plan.attrs.push_back(plan.attrs[step.attrs]);
    step.attrs = static_cast<int>(plan.attrs.size()) - 1;
    return plan.attrs.back();
}

// The interned shapes: each distinct one once, in a deque (its elements never move), found by a
// hash of ndim and dims.
const Shape& ShapeRef::intern(const Shape& shape) {
    static std::deque<Shape> shapes;
    static std::unordered_multimap<size_t, const Shape*> by_hash;
    size_t h = std::hash<int>()(shape.ndim);
    for (int i = 0; i < shape.ndim; ++i) h = h * 1000003u ^ std::hash<int64_t>()(shape.dims[i]);
    auto range = by_hash.equal_range(h);
    for (auto it = range.first; it != range.second; ++it)
        if (*it->second == shape) return *it->second;
    shapes.push_back(shape);
    by_hash.emplace(h, &shapes.back());
    return shapes.back();
}

PlanAttrsTable::PlanAttrsTable(Plan& plan) : plan_(plan) {
    for (size_t i = 0; i < plan.attrs.size(); ++i) by_hash_.emplace(attrs_hash(plan.attrs[i]), static_cast<int>(i));
}

int PlanAttrsTable::index_of(const OpAttrs& attrs) {
    size_t hash = attrs_hash(attrs);
    auto candidates = by_hash_.equal_range(hash);
    for (auto it = candidates.first; it != candidates.second; ++it)
        if (attrs_equal(plan_.attrs[it->second], attrs)) return it->second;
    plan_.attrs.push_back(attrs);
    plan_.attrs.back().init_values = nullptr;   // not an attribute (OpAttrs)
    int index = static_cast<int>(plan_.attrs.size()) - 1;
    by_hash_.emplace(hash, index);
    return index;
}

}  // namespace td
