// tensor.cpp: dtypes, shapes, and the storage allocator.
//
// The allocator keeps freed blocks of 4 KiB and more in exact-size free lists (capped), because a
// training loop frees and re-allocates the same sizes every step and going back to the kernel for
// each (mmap, page faults, zeroing) costs more than the arithmetic on small models.
#include "tensor.h"

#include "device.h"
#include "device_emulated.h"

#include "block_slabs.h"

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unistd.h>
#include <unordered_map>
#include <vector>

namespace td {

const char* dtype_name(DType dtype) {
    switch (dtype) {
        case DTYPE_F32: return "float32";
        case DTYPE_F64: return "float64";
        case DTYPE_I64: return "int64";
    }
    return "?";
}

size_t dtype_size(DType dtype) { return dtype == DTYPE_F32 ? 4 : 8; }

bool dtype_is_float(DType dtype) { return dtype != DTYPE_I64; }

bool dtype_parse(const char* name, DType* out) {
    struct Alias { const char* name; DType dtype; };
    static const Alias aliases[] = {
        {"float32", DTYPE_F32}, {"float", DTYPE_F32}, {"float64", DTYPE_F64},
        {"double", DTYPE_F64},  {"int64", DTYPE_I64}, {"long", DTYPE_I64},
    };
    for (const Alias& a : aliases) {
        if (strcmp(a.name, name) == 0) {
            *out = a.dtype;
            return true;
        }
    }
    return false;
}

const char* device_name(Device device) { return device == DEVICE_CPU ? "cpu" : "cuda"; }

bool device_parse(const char* name, Device* out) {
    if (strcmp(name, "cpu") == 0 || strcmp(name, "cpu:0") == 0) *out = DEVICE_CPU;
    else if (strcmp(name, "cuda") == 0 || strcmp(name, "cuda:0") == 0) *out = DEVICE_CUDA;
    else return false;
    return true;
}

void engine_fail(const char* format, ...) {
    char buffer[1024];
    va_list args;
    va_start(args, format);
    vsnprintf(buffer, sizeof buffer, format, args);
    va_end(args);
    throw EngineError(buffer);
}

// ---------------------------------------------------------------------------------------------
// Shape

Shape::Shape(std::initializer_list<int64_t> list) {
    if (list.size() > MAX_DIMS) engine_fail("shape: at most %d dimensions", MAX_DIMS);
    for (int64_t d : list) dims[ndim++] = d;
}

bool Shape::operator==(const Shape& o) const {
    if (ndim != o.ndim) return false;
    for (int i = 0; i < ndim; ++i)
        if (dims[i] != o.dims[i]) return false;
    return true;
}

namespace {

// Whether the row-major strides of `shape` fit in int64, counted as PyTorch counts them (a dim of
// size 0 counts as 1, so [0, 2^40, 2^40] has a stride of 2^80 and is refused as PyTorch refuses it,
// while [2^40, 0, 2^40] is accepted).
bool shape_strides_fit(const Shape& shape) {
    int64_t stride = 1;
    for (int i = shape.ndim - 1; i > 0; --i)
        if (__builtin_mul_overflow(stride, std::max<int64_t>(shape.dims[i], 1), &stride)) return false;
    return true;
}

}  // namespace

bool shape_numel_fits(const Shape& shape, int64_t* numel) {
    int64_t n = 1;
    for (int i = 0; i < shape.ndim; ++i) {
        if (shape.dims[i] < 0 || __builtin_mul_overflow(n, shape.dims[i], &n)) return false;
    }
    int64_t bytes;
    if (__builtin_mul_overflow(n, int64_t(8), &bytes) || !shape_strides_fit(shape)) return false;
    *numel = n;
    return true;
}

int64_t shape_checked_numel(const Shape& shape, const char* what) {
    int64_t numel = 0;
    if (shape_numel_fits(shape, &numel)) return numel;
    for (int i = 0; i < shape.ndim; ++i)
        if (shape.dims[i] < 0) engine_fail("%s: negative size %lld in shape %s", what, static_cast<long long>(shape.dims[i]), shape.str().c_str());
    if (!shape_strides_fit(shape))
        engine_fail("%s: shape %s cannot be laid out: its strides overflow 64 bits (a size-0 dim counts as 1 in a "
                    "stride, as in PyTorch)",
                    what, shape.str().c_str());
    engine_fail("%s: shape %s has more elements than a tensor can hold (its element count overflows 64 bits)", what,
                shape.str().c_str());
}

std::string Shape::str() const {
    std::string s = "[";
    for (int i = 0; i < ndim; ++i) {
        if (i) s += ",";
        s += std::to_string(dims[i]);
    }
    return s + "]";
}

// ---------------------------------------------------------------------------------------------
// Storage allocator

namespace {

constexpr size_t HEADER_BYTES = 64;              // Storage header, padded so data is 64-aligned
constexpr size_t SMALL_LIMIT = 4096;             // up to this, sizes are classes of 64 bytes
constexpr size_t POOL_MAX_CACHED = 256u << 20;   // never keep more than this in free lists or spare slabs

// Small blocks (header + data up to SMALL_LIMIT) come from BlockSlabs, one per 64-byte class: a
// loop's small tensors then lie in the order they were made, as its nodes do, and a long unroll's
// backward pass streams through them. Big blocks are kept for reuse in lists per exact size (a
// training loop asks for the same sizes every step). The pool is immortal (made on first use,
// never destroyed): a tensor can die during static destruction, after a destroyed pool's lists
// would be gone. Its cached blocks stay reachable from it, so leak checkers do not count them;
// storage_release_cached() frees them at orderly shutdown.
struct StoragePool {
    SlabBudget small_budget{POOL_MAX_CACHED / 2 / BLOCK_SLAB_BYTES};
    BlockSlabs* small_slabs[SMALL_LIMIT / 64 + 1] = {};   // made on first use
    std::unordered_map<size_t, std::vector<Storage*>> big_free;
    size_t cached_bytes = 0;   // in big_free
    size_t allocated_total = 0;
    size_t live_bytes = 0;
    size_t peak_bytes = 0;
    uint64_t next_serial = 1;
    size_t memory_limit = 0;   // memory_limit_bytes; 0: the default

    BlockSlabs& small_class(size_t rounded) {
        BlockSlabs*& slabs = small_slabs[rounded / 64];
        if (!slabs) slabs = new BlockSlabs(HEADER_BYTES + rounded, small_budget);
        return *slabs;
    }
    void drop_all() {
        for (BlockSlabs* slabs : small_slabs)
            if (slabs) slabs->release_spares();
        for (auto& entry : big_free)
            for (Storage* s : entry.second) std::free(s);
        big_free.clear();
        cached_bytes = 0;
    }
};

StoragePool& pool() {
    static StoragePool* instance = new StoragePool;
    return *instance;
}

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

size_t default_memory_limit() {
    long pages = sysconf(_SC_PHYS_PAGES), page_size = sysconf(_SC_PAGE_SIZE);
    if (pages <= 0 || page_size <= 0) return size_t(8) << 30;
    return static_cast<size_t>(pages) / 4 * 3 * static_cast<size_t>(page_size);
}

// "4 MB", "1.5 GB", "16 KB", "300 bytes": a size in the unit that shows it (the memory-limit error).
std::string bytes_text(size_t bytes) {
    char text[48];
    double x = static_cast<double>(bytes);
    if (bytes >= (size_t(100) << 30)) snprintf(text, sizeof text, "%.0f GB", x / static_cast<double>(size_t(1) << 30));
    else if (bytes >= (size_t(1) << 30)) snprintf(text, sizeof text, "%.3g GB", x / static_cast<double>(size_t(1) << 30));
    else if (bytes >= (size_t(1) << 20)) snprintf(text, sizeof text, "%.3g MB", x / static_cast<double>(size_t(1) << 20));
    else if (bytes >= 1024) snprintf(text, sizeof text, "%.3g KB", x / 1024);
    else snprintf(text, sizeof text, "%zu bytes", bytes);
    return text;
}

}  // namespace

size_t memory_limit_bytes() {
    StoragePool& p = pool();
    if (p.memory_limit == 0) p.memory_limit = default_memory_limit();
    return p.memory_limit;
}

void memory_set_limit_bytes(size_t bytes) { pool().memory_limit = bytes; }

size_t storage_rounded_bytes(size_t bytes, Device device) {
    return round_up(bytes == 0 ? 1 : bytes, device == DEVICE_CPU ? 64 : 256);
}

// A GPU storage: the header on the host, the bytes from the device's caching allocator.
static Storage* device_storage_new(size_t bytes, Device device) {
    size_t rounded = storage_rounded_bytes(bytes, device);
    Storage* s = new Storage;
    try {
        s->data = cuda_alloc(rounded);
    } catch (...) {
        delete s;
        throw;
    }
    s->refcount = 1;
    s->device = device;
    s->grad_owned = false;
    s->history_copied = false;
    s->history_refs = 0;
    s->version = 0;
    s->history_version = 0;
    s->serial = pool().next_serial++;
    s->bytes = rounded;
    return s;
}

Storage* storage_new(size_t bytes, Device device) {
    if (device != DEVICE_CPU) return device_storage_new(bytes, device);
    StoragePool& p = pool();
    size_t limit = memory_limit_bytes();
    if (bytes > limit || p.live_bytes > limit - bytes)
        engine_fail("out of memory: %s asked for, with %s of the %s memory limit in use "
                    "(torch.set_memory_limit changes it)",
                    bytes_text(bytes).c_str(), bytes_text(p.live_bytes).c_str(), bytes_text(limit).c_str());
    size_t rounded = storage_rounded_bytes(bytes, DEVICE_CPU);
    Storage* s = nullptr;
    if (rounded <= SMALL_LIMIT) {
        s = static_cast<Storage*>(p.small_class(rounded).take());
    } else if (std::vector<Storage*>& list = p.big_free[rounded]; !list.empty()) {
        s = list.back();
        list.pop_back();
        p.cached_bytes -= rounded;
    } else {
        void* block = std::aligned_alloc(64, HEADER_BYTES + rounded);
        if (!block) engine_fail("out of memory allocating %zu bytes", bytes);
        s = static_cast<Storage*>(block);
    }
    s->data = reinterpret_cast<char*>(s) + HEADER_BYTES;
    s->refcount = 1;
    s->device = device;
    s->grad_owned = false;
    s->history_copied = false;
    s->history_refs = 0;
    s->version = 0;
    s->history_version = 0;
    s->serial = p.next_serial++;
    s->bytes = rounded;
    p.allocated_total += rounded;
    p.live_bytes += rounded;
    if (p.live_bytes > p.peak_bytes) p.peak_bytes = p.live_bytes;
    return s;
}

void storage_free(Storage* s) {
    if (s->device != DEVICE_CPU) {
        cuda_free(s->data, s->bytes);
        delete s;
        return;
    }
    StoragePool& p = pool();
    p.live_bytes -= s->bytes;
    if (s->bytes <= SMALL_LIMIT) {
        p.small_class(s->bytes).give(s);
        return;
    }
    if (!ENGINE_RECYCLES_MEMORY) {
        std::free(s);
        return;
    }
    if (p.cached_bytes + s->bytes > POOL_MAX_CACHED / 2) p.drop_all();
    p.big_free[s->bytes].push_back(s);
    p.cached_bytes += s->bytes;
}

void storage_release_cached() { pool().drop_all(); }

size_t storage_bytes_allocated_total() { return pool().allocated_total; }
size_t storage_bytes_live() { return pool().live_bytes; }
size_t storage_bytes_peak() { return pool().peak_bytes; }
void storage_peak_reset() { pool().peak_bytes = pool().live_bytes; }
uint64_t storage_next_serial() { return pool().next_serial; }

// ---------------------------------------------------------------------------------------------
// Value

Value value_new(const Shape& shape, DType dtype, Device device) {
    Value v;
    v.shape = shape;
    v.dtype = dtype;
    int64_t numel = shape_checked_numel(shape, "tensor");
    v.storage = Ref<Storage>::adopt(storage_new(static_cast<size_t>(numel) * dtype_size(dtype), device));
    return v;
}

namespace {
std::vector<void*>& spare_strides() {
    static auto* list = new std::vector<void*>();   // immortal, as the engine's other singletons
    return *list;
}
}  // namespace

void* Strides::operator new(size_t size) {
    std::vector<void*>& list = spare_strides();
    if (!ENGINE_RECYCLES_MEMORY || list.empty()) return ::operator new(size);
    void* p = list.back();
    list.pop_back();
    return p;
}

void Strides::operator delete(void* p) {
    std::vector<void*>& list = spare_strides();
    if (ENGINE_RECYCLES_MEMORY && list.size() < 4096) list.push_back(p);
    else ::operator delete(p);
}

void strides_release_spares() {
    std::vector<void*>& list = spare_strides();
    for (void* p : list) ::operator delete(p);
    list.clear();
}

int64_t Value::stride(int d) const {
    if (layout) return layout->dims[d];
    int64_t s = 1;
    for (int i = shape.ndim - 1; i > d; --i) s *= shape.dims[i];
    return s;
}

void shape_contiguous_strides(const Shape& shape, int64_t* out) {
    int64_t s = 1;
    for (int i = shape.ndim - 1; i >= 0; --i) {
        out[i] = s;
        s *= shape.dims[i];
    }
}

void view_set_layout(Value& v, int64_t offset, const int64_t* strides) {
    v.offset = offset;
    int64_t expected = 1;
    bool row_major = true;
    for (int i = v.shape.ndim - 1; i >= 0; --i) {
        if (v.shape.dims[i] != 1 && strides[i] != expected) row_major = false;
        expected *= v.shape.dims[i];
    }
    if (row_major || v.shape.numel() <= 1) {
        v.layout.reset();
        return;
    }
    if (!v.layout || v.layout->refcount > 1) v.layout = Ref<Strides>::adopt(new Strides{1, {}});   // else reused
    for (int i = 0; i < MAX_DIMS; ++i) v.layout->dims[i] = i < v.shape.ndim ? strides[i] : 0;
}

int64_t value_storage_index(const Value& v, int64_t i) {
    if (!v.layout) return v.offset + i;
    int64_t at = v.offset;
    for (int d = v.shape.ndim - 1; d >= 0; --d) {
        int64_t size = v.shape.dims[d];
        at += (i % size) * v.layout->dims[d];
        i /= size;
    }
    return at;
}

namespace {

// A copy's loop: the dims that are left after dropping size-1 dims and merging neighbours that
// both layouts walk as one (an expand of a [1] to [20,1] is one run of 20 with source stride 0).
struct CopyLoop {
    int ndim = 0;
    int64_t size[MAX_DIMS], dst_stride[MAX_DIMS], src_stride[MAX_DIMS];

    CopyLoop(const Value& dst, const Value& src) {
        for (int d = 0; d < dst.shape.ndim; ++d) {
            int64_t n = dst.shape.dims[d];
            if (n == 1) continue;
            int64_t ds = dst.stride(d), ss = src.stride(d);
            if (ndim > 0 && dst_stride[ndim - 1] == ds * n && src_stride[ndim - 1] == ss * n) {
                size[ndim - 1] *= n;   // the outer dim steps over exactly this one: one dim
                dst_stride[ndim - 1] = ds;
                src_stride[ndim - 1] = ss;
                continue;
            }
            size[ndim] = n, dst_stride[ndim] = ds, src_stride[ndim] = ss;
            ++ndim;
        }
    }
};

template <class T>
void copy_elements(const Value& dst, const Value& src) {
    if (dst.numel() == 0) return;
    CopyLoop loop(dst, src);
    T* out = static_cast<T*>(dst.storage->data) + dst.offset;
    const T* in = static_cast<const T*>(src.storage->data) + src.offset;
    if (loop.ndim == 0) {
        *out = *in;
        return;
    }
    int last = loop.ndim - 1;
    int64_t row = loop.size[last], ds = loop.dst_stride[last], ss = loop.src_stride[last];
    int64_t index[MAX_DIMS] = {};
    for (;;) {
        if (ds == 1 && ss == 1) std::memmove(out, in, row * sizeof(T));
        else if (ds == 1 && ss == 0) std::fill(out, out + row, *in);
        else for (int64_t j = 0; j < row; ++j) out[j * ds] = in[j * ss];
        int d = last - 1;   // the next row: advance the outer dims like an odometer
        for (; d >= 0; --d) {
            out += loop.dst_stride[d];
            in += loop.src_stride[d];
            if (++index[d] < loop.size[d]) break;
            out -= loop.dst_stride[d] * loop.size[d];
            in -= loop.src_stride[d] * loop.size[d];
            index[d] = 0;
        }
        if (d < 0) return;
    }
}

}  // namespace

void value_copy_elements(const Value& dst, const Value& src) {
    if (dst.device() != src.device())
        engine_fail("copy: a %s tensor into a %s tensor (use to_device)", device_name(src.device()),
                    device_name(dst.device()));
    if (dst.device() != DEVICE_CPU) cuda_copy_elements(dst, src);
    else value_copy_elements_on_host(dst, src);
}

void value_copy_elements_on_host(const Value& dst, const Value& src) {
    switch (dst.dtype) {
        case DTYPE_F32: copy_elements<float>(dst, src); break;
        case DTYPE_F64: copy_elements<double>(dst, src); break;
        case DTYPE_I64: copy_elements<int64_t>(dst, src); break;
    }
}

Value value_contiguous(const Value& v) {
    if (!v.layout) return v;
    Value out = value_new(v.shape, v.dtype, v.device());
    value_copy_elements(out, v);
    return out;
}

bool value_overlaps_itself(const Value& v) {
    if (!v.layout) return false;
    for (int d = 0; d < v.shape.ndim; ++d)
        if (v.layout->dims[d] == 0 && v.shape.dims[d] > 1) return true;
    return false;
}

// Element access from host code reads host memory only: a device value goes through
// value_to_host first (the one boundary), and reading one here is a bug named as such.
static void check_on_host(const Value& v) {
    if (v.device() != DEVICE_CPU && !emulated_kernel_running())
        engine_fail("internal error: a %s tensor's element read on the host without value_to_host",
                    device_name(v.device()));
}

double value_get(const Value& v, int64_t i) {
    check_on_host(v);
    int64_t at = value_storage_index(v, i);
    switch (v.dtype) {
        case DTYPE_F32: return static_cast<const float*>(v.storage->data)[at];
        case DTYPE_F64: return static_cast<const double*>(v.storage->data)[at];
        case DTYPE_I64: return static_cast<double>(static_cast<const int64_t*>(v.storage->data)[at]);
    }
    return 0;
}

void value_set(const Value& v, int64_t i, double x) {
    check_on_host(v);
    int64_t at = value_storage_index(v, i);
    switch (v.dtype) {
        case DTYPE_F32: static_cast<float*>(v.storage->data)[at] = static_cast<float>(x); break;
        case DTYPE_F64: static_cast<double*>(v.storage->data)[at] = x; break;
        case DTYPE_I64: static_cast<int64_t*>(v.storage->data)[at] = int64_from_double(x); break;
    }
}

}  // namespace td

namespace td {

Value value_to_host(const Value& v) {
    if (v.device() == DEVICE_CPU) return v;
    Value dense = value_contiguous(v);   // on the device
    Value host = value_new(v.shape, v.dtype, DEVICE_CPU);
    device_copy_bytes(host.raw(), DEVICE_CPU, dense.raw(), dense.device(),
                      static_cast<size_t>(v.numel()) * dtype_size(v.dtype));
    return host;
}

void value_write_from_host(const Value& dst, const Value& host) {
    if (dst.device() == DEVICE_CPU) {
        value_copy_elements(dst, host);
        return;
    }
    Value dense_host = value_contiguous(host);
    size_t bytes = static_cast<size_t>(dst.numel()) * dtype_size(dst.dtype);
    if (dst.is_contiguous()) {
        device_copy_bytes(dst.raw(), dst.device(), dense_host.raw(), DEVICE_CPU, bytes);
        return;
    }
    Value staged = value_new(dst.shape, dst.dtype, dst.device());
    device_copy_bytes(staged.raw(), staged.device(), dense_host.raw(), DEVICE_CPU, bytes);
    cuda_copy_elements(dst, staged);
}

Value value_to_device(const Value& v, Device device) {
    if (v.device() == device) return v;
    if (device == DEVICE_CPU) return value_to_host(v);
    Value dense = value_contiguous(v);
    Value out = value_new(v.shape, v.dtype, device);
    device_copy_bytes(out.raw(), device, dense.raw(), dense.device(),
                      static_cast<size_t>(v.numel()) * dtype_size(v.dtype));
    return out;
}

}  // namespace td
