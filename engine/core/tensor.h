// tensor.h: the data side of a tensor, with no autograd in it.
//
// A Value is what one output of one node holds: a dtype, a shape and a refcounted Storage (the
// bytes, on a device) with a layout (offset and strides): views share a storage. The
// autograd side (which node made a value, its gradient) lives in tape.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "host_device.h"

namespace td {

// Freed nodes and storage blocks are kept for reuse (the hot path of a training loop), except under
// AddressSanitizer: there every free goes back to the allocator, so that a use after free is
// reported instead of silently reading a recycled block.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool ENGINE_RECYCLES_MEMORY = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool ENGINE_RECYCLES_MEMORY = false;
#else
constexpr bool ENGINE_RECYCLES_MEMORY = true;
#endif
#else
constexpr bool ENGINE_RECYCLES_MEMORY = true;
#endif

enum DType : uint8_t { DTYPE_F32, DTYPE_F64, DTYPE_I64 };
enum Device : uint8_t { DEVICE_CPU, DEVICE_CUDA };

const char* dtype_name(DType dtype);   // "float32", "float64", "int64"
size_t dtype_size(DType dtype);
bool dtype_is_float(DType dtype);
bool dtype_parse(const char* name, DType* out);   // accepts "float32"/"float"/"float64"/"double"/"int64"/"long"
const char* device_name(Device device);
bool device_parse(const char* name, Device* out);   // accepts "cpu", "cuda", "cuda:N" (N: 0 for now)

// Every error the engine raises for bad input: the message names the op and the shapes.
struct EngineError : std::runtime_error {
    using std::runtime_error::runtime_error;
};
[[noreturn]] void engine_fail(const char* format, ...) __attribute__((format(printf, 1, 2)));

// ---------------------------------------------------------------------------------------------
// Shape: up to MAX_DIMS dimensions, inline (no allocation). A 0-d shape is a scalar (numel 1).

constexpr int MAX_DIMS = 6;

struct Shape {
    int ndim = 0;
    int64_t dims[MAX_DIMS] = {};

    Shape() = default;
    Shape(std::initializer_list<int64_t> list);
    int64_t operator[](int i) const { return dims[i]; }
    int64_t numel() const {
        int64_t n = 1;
        for (int i = 0; i < ndim; ++i) n *= dims[i];
        return n;
    }
    bool operator==(const Shape& o) const;
    bool operator!=(const Shape& o) const { return !(*this == o); }
    std::string str() const;   // "[20,20]"; "[]" for a scalar
};

// A shape seen around one dim (0-based): outer (the dims before it) x n (its size) x inner (the
// dims after), as reductions, softmax and indexing along a dim walk it (CPU and CUDA kernels).
struct DimSplit {
    int64_t outer = 1, n = 1, inner = 1;
};
inline DimSplit dim_split(const Shape& s, int dim) {
    DimSplit d;
    for (int i = 0; i < dim; ++i) d.outer *= s.dims[i];
    d.n = s.dims[dim];
    for (int i = dim + 1; i < s.ndim; ++i) d.inner *= s.dims[i];
    return d;
}

// The element count of `shape`, checked: false when a size is negative or when the count, or its
// size in bytes at the widest dtype (8 bytes), does not fit in int64. Shape::numel() itself does
// not check; every shape that can reach an allocation is checked here first.
bool shape_numel_fits(const Shape& shape, int64_t* numel);
// The same, as an error naming `what` ("zeros", "load_npy: x.npy") and the shape when it fails.
int64_t shape_checked_numel(const Shape& shape, const char* what);

// ---------------------------------------------------------------------------------------------
// Storage: refcounted bytes on a device. `version` is bumped by every in-place write, so that
// autograd can tell a saved tensor was changed after it was saved.

struct Storage {
    int refcount;
    Device device;
    bool grad_owned;     // already holds some tensor's .grad: a second claimant must copy it
    bool history_copied; // the rewind history (history.h) keeps copies of its earlier bytes
    uint32_t version;
    uint32_t history_version;   // `version` after the latest in-place write autograd recorded (0: none)
    uint32_t history_refs;      // values the rewind history (history.h) holds on it: a node writing it
                                // first copies the old bytes (at HOOK_BEFORE_WRITE, tape.h)
    uint64_t serial;     // allocation order, so a backward pass can tell the storages it made
    size_t bytes;
    void* data;
};

Storage* storage_new(size_t bytes, Device device);   // refcount 1, contents uninitialised
// The bytes a storage of `bytes` on `device` really has (Storage::bytes): rounded up, 64 on the
// CPU (a cache line), 256 on a GPU.
size_t storage_rounded_bytes(size_t bytes, Device device);
void storage_free(Storage* storage);
void storage_release_cached();                        // frees the pool's cached blocks (engine_release_spares)
void strides_release_spares();                        // frees the spare Strides blocks (engine_release_spares)
size_t storage_bytes_allocated_total();               // running total, for Lua's collector
size_t storage_bytes_live();                          // bytes held by live storages right now
size_t storage_bytes_peak();                          // the most bytes live since storage_peak_reset()
void storage_peak_reset();                            // peak := live now (to measure one run)
// The memory limit: storage_new refuses to hold more than this many bytes of tensor data at once,
// with an error that gives the sizes in GB. By default 3/4 of physical memory; 0 restores that.
size_t memory_limit_bytes();
void memory_set_limit_bytes(size_t bytes);
uint64_t storage_next_serial();                       // the serial the next storage will get

inline void ref_retain(Storage* s) { ++s->refcount; }
inline void ref_release(Storage* s) {
    if (--s->refcount == 0) storage_free(s);
}

// Ref<T>: an intrusive strong reference. T provides ref_retain(T*) and ref_release(T*).
template <class T>
class Ref {
public:
    Ref() = default;
    Ref(T* p) : ptr_(p) {   // takes a new reference
        if (ptr_) ref_retain(ptr_);
    }
    Ref(const Ref& o) : ptr_(o.ptr_) {
        if (ptr_) ref_retain(ptr_);
    }
    Ref(Ref&& o) noexcept : ptr_(o.ptr_) { o.ptr_ = nullptr; }
    ~Ref() {
        if (ptr_) ref_release(ptr_);
    }
    Ref& operator=(const Ref& o) {
        if (o.ptr_) ref_retain(o.ptr_);
        if (ptr_) ref_release(ptr_);
        ptr_ = o.ptr_;
        return *this;
    }
    Ref& operator=(Ref&& o) noexcept {
        if (this != &o) {
            if (ptr_) ref_release(ptr_);
            ptr_ = o.ptr_;
            o.ptr_ = nullptr;
        }
        return *this;
    }
    static Ref adopt(T* p) {   // takes over a reference the caller already owns
        Ref r;
        r.ptr_ = p;
        return r;
    }
    T* get() const { return ptr_; }
    T* operator->() const { return ptr_; }
    T& operator*() const { return *ptr_; }
    explicit operator bool() const { return ptr_ != nullptr; }
    void reset() {
        if (ptr_) ref_release(ptr_);
        ptr_ = nullptr;
    }

private:
    T* ptr_ = nullptr;
};

// ---------------------------------------------------------------------------------------------
// Value: dtype + shape + a layout in a storage. Cheap to copy (one refcount increment).
//
// The layout: element [i1, ..., in] sits at storage element offset + i1*stride(1) + ... + in*stride(n).
// A value made by an op is contiguous (row-major from `offset`, no strides block);
// views (narrow, transpose, expand, ...) share their input's storage with another layout, and are
// strided only when that layout is not row-major (view_set_layout decides). Kernels read
// contiguous values only: kernel_run (kernel_run.cpp) makes strided inputs contiguous for the ops that
// do not take them as they are (OPF_STRIDED), and writes an in-place result back through a
// strided view. Host code reads elements through value_to_host (below), then value_get or
// value_contiguous; it writes them through value_write_from_host.

// The strides of a strided value, in elements: a refcounted block, so that the values of the
// usual, contiguous kind stay small (a node holds several values) and copy without it.
struct Strides {
    int refcount;
    int64_t dims[MAX_DIMS];

    // Views come and go with every step of a loop: a free list, not malloc (as nodes).
    static void* operator new(size_t size);
    static void operator delete(void* p);
};
inline void ref_retain(Strides* s) { ++s->refcount; }
inline void ref_release(Strides* s) {
    if (--s->refcount == 0) delete s;
}

struct Value {
    Shape shape;
    DType dtype = DTYPE_F32;
    int64_t offset = 0;       // in elements, from the start of the storage
    Ref<Storage> storage;
    Ref<Strides> layout;      // null: row-major from offset; else the strides of each dim

    bool strided() const { return static_cast<bool>(layout); }

    int64_t numel() const { return shape.numel(); }
    template <class T>
    T* data() const {   // element [0, ..., 0]
        return static_cast<T*>(storage->data) + offset;
    }
    void* raw() const { return static_cast<char*>(storage->data) + offset * static_cast<int64_t>(dtype_size(dtype)); }
    Device device() const { return storage->device; }
    bool is_contiguous() const { return !layout; }
    int64_t stride(int d) const;   // the stride of dim d (0-based), contiguous or not
};

// A backward pass frees the bytes of the gradients it has used (autograd.cpp, "Freeing gradients
// once used"): the node record stays on the tape with its shape and dtype, its value has no
// storage. Whoever reads a value it found through the tape (not through a Tensor handle, which
// keeps its value) checks this first and says VALUE_FREED_TEXT.
inline bool value_freed(const Value& v) { return !v.storage; }
constexpr const char* VALUE_FREED_TEXT =
    "freed after the backward pass used it; run with a breakpoint or the viewer open to keep it";

// Row-major strides of `shape` into out[0..ndim).
void shape_contiguous_strides(const Shape& shape, int64_t* out);
// Sets v's layout to (offset, strides) over its shape; `strided` only when that is not row-major
// (strides of size-1 dims do not matter).
void view_set_layout(Value& v, int64_t offset, const int64_t* strides);
// The storage element (from the storage's start) of v's row-major element i.
int64_t value_storage_index(const Value& v, int64_t i);
// Copies src's elements into dst's (same shape and dtype; any layouts, dst may be a view; one
// device, whose copy runs).
void value_copy_elements(const Value& dst, const Value& src);
// The same, reading and writing through the data pointers on the host (CPU values, and the
// emulated GPU's: device_emulated.h).
void value_copy_elements_on_host(const Value& dst, const Value& src);
// v itself when contiguous, else a contiguous copy (the one host boundary for layout).
Value value_contiguous(const Value& v);
// out takes in's storage and layout (an in-place op's output, before a view's kernel sets its own).
inline void value_share_layout(Value& out, const Value& in) {
    out.storage = in.storage;
    out.offset = in.offset;
    out.layout = in.layout;
}
// Whether two elements of v sit at the same place (a stride 0 over a dim longer than 1): writing
// into such a view in place is refused, as PyTorch does.
bool value_overlaps_itself(const Value& v);

// A new value with fresh (uninitialised) storage.
Value value_new(const Shape& shape, DType dtype, Device device = DEVICE_CPU);
// A double as an int64 element: truncated toward zero; NaN becomes 0 and what is out of range
// saturates at the int64 limits. C++ leaves those conversions undefined; tensors never do them.
// (Host and CUDA device code: the GPU's conversions are these same lines.)
TD_HOST_DEVICE inline int64_t int64_from_double(double x) {
    if (x != x) return 0;
    if (x >= 9223372036854775808.0) return INT64_MAX;   // 2^63: the first double past the largest int64
    if (x < -9223372036854775808.0) return INT64_MIN;
    return static_cast<int64_t>(x);
}

// An element of type Out from a value of type In (float32, float64 or int64): as C++ converts,
// except that float to int64 goes through int64_from_double.
template <class Out, class In>
TD_HOST_DEVICE inline Out element_cast(In x) {
    if constexpr (std::is_same<Out, int64_t>::value && std::is_floating_point<In>::value)
        return int64_from_double(static_cast<double>(x));
    else
        return static_cast<Out>(x);
}

// Element i (row-major over v's shape, whatever its layout) read as a double, whatever the dtype.
// Host values only: host code reads a tensor through value_to_host (below) first.
double value_get(const Value& v, int64_t i);
void value_set(const Value& v, int64_t i, double x);

// The host boundary: every reader of tensor data outside the kernels (item, totable, printing,
// guards, stats, .npy and plan files, the debugger, the viewer) goes through these, so that a
// tensor on the GPU is copied once, here, and never read through a device pointer.
// v itself when on the CPU; else a contiguous host copy (the device's queue finished first).
Value value_to_host(const Value& v);
// dst's elements := host's (same shape and dtype; host on the CPU, dst on any device and layout).
void value_write_from_host(const Value& dst, const Value& host);
// v on `device`: v itself when it is there, else a contiguous copy (not recorded: the engine's
// own moves, as a plan's inputs; a user's move is the `to_device` op).
Value value_to_device(const Value& v, Device device);

}  // namespace td
