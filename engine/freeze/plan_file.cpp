// plan_file.cpp: plans as files (.tdp). (.npy files: npy.cpp.)
//
// A plan file is data only: a fixed header, then a payload of counts, numbers, strings and raw
// tensor bytes, all little-endian. Nothing in it is code; ops are named (not numbered), so a file
// stays readable when the op table grows. Loading checks the header (magic, version, size,
// checksum), reads with bounds checks, then checks the plan itself: every index in range, every
// value defined before it is read, every .grad read where it is set, and every step's shapes,
// dtypes and attributes against its op's shape rule, so a kernel never sees a shape or an attribute
// that could make it read or write out of bounds.
//
//   header   "TDPLAN\r\n", u32 version, u32 flags (0), u64 payload bytes, u64 FNV-1a of the payload
//   payload  see plan_save_bytes / read_payload (the same order)
//
// A plan may cost no more memory than a bound (PlanLoadOptions::max_bytes): what loading,
// compiling and running it would allocate is computed from its values before anything big is
// allocated (plan_memory_bound). Counts are checked against the bytes left before allocating.
//
// [SECTION] bytes      Writer and Reader
// [SECTION] fields     each field by the lists in plan.h: the ways a field is in a file, per struct
// [SECTION] save       plan_save_bytes, plan_save
// [SECTION] read       the payload, field by field
// [SECTION] check      check_inputs, check_values, check_targets, check_guards, check_step, check_outputs
// [SECTION] memory     plan_memory_bound
// [SECTION] load       plan_load_bytes, plan_load
#include <cerrno>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string_view>
#include <iterator>
#include <type_traits>

#include "kernels_cpu.h"
#include "npy.h"
#include "plan.h"
#include "plan_internal.h"

namespace td {

namespace {

constexpr char PLAN_MAGIC[8] = {'T', 'D', 'P', 'L', 'A', 'N', '\r', '\n'};
// 2: OpAttrs.strides (regions). 3: conv2d / max_pool2d windows along H and W (kernel, stride and
// padding became kernel_h, stride_h, padding_h, each with a _w beside it), dilation, groups,
// ceil_mode. 4: each step's recorded group (the forward node a backward step differentiates, shown
// by the debugger). Files of versions 1 to 3 still load (their backward steps name no group).
constexpr uint32_t PLAN_VERSION = 5;
constexpr uint32_t PLAN_OLDEST_VERSION = 1;
constexpr size_t HEADER_BYTES = 32;
constexpr uint32_t MAX_COUNT = 1u << 24;          // of any list in a plan

uint64_t fnv1a(const char* data, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; ++i) {
        h ^= static_cast<unsigned char>(data[i]);
        h *= 1099511628211ull;
    }
    return h;
}

// ============================================================================================
// [SECTION] bytes

struct Writer {
    std::string bytes;
    template <class T>
    void raw(T x) {
        bytes.append(reinterpret_cast<const char*>(&x), sizeof x);
    }
    void u8(uint32_t x) { raw(static_cast<uint8_t>(x)); }
    void i32(int64_t x) { raw(static_cast<int32_t>(x)); }
    void u32(size_t x) { raw(static_cast<uint32_t>(x)); }
    void i64(int64_t x) { raw(x); }
    void f64(double x) { raw(x); }
    void str(const std::string& s) {
        u32(s.size());
        bytes += s;
    }
    void shape(const Shape& s) {
        u8(static_cast<uint32_t>(s.ndim));
        for (int i = 0; i < s.ndim; ++i) i64(s.dims[i]);
    }
    void tensor(const Value& v) {
        u8(v.dtype);
        shape(v.shape);
        size_t n = static_cast<size_t>(v.numel()) * dtype_size(v.dtype);
        raw(static_cast<uint64_t>(n));
        Value elements = value_contiguous(value_to_host(v));   // a captured view: its elements in row-major order
        bytes.append(static_cast<const char*>(elements.raw()), n);
    }
    void loc(SourceLoc where) {
        str(where.file >= 0 ? source_file_name(where.file) : "");
        i32(where.line);
    }
};

// The least number of bytes one element of each list takes in a file (Writer's layout), so that
// a count can be checked against the bytes left before anything is allocated for it.
constexpr size_t MIN_STRING_BYTES = 4;                           // u32 length
constexpr size_t MIN_LOC_BYTES = MIN_STRING_BYTES + 4;            // file, line
constexpr size_t MIN_TENSOR_BYTES = 1 + 1 + 8;                    // dtype, ndim, byte count
// An attribute field's least size (Writer's layout; a shape is at least its ndim byte).
template <class T>
constexpr size_t min_field_bytes() {
    if constexpr (std::is_same_v<T, Shape>) return 1;
    else if constexpr (std::is_enum_v<T> || std::is_same_v<T, bool>) return 1;
    else return sizeof(T);
}
// The plan file version that added an attribute field: older files do not have it (it keeps its
// default), so plans saved by an earlier tapedeck still load. A new field: add it here with the
// version that PLAN_VERSION goes up to.
constexpr uint32_t attr_field_since(std::string_view name) {
    if (name == "strides") return 2;
    if (name == "kernel_w" || name == "stride_w" || name == "padding_w" || name == "dilation_h" ||
        name == "dilation_w" || name == "groups" || name == "ceil_mode")
        return 3;
    if (name == "device") return 5;
    return 1;
}
// The fewest bytes a step's attributes take in any version this tapedeck reads.
#define FIELD_BYTES(type, name, initial, what) +(attr_field_since(#name) == 1 ? min_field_bytes<type>() : 0)
constexpr size_t MIN_ATTRS_BYTES = 0 OP_ATTRS_FIELDS(FIELD_BYTES);
#undef FIELD_BYTES
constexpr size_t MIN_INPUT_BYTES = MIN_STRING_BYTES + 3 + 1;
constexpr size_t MIN_CAPTURED_BYTES = MIN_STRING_BYTES + 1 + MIN_TENSOR_BYTES;
constexpr size_t MIN_TARGET_BYTES = 1 + 3 * 4;
constexpr size_t MIN_VALUE_BYTES = 1 + 4 + 1 + 1 + 4 + 8;
constexpr size_t MIN_STEP_BYTES = 1 + MIN_STRING_BYTES + MIN_ATTRS_BYTES + 4 + 4 + 4 + 1 + MIN_LOC_BYTES + 8;
constexpr size_t MIN_GUARD_BYTES = 1 + 4 + 4 + 1 + 1 + 4 + 8 + 1 + 4 + 1 + MIN_LOC_BYTES + MIN_STRING_BYTES;
constexpr size_t MIN_OUTPUT_BYTES = 2 * 4;

struct Reader {
    const std::string& name;   // the file, for messages
    const char* data;
    size_t size;
    size_t at = 0;
    uint32_t version = PLAN_VERSION;   // the file's: fields added later are not in it

    [[noreturn]] void bad(const std::string& why) const {
        engine_fail("load_plan: %s: %s", name.c_str(), why.c_str());
    }
    void need(size_t n) const {
        if (n > size - at) bad("the file is truncated (it ends inside the plan)");
    }
    template <class T>
    T raw() {
        need(sizeof(T));
        T x;
        std::memcpy(&x, data + at, sizeof x);
        at += sizeof x;
        return x;
    }
    uint32_t u8() { return raw<uint8_t>(); }
    int i32() { return raw<int32_t>(); }
    // A list's length. Each element takes at least `min_bytes` in the file, so a count the bytes
    // left cannot hold fails here, before anything is allocated for it.
    uint32_t count(const char* what, size_t min_bytes) {
        uint32_t n = raw<uint32_t>();
        if (n > MAX_COUNT) bad(std::string("too many ") + what + " (" + std::to_string(n) + ")");
        if (static_cast<uint64_t>(n) * min_bytes > size - at)
            bad("the file says it holds " + std::to_string(n) + " " + what + ", but only " + std::to_string(size - at) +
                " bytes are left");
        return n;
    }
    int64_t i64() { return raw<int64_t>(); }
    double f64() { return raw<double>(); }
    bool flag() {
        uint32_t b = u8();
        if (b > 1) bad("a yes/no field holds " + std::to_string(b));
        return b == 1;
    }
    std::string str() {
        uint32_t n = count("string bytes", 1);
        std::string s(data + at, n);
        at += n;
        return s;
    }
    DType dtype() {
        uint32_t d = u8();
        if (d > DTYPE_I64) bad("unknown dtype " + std::to_string(d));
        return static_cast<DType>(d);
    }
    Shape dims() {
        Shape s;
        uint32_t n = u8();
        if (n > MAX_DIMS) bad("a shape has " + std::to_string(n) + " dims (at most " + std::to_string(MAX_DIMS) + ")");
        s.ndim = static_cast<int>(n);
        for (int i = 0; i < s.ndim; ++i) s.dims[i] = i64();
        return s;
    }
    // The shape of a tensor: sizes not negative, and an element count that fits.
    Shape shape() {
        Shape s = dims();
        int64_t numel;
        if (!shape_numel_fits(s, &numel))
            bad("a tensor of shape " + s.str() + " (a negative size, or more elements than a tensor can hold)");
        return s;
    }
    // An op's shape attribute: as recorded (a reshape's -1 included); the op's shape rule checks it.
    Shape attr_shape() { return dims(); }
    Value tensor() {
        DType d = dtype();
        Shape s = shape();
        uint64_t n = raw<uint64_t>();
        if (n != static_cast<uint64_t>(s.numel()) * dtype_size(d))
            bad("a tensor of shape " + s.str() + " holds " + std::to_string(n) + " bytes");
        need(n);   // the bytes are in the file: what is allocated here is at most the file's size
        Value v = value_new(s, d);
        std::memcpy(v.raw(), data + at, n);
        at += n;
        return v;
    }
    SourceLoc loc() {
        std::string file = str();
        SourceLoc where;
        if (!file.empty()) where.file = source_file_intern(file.c_str());
        where.line = i32();
        return where;
    }
    int enum_value(uint32_t last, const char* what) {
        uint32_t v = u8();
        if (v > last) bad(std::string("unknown ") + what + " " + std::to_string(v));
        return static_cast<int>(v);
    }
};

}  // namespace

// ============================================================================================
// [SECTION] fields
//
// Each field by the lists in plan.h (PLAN_FIELDS and the lists of Plan's structs), in their order:
// write_<file> and read_<file> for each way a field is in a file, and write_item / read_item per struct.

namespace {

// Version 1 recorded transpose, expand and narrow as copies; they are views now: their outputs
// share input 0's bytes, as a plan recorded today says (check_plan then checks it as usual).
void upgrade_version_1_views(Plan& plan) {
    int n_values = static_cast<int>(plan.values.size());
    for (const PlanStep& s : plan.steps) {
        bool became_view = s.op == OP_transpose || s.op == OP_expand || s.op == OP_narrow;
        if (s.kind != STEP_KERNEL || !became_view || s.inputs.empty() || s.outputs.empty()) continue;
        int in = s.inputs[0], out = s.outputs[0];
        if (in >= 0 && in < out && out < n_values && plan.values[out].alias_of == -1) plan.values[out].alias_of = in;
    }
}

// Versions 1 and 2 had one kernel, stride and padding for both axes, saved where kernel_h,
// stride_h and padding_h are now: the W values are the same.
void upgrade_version_2_window(OpAttrs& a) {
    a.kernel_w = a.kernel_h;
    a.stride_w = a.stride_h;
    a.padding_w = a.padding_h;
}

// Fields by their type (the lists' `plain`; an op's attributes, OP_ATTRS_FIELDS in ops.h, too),
// each in its type's layout. A shape here is an attribute's, as recorded; a tensor's is `shape`.
void write_field(Writer& w, double x) { w.f64(x); }
void write_field(Writer& w, int x) { w.i32(x); }
void write_field(Writer& w, int64_t x) { w.i64(x); }
void write_field(Writer& w, size_t x) { w.raw(static_cast<uint64_t>(x)); }
void write_field(Writer& w, bool x) { w.u8(x); }
void write_field(Writer& w, Reduction x) { w.u8(x); }
void write_field(Writer& w, DType x) { w.u8(x); }
void write_field(Writer& w, Device x) { w.u8(x); }
void write_field(Writer& w, ValueKind x) { w.u8(x); }
void write_field(Writer& w, StepKind x) { w.u8(x); }
void write_field(Writer& w, Phase x) { w.u8(x); }
void write_field(Writer& w, GuardKind x) { w.u8(x); }
void write_field(Writer& w, CompareOp x) { w.u8(x); }
void write_field(Writer& w, OpId x) { w.str(op_info(x).name); }
void write_field(Writer& w, const Shape& x) { w.shape(x); }
void write_field(Writer& w, const std::string& x) { w.str(x); }
void write_field(Writer& w, SourceLoc x) { w.loc(x); }
void write_field(Writer& w, const ValueIds& x) {
    w.u32(x.size());
    for (int v : x) w.i32(v);
}
void write_field(Writer& w, const std::vector<double>& x) {
    w.u32(x.size());
    for (double v : x) w.f64(v);
}

void read_field(Reader& r, double& x) { x = r.f64(); }
void read_field(Reader& r, int& x) { x = r.i32(); }
void read_field(Reader& r, int64_t& x) { x = r.i64(); }
void read_field(Reader& r, size_t& x) { x = static_cast<size_t>(r.raw<uint64_t>()); }
void read_field(Reader& r, bool& x) { x = r.flag(); }
void read_field(Reader& r, Reduction& x) { x = static_cast<Reduction>(r.enum_value(REDUCTION_SUM, "reduction")); }
void read_field(Reader& r, DType& x) { x = r.dtype(); }
void read_field(Reader& r, Device& x) { x = static_cast<Device>(r.enum_value(DEVICE_CUDA, "device")); }
void read_field(Reader& r, ValueKind& x) { x = static_cast<ValueKind>(r.enum_value(VALUE_STEP, "value kind")); }
void read_field(Reader& r, StepKind& x) { x = static_cast<StepKind>(r.enum_value(STEP_GUARD, "step kind")); }
void read_field(Reader& r, Phase& x) { x = static_cast<Phase>(r.enum_value(PHASE_BACKWARD, "phase")); }
void read_field(Reader& r, GuardKind& x) { x = static_cast<GuardKind>(r.enum_value(GUARD_GRAD_STATE, "guard kind")); }
void read_field(Reader& r, CompareOp& x) { x = static_cast<CompareOp>(r.enum_value(COMPARE_LE, "comparison")); }
void read_field(Reader& r, OpId& x) {
    std::string op = r.str();
    if (!op_find(op.c_str(), &x)) r.bad("the plan uses op '" + op + "', which this tapedeck does not have");
}
void read_field(Reader& r, Shape& x) { x = r.attr_shape(); }   // as recorded; the op's shape rule checks it
void read_field(Reader& r, std::string& x) { x = r.str(); }
void read_field(Reader& r, SourceLoc& x) { x = r.loc(); }
void read_field(Reader& r, ValueIds& x) {
    std::vector<int> list(r.count("indices", 4));
    for (int& v : list) v = r.i32();
    x = list;
}
void read_field(Reader& r, std::vector<double>& x) {
    x.resize(r.count("guard values", 8));
    for (double& v : x) v = r.f64();
}

void write_attrs(Writer& w, const OpAttrs& a) {
#define WRITE_FIELD(type, name, initial, what) write_field(w, a.name);
    OP_ATTRS_FIELDS(WRITE_FIELD)
#undef WRITE_FIELD
}

OpAttrs read_attrs(Reader& r) {
    OpAttrs a;
#define READ_FIELD(type, name, initial, what) \
    if (r.version >= attr_field_since(#name)) read_field(r, a.name);
    OP_ATTRS_FIELDS(READ_FIELD)
#undef READ_FIELD
    return a;
}

// What writing a plan's fields needs beside them (the lists' other `file` ways), and reading.
struct SaveContext {
    const Plan& plan;
    const PlanPasses& passes;   // the passes to use on load (plan_save's argument)
};

struct LoadContext {
    Plan& plan;
    PlanPasses& passes;
    PlanAttrsTable attrs{plan};   // the steps' attribute sets, each distinct one once
};

// One element of a list, by its struct's field list (defined below, after the ways to write a field).
#define PLAN_FILE_STRUCTS(STRUCT)                                                                    \
    STRUCT(PlanInput, PLAN_INPUT_FIELDS, "inputs", MIN_INPUT_BYTES)                                  \
    STRUCT(PlanCaptured, PLAN_CAPTURED_FIELDS, "captured tensors", MIN_CAPTURED_BYTES)               \
    STRUCT(GradTarget, PLAN_GRAD_TARGET_FIELDS, "gradient targets", MIN_TARGET_BYTES)                \
    STRUCT(PlanValue, PLAN_VALUE_FIELDS, "values", MIN_VALUE_BYTES)                                  \
    STRUCT(PlanStep, PLAN_STEP_FIELDS, "steps", MIN_STEP_BYTES)                                      \
    STRUCT(PlanGuard, PLAN_GUARD_FIELDS, "guards", MIN_GUARD_BYTES)                                  \
    STRUCT(PlanOutput, PLAN_OUTPUT_FIELDS, "outputs", MIN_OUTPUT_BYTES)                              \
    STRUCT(PlanPasses, PLAN_PASSES_FIELDS, "passes", 6)                                              \
    STRUCT(PlanStats, PLAN_STATS_FIELDS, "stats", 12)
#define DECLARE_ITEM(type, fields, what, min_bytes)                  \
    void write_item(Writer& w, const SaveContext& c, const type& x); \
    void read_item(Reader& r, LoadContext& c, type& x);              \
    [[maybe_unused]] constexpr const char* list_what(const type*) { return what; } \
    [[maybe_unused]] constexpr size_t list_min_bytes(const type*) { return min_bytes; }
PLAN_FILE_STRUCTS(DECLARE_ITEM)
#undef DECLARE_ITEM
// Constants are tensors.
void write_item(Writer& w, const SaveContext&, const Value& x) { w.tensor(x); }
void read_item(Reader& r, LoadContext&, Value& x) { x = r.tensor(); }
constexpr const char* list_what(const Value*) { return "constants"; }
constexpr size_t list_min_bytes(const Value*) { return MIN_TENSOR_BYTES; }

// The ways a field is in a file: FIELD(name, file, since)'s `file` (plan.h).
template <class T>
void write_plain(Writer& w, const SaveContext&, const T& x) {
    write_field(w, x);
}
template <class T>
void read_plain(Reader& r, LoadContext&, T& x) {
    read_field(r, x);
}
template <class T>
void write_none(Writer&, const SaveContext&, const T&) {}
template <class T>
void read_none(Reader&, LoadContext&, T&) {}

void write_shape(Writer& w, const SaveContext&, const Shape& x) { w.shape(x); }
void read_shape(Reader& r, LoadContext&, Shape& x) { x = r.shape(); }
void read_shape(Reader& r, LoadContext&, ShapeRef& x) { x = r.shape(); }

void write_attrs(Writer& w, const SaveContext& c, int x) { write_attrs(w, c.plan.attrs[x]); }
void read_attrs(Reader& r, LoadContext& c, int& x) {
    OpAttrs a = read_attrs(r);
    if (r.version < 3) upgrade_version_2_window(a);
    x = c.attrs.index_of(a);
}

// A captured tensor: whether it requires grad, then its data. Loaded, it is a new leaf.
void write_captured(Writer& w, const SaveContext&, const Tensor& x) {
    w.u8(x.requires_grad());
    w.tensor(x.value());
}
void read_captured(Reader& r, LoadContext&, Tensor& x) {
    bool requires_grad = r.flag();
    Value v = r.tensor();
    if (requires_grad && !dtype_is_float(v.dtype)) r.bad("an int64 captured tensor requires grad");
    x = tape_record_prepared(OP_tensor, OpAttrs(), nullptr, nullptr, 0, &v, 1, PHASE_FORWARD, SourceLoc());
    node_set_requires_grad(x.node.get(), 0, requires_grad);
}

template <class List>
void write_list(Writer& w, const SaveContext& c, const List& list) {
    w.u32(list.size());
    for (const auto& x : list) write_item(w, c, x);
}
template <class List>
void read_list(Reader& r, LoadContext& c, List& list) {
    using T = std::decay_t<decltype(list[0])>;
    list.resize(r.count(list_what(static_cast<const T*>(nullptr)), list_min_bytes(static_cast<const T*>(nullptr))));
    for (T& x : list) read_item(r, c, x);
}

template <class T>
void write_fields(Writer& w, const SaveContext& c, const T& x) {
    write_item(w, c, x);
}
template <class T>
void read_fields(Reader& r, LoadContext& c, T& x) {
    read_item(r, c, x);
}

void write_passes(Writer& w, const SaveContext& c, const PlanPasses&) { write_item(w, c, c.passes); }
void read_passes(Reader& r, LoadContext& c, PlanPasses&) { read_item(r, c, c.passes); }

// A recording's steps: its packed ones unpacked; backward groups are not written (the debug
// replay of a loaded plan announces none).
void write_steps(Writer& w, const SaveContext& c, const BigVector<PlanStep>& plan_steps) {
    auto written = [](const PlanStep& s) { return s.kind != STEP_GROUP_DONE; };
    BigVector<PlanStep> unpacked;
    if (c.plan.packed.count) unpacked = plan_unpacked_steps(c.plan);
    const BigVector<PlanStep>& steps = c.plan.packed.count ? unpacked : plan_steps;
    w.u32(static_cast<uint32_t>(std::count_if(steps.begin(), steps.end(), written)));
    for (const PlanStep& s : steps)
        if (written(s)) write_item(w, c, s);
}
void read_steps(Reader& r, LoadContext& c, BigVector<PlanStep>& steps) {
    read_list(r, c, steps);
    if (r.version < 2) upgrade_version_1_views(c.plan);
}

#define WRITE_FIELD(name, file, since) write_##file(w, c, x.name);
#define READ_FIELD(name, file, since) \
    if (r.version >= (since)) read_##file(r, c, x.name);
#define DEFINE_ITEM(type, fields, what, min_bytes)                                  \
    void write_item(Writer& w, const SaveContext& c, const type& x) { fields(WRITE_FIELD) } \
    void read_item(Reader& r, LoadContext& c, type& x) { fields(READ_FIELD) }
PLAN_FILE_STRUCTS(DEFINE_ITEM)
#undef DEFINE_ITEM
#undef READ_FIELD
#undef WRITE_FIELD

// The payload: Plan's fields by PLAN_FIELDS (plan.h).
std::string write_payload(const Plan& plan, const PlanPasses& passes) {
    Writer w;
    SaveContext c{plan, passes};
    const Plan& x = plan;
#define WRITE_PLAN_FIELD(name, file, since, copy) write_##file(w, c, x.name);
    PLAN_FIELDS(WRITE_PLAN_FIELD)
#undef WRITE_PLAN_FIELD
    return std::move(w.bytes);
}

}  // namespace

// ============================================================================================
// [SECTION] save

std::string plan_save_bytes(const Plan& plan, const PlanPasses& passes) {
    std::string payload = plan_payload_bytes(plan, passes);
    Writer header;
    header.bytes.append(PLAN_MAGIC, sizeof PLAN_MAGIC);
    header.raw(PLAN_VERSION);
    header.raw(static_cast<uint32_t>(0));
    header.raw(static_cast<uint64_t>(payload.size()));
    header.raw(fnv1a(payload.data(), payload.size()));
    return header.bytes + payload;
}

std::string plan_payload_bytes(const Plan& plan, const PlanPasses& passes) {
    if (plan.compiled) engine_fail("save_plan: needs the recorded plan, not a compiled one");
    for (const PlanValue& v : plan.values)   // the file keeps no device per value yet (docs/cuda.md)
        if (v.kind == VALUE_STEP && v.device != DEVICE_CPU)
            engine_fail("save_plan: the plan runs on %s; plan files hold CPU plans only so far", device_name(v.device));
    return write_payload(plan, passes);
}

void plan_save(const Plan& plan, const PlanPasses& passes, const std::string& path) {
    file_write_whole(path, plan_save_bytes(plan, passes), "save_plan");
}

// ============================================================================================
// [SECTION] read

namespace {

// The payload, field by field in plan_save's order (PLAN_FIELDS). Captured tensors become new leaves.
std::unique_ptr<Plan> read_payload(Reader& r, PlanPasses* passes) {
    auto plan = std::make_unique<Plan>();
    LoadContext c{*plan, *passes};
    Plan& x = *plan;
#define READ_PLAN_FIELD(name, file, since, copy) \
    if (r.version >= (since)) read_##file(r, c, x.name);
    PLAN_FIELDS(READ_PLAN_FIELD)
#undef READ_PLAN_FIELD
    if (r.at != r.size) r.bad("the plan ends before the payload does");
    return plan;
}

}  // namespace

std::unique_ptr<Plan> plan_payload_read(const std::string& payload, PlanPasses* passes) {
    Reader r{"payload", payload.data(), payload.size()};
    return read_payload(r, passes);
}

// ============================================================================================
// [SECTION] check
//
// What a loaded plan must be for the passes and plan_run to handle it: every index in range,
// values read only after they exist, each kernel step's inputs of the dtypes its kernel reads and
// its outputs what its op's shape rule says (the rule checks the step's attributes too), so that
// no kernel sees a shape or an attribute that could make it read or write out of bounds.

namespace {

void check_index(const Reader& r, int v, size_t n, const std::string& what) {
    if (v < 0 || static_cast<size_t>(v) >= n) r.bad(what + " refers to " + std::to_string(v) + ", out of range");
}

// An input that requires grad is a float tensor.
void check_inputs(const Reader& r, const Plan& plan) {
    for (size_t k = 0; k < plan.inputs.size(); ++k)
        if (plan.inputs[k].requires_grad && !dtype_is_float(plan.inputs[k].dtype))
            r.bad("input " + std::to_string(k + 1) + " is int64 and requires grad");
}

// Each value stands for what its kind says, with that tensor's shape and dtype; only a step's
// value may share the bytes of an earlier value.
void check_values(const Reader& r, const Plan& plan) {
    for (size_t v = 0; v < plan.values.size(); ++v) {
        const PlanValue& pv = plan.values[v];
        std::string what = "value " + std::to_string(v);
        const Value* like = nullptr;
        switch (pv.kind) {
            case VALUE_INPUT: {
                check_index(r, pv.index, plan.inputs.size(), what);
                const PlanInput& in = plan.inputs[pv.index];
                if (pv.shape != in.shape || pv.dtype != in.dtype) r.bad(what + " does not match the input it stands for");
                break;
            }
            case VALUE_CAPTURED:
                check_index(r, pv.index, plan.captured.size(), what);
                like = &plan_captured_value(plan.captured[pv.index]);
                break;
            case VALUE_CONSTANT:
                check_index(r, pv.index, plan.constants.size(), what);
                like = &plan.constants[pv.index];
                break;
            case VALUE_GRAD:
                check_index(r, pv.index, plan.grad_targets.size(), what);
                if (plan.grad_targets[pv.index].grad_value != static_cast<int>(v))
                    r.bad(what + " is the .grad of a target that disowns it");
                break;
            case VALUE_STEP:
                if (pv.index != -1) r.bad(what + " is made by a step but names an index " + std::to_string(pv.index));
                break;
        }
        if (like && (pv.shape != like->shape || pv.dtype != like->dtype))
            r.bad(what + " does not match the tensor it stands for");
        if (pv.alias_of != -1 && (pv.kind != VALUE_STEP || pv.alias_of < 0 || pv.alias_of >= static_cast<int>(v)))
            r.bad(what + " shares the bytes of value " + std::to_string(pv.alias_of) + ", which it cannot");
    }
}

// Each gradient target is an input or a captured tensor, with its own VALUE_GRAD value of the
// target's shape and dtype; a captured target requires grad.
void check_targets(const Reader& r, const Plan& plan) {
    for (size_t t = 0; t < plan.grad_targets.size(); ++t) {
        const GradTarget& g = plan.grad_targets[t];
        std::string what = "gradient target " + std::to_string(t);
        if (g.kind != VALUE_CAPTURED && g.kind != VALUE_INPUT) r.bad(what + " is neither an input nor a captured tensor");
        check_index(r, g.index, g.kind == VALUE_INPUT ? plan.inputs.size() : plan.captured.size(), what);
        check_index(r, g.grad_value, plan.values.size(), what);
        const PlanValue& gv = plan.values[g.grad_value];
        Shape shape = g.kind == VALUE_INPUT ? plan.inputs[g.index].shape : plan_captured_value(plan.captured[g.index]).shape;
        DType dtype = g.kind == VALUE_INPUT ? plan.inputs[g.index].dtype : plan_captured_value(plan.captured[g.index]).dtype;
        if (g.output != 0 || gv.kind != VALUE_GRAD || gv.index != static_cast<int>(t) || gv.shape != shape || gv.dtype != dtype)
            r.bad(what + " is inconsistent");
        if (g.kind == VALUE_CAPTURED && !plan.captured[g.index].tensor.requires_grad())
            r.bad(what + " receives gradients but its tensor does not require grad");
    }
}

// A kernel step: an op a plan can run, with the inputs and outputs its op takes, of the dtypes
// op_call would have given its kernel, and outputs as its shape rule makes them.
void check_kernel_step(const Reader& r, const Plan& plan, const PlanStep& s, const std::string& what) {
    const OpInfo& info = op_info(s.op);
    if ((info.flags & OPF_CUSTOM) || s.op == OP_tensor) r.bad(what + " is not an op a plan can run");
    int n_in = static_cast<int>(s.inputs.size());
    if (info.n_inputs >= 0 ? n_in != info.n_inputs : n_in < 1) r.bad(what + " has the wrong number of inputs");
    if (s.outputs.empty() || static_cast<int>(s.outputs.size()) > info.max_outputs)
        r.bad(what + " has the wrong number of outputs");
    if (s.target != -1) r.bad(what + " names a target");
    const OpAttrs& attrs = plan_step_attrs(plan, s);
    if (attrs.accumulate) r.bad(what + " adds into its output, which only a compiled plan's steps do");
    std::vector<Value> inputs(n_in);   // shapes and dtypes only: what the shape rule reads
    std::vector<const Value*> pointers;
    for (int i = 0; i < n_in; ++i) {
        inputs[i].shape = plan.values[s.inputs[i]].shape;
        inputs[i].dtype = plan.values[s.inputs[i]].dtype;
        pointers.push_back(&inputs[i]);
    }
    for (int i = 0; i < n_in; ++i) {
        DType d = inputs[i].dtype;
        bool same_as_first = d == inputs[0].dtype;
        bool needs_same = (info.flags & OPF_PROMOTE) || ((info.flags & OPF_INPLACE) && i == 1) || s.op == OP_masked_fill;
        if ((needs_same && !same_as_first) || ((info.flags & OPF_FLOAT_ONLY) && !dtype_is_float(d)))
            r.bad(what + " has inputs of dtypes its kernel does not take");
    }
    ShapeCall call(info.name, pointers.data(), n_in, attrs);
    try {
        info.shape_rule(call);
    } catch (const EngineError& e) {
        r.bad(what + ": " + e.what());
    }
    if (call.n_outputs != static_cast<int>(s.outputs.size())) r.bad(what + " has the wrong number of outputs");
    for (int i = 0; i < call.n_outputs; ++i) {
        const PlanValue& out = plan.values[s.outputs[i]];
        if (out.shape != call.shapes[i] || out.dtype != call.dtypes[i])
            r.bad(what + " makes " + out.shape.str() + " " + dtype_name(out.dtype) + " where its op makes " +
                  call.shapes[i].str() + " " + dtype_name(call.dtypes[i]));
        bool shares = i == 0 && (info.flags & (OPF_VIEW | OPF_INPLACE));
        if (out.alias_of != (shares ? s.inputs[0] : -1))
            r.bad(what + " shares bytes it should not");
    }
}

// Whether each gradient target's .grad is set, as the steps go: known at the start only from a
// GUARD_GRAD_STATE guard (checked before a run), set by an accumulation, nil after a clear. A
// VALUE_GRAD value is read only where its .grad is known to be set (else a kernel would read nil).
enum GradState : int8_t { GRAD_UNKNOWN, GRAD_SET, GRAD_NIL };

std::vector<GradState> initial_grad_states(const Reader& r, const Plan& plan) {
    std::vector<GradState> states(plan.grad_targets.size(), GRAD_UNKNOWN);
    for (const PlanGuard& g : plan.guards) {
        if (g.kind != GUARD_GRAD_STATE) continue;
        GradState state = g.defined ? GRAD_SET : GRAD_NIL;
        if (states[g.target] != GRAD_UNKNOWN && states[g.target] != state)
            r.bad("two guards disagree on whether gradient target " + std::to_string(g.target) + " has a .grad");
        states[g.target] = state;
    }
    return states;
}

void check_grad_read(const Reader& r, const Plan& plan, int v, const std::vector<GradState>& grads, const std::string& what) {
    const PlanValue& pv = plan.values[v];
    if (pv.kind == VALUE_GRAD && grads[pv.index] != GRAD_SET)
        r.bad(what + " reads the .grad of gradient target " + std::to_string(pv.index) + " where it may be nil");
}

// Step k, in order: `defined` says which values exist before it, and gets its outputs; `grads`
// which .grad are set.
void check_step(const Reader& r, const Plan& plan, size_t k, std::vector<bool>& defined, std::vector<GradState>& grads) {
    const PlanStep& s = plan.steps[k];
    std::string what = "step " + std::to_string(k + 1) + " (" + op_info(s.op).name + ")";
    for (int v : s.inputs) {
        check_index(r, v, plan.values.size(), what);
        if (!defined[v]) r.bad(what + " reads value " + std::to_string(v) + " before it is made");
        check_grad_read(r, plan, v, grads, what);
    }
    for (int v : s.outputs) {
        check_index(r, v, plan.values.size(), what);
        if (defined[v] || plan.values[v].kind != VALUE_STEP) r.bad(what + " makes value " + std::to_string(v) + " twice");
        defined[v] = true;
    }
    switch (s.kind) {
        case STEP_KERNEL: check_kernel_step(r, plan, s, what); break;
        case STEP_GRAD_ACCUMULATE: {
            check_index(r, s.target, plan.grad_targets.size(), what);
            const PlanValue& gv = plan.values[plan.grad_targets[s.target].grad_value];
            if (s.inputs.size() != 1 || !s.outputs.empty() || plan.values[s.inputs[0]].shape != gv.shape ||
                plan.values[s.inputs[0]].dtype != gv.dtype)
                r.bad(what + " accumulates a gradient that does not fit");
            grads[s.target] = GRAD_SET;
            break;
        }
        case STEP_GRAD_CLEAR:
            check_index(r, s.target, plan.grad_targets.size(), what);
            if (!s.inputs.empty() || !s.outputs.empty()) r.bad(what + " is inconsistent");
            grads[s.target] = GRAD_NIL;
            break;
        case STEP_GUARD: {
            check_index(r, s.target, plan.guards.size(), what);
            const PlanGuard& g = plan.guards[s.target];
            std::vector<int> want{g.value};
            if (g.other_value >= 0) want.push_back(g.other_value);
            if (s.inputs != want || !s.outputs.empty() || g.kind == GUARD_GRAD_STATE) r.bad(what + " is inconsistent");
            break;
        }
        default: r.bad(what + " is of a kind a recorded plan does not have");
    }
}

// A values guard expects one number per element; a comparison reads one number from each side; a
// grad-state guard names a gradient target. Fields a kind does not use hold -1, as the recorder
// writes them (the passes renumber every value a guard names).
void check_guards(const Reader& r, const Plan& plan) {
    for (size_t g = 0; g < plan.guards.size(); ++g) {
        const PlanGuard& guard = plan.guards[g];
        std::string what = "guard " + std::to_string(g + 1);
        if (guard.kind == GUARD_GRAD_STATE) {
            check_index(r, guard.target, plan.grad_targets.size(), what);
            if (guard.value != -1 || guard.other_value != -1) r.bad(what + " is inconsistent");
            continue;
        }
        if (guard.target != -1 || (guard.kind == GUARD_VALUES && guard.other_value != -1)) r.bad(what + " is inconsistent");
        check_index(r, guard.value, plan.values.size(), what);
        int64_t numel = plan.values[guard.value].shape.numel();
        if (guard.kind == GUARD_VALUES && static_cast<int64_t>(guard.expected.size()) != numel) r.bad(what + " is inconsistent");
        if (guard.kind == GUARD_COMPARE) {
            if (numel != 1) r.bad(what + " compares a tensor that is not one number");
            if (guard.other_value < -1) r.bad(what + " is inconsistent");
            if (guard.other_value >= 0) {
                check_index(r, guard.other_value, plan.values.size(), what);
                if (plan.values[guard.other_value].shape.numel() != 1) r.bad(what + " is inconsistent");
            }
        }
    }
}

void check_outputs(const Reader& r, const Plan& plan, const std::vector<bool>& defined, const std::vector<GradState>& grads) {
    for (const PlanOutput& o : plan.outputs) {
        check_index(r, o.value, plan.values.size(), "an output");
        if (!defined[o.value]) r.bad("an output is never made");
        check_grad_read(r, plan, o.value, grads, "an output");
        if (o.grad_value != -1) {
            check_index(r, o.grad_value, plan.values.size(), "an output's gradient");
            if (!defined[o.grad_value]) r.bad("an output's gradient is never made");
            check_grad_read(r, plan, o.grad_value, grads, "an output's gradient");
        }
    }
}

void check_plan(const Reader& r, const Plan& plan) {
    check_inputs(r, plan);
    check_values(r, plan);
    check_targets(r, plan);
    check_guards(r, plan);
    std::vector<GradState> grads = initial_grad_states(r, plan);
    std::vector<bool> defined(plan.values.size(), false);
    for (size_t v = 0; v < plan.values.size(); ++v) defined[v] = plan.values[v].kind != VALUE_STEP;
    for (size_t k = 0; k < plan.steps.size(); ++k) check_step(r, plan, k, defined, grads);
    check_outputs(r, plan, defined, grads);
}

// shape x dtype in bytes; SIZE_MAX when it does not fit.
size_t value_bytes(const Shape& shape, DType dtype) {
    int64_t numel;
    if (!shape_numel_fits(shape, &numel)) return SIZE_MAX;
    return static_cast<size_t>(numel) * dtype_size(dtype);   // numel * 8 fits (shape_numel_fits)
}

}  // namespace

// ============================================================================================
// [SECTION] memory

size_t plan_memory_bound(const Plan& plan) {
    size_t total = 0;
    auto add = [&](size_t bytes) {
        if (__builtin_add_overflow(total, bytes, &total)) total = SIZE_MAX;
    };
    for (const PlanInput& in : plan.inputs) add(value_bytes(in.shape, in.dtype));
    for (const PlanCaptured& c : plan.captured) add(value_bytes(plan_captured_value(c).shape, plan_captured_value(c).dtype));
    for (const Value& v : plan.constants) add(value_bytes(v.shape, v.dtype));
    for (const PlanValue& v : plan.values)
        if ((v.kind == VALUE_STEP && v.alias_of < 0) || v.kind == VALUE_GRAD) add(value_bytes(v.shape, v.dtype));
    size_t scratch = 0;
    for (const PlanStep& s : plan.steps) {
        if (s.kind != STEP_KERNEL || s.outputs.empty()) continue;
        std::vector<Value> inputs(s.inputs.size());
        std::vector<const Value*> pointers;
        for (size_t i = 0; i < s.inputs.size(); ++i) {
            inputs[i].shape = plan.values[s.inputs[i]].shape;
            inputs[i].dtype = plan.values[s.inputs[i]].dtype;
            pointers.push_back(&inputs[i]);
        }
        const PlanValue& out = plan.values[s.outputs[0]];
        scratch = std::max(scratch, cpu_kernel_scratch_bytes(s.op, pointers.data(), static_cast<int>(pointers.size()),
                                                             out.shape, out.dtype, plan_step_attrs(plan, s)));
    }
    add(scratch);
    return total;
}

size_t plan_load_default_max_bytes() { return memory_limit_bytes() / 2; }

// ============================================================================================
// [SECTION] load

std::unique_ptr<Plan> plan_load_bytes(const std::string& bytes, const std::string& name, PlanPasses* passes,
                                      const PlanLoadOptions& options) {
    size_t max_bytes = options.max_bytes ? options.max_bytes : plan_load_default_max_bytes();
    Reader h{name, bytes.data(), bytes.size()};
    if (bytes.size() < sizeof PLAN_MAGIC || std::memcmp(bytes.data(), PLAN_MAGIC, sizeof PLAN_MAGIC) != 0)
        h.bad("not a tapedeck plan file (it does not start with TDPLAN)");
    h.at = sizeof PLAN_MAGIC;
    uint32_t version = h.raw<uint32_t>();
    if (version < PLAN_OLDEST_VERSION || version > PLAN_VERSION)
        h.bad("plan file version " + std::to_string(version) + " (this tapedeck reads versions " +
              std::to_string(PLAN_OLDEST_VERSION) + " to " + std::to_string(PLAN_VERSION) + ")");
    uint32_t flags = h.raw<uint32_t>();
    if (flags != 0) h.bad("unknown flags " + std::to_string(flags));
    uint64_t payload = h.raw<uint64_t>();
    uint64_t checksum = h.raw<uint64_t>();
    if (bytes.size() - HEADER_BYTES < payload) h.bad("the file is truncated (" + std::to_string(bytes.size()) + " bytes)");
    if (bytes.size() - HEADER_BYTES > payload) h.bad("the file has extra bytes after the plan");
    if (fnv1a(bytes.data() + HEADER_BYTES, payload) != checksum) h.bad("checksum mismatch: the file is corrupted");
    if (bytes.size() > max_bytes)
        h.bad("the file is " + bytes_text(bytes.size()) + ", more than the bound of " + bytes_text(max_bytes) + " (max_bytes)");

    Reader r{name, bytes.data() + HEADER_BYTES, payload};
    r.version = version;
    std::unique_ptr<Plan> plan = read_payload(r, passes);
    check_plan(r, *plan);
    size_t needs = plan_memory_bound(*plan);
    if (needs > max_bytes)
        r.bad("the plan needs " + bytes_text(needs) + " (its tensors, buffers and kernel scratch, counted without reuse) "
              "and the bound is " + bytes_text(max_bytes) + " (raise it with max_bytes, or --max-bytes for run-plan)");
    return plan;
}

std::unique_ptr<Plan> plan_load(const std::string& path, PlanPasses* passes, const PlanLoadOptions& options) {
    size_t max_bytes = options.max_bytes ? options.max_bytes : plan_load_default_max_bytes();
    return plan_load_bytes(file_read_bytes(path, "load_plan", max_bytes), path, passes, options);
}

}  // namespace td
