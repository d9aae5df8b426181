// plan.h: freeze — one recorded run of a function, compiled into a static plan, and replayed.
//
// Three layers, each a step of its own (rule 5 of docs/design.md):
//
//   record   plan_record_begin() .. plan_record_end(): while the function runs eagerly, observers on
//            the one hook (exec_node) and on gradient accumulation write every node down as a step
//            over numbered values. What came from outside is an argument (an input) or a captured
//            tensor (a parameter, read by identity). Every scalar the Lua code read out of a tensor
//            (item, totable, a comparison) becomes a guard. The result: a Plan with no pass run.
//   freeze   plan_compile(recorded, passes): dead-node elimination, common subexpressions, constant
//            folding, elementwise fusion, gradients accumulated in place, liveness-based buffer
//            reuse -> a Plan ready to run. Each pass can be switched off.
//   replay   plan_run(plan, inputs): checks the guards and runs the steps with the op table's
//            kernels: a tight loop over prepared calls, or through exec_node (the one hook) when an
//            observer is attached, so a debugger sees a frozen run node by node.
//   native   plan_native_build (plan_native.h): runs of a compiled plan's steps as C++ compiled by
//            the system's compiler, which the tight loop calls instead of those steps.
//
// A step runs the op table's kernel of its op (ops.def), or, for a fused group, the ops' shared
// span math (elementwise.h). Ops added to the table later are steps like any other; a node the
// plan cannot replay is refused when recording, with the node and its line named.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "big_array.h"
#include "npy.h"
#include "tape.h"

namespace td {

// ---------------------------------------------------------------------------------------------
// Values: every tensor a plan reads or makes, numbered.
//
// Each struct below that plan files hold, and Plan itself, has one list of its fields beside it
// (PLAN_VALUE_FIELDS, ...): FIELD(name, file, since), where `file` says how plan_file.cpp writes
// the field (plain: by its type; none: not in files) and `since` the plan file version that added
// it (older files leave it at its default). The lists are in file order; save, load and
// plan_copy_without_steps (plan_compile.cpp) go through them, and tests/engine/test_plan_fields.cpp
// changes each listed field and checks it survives. A field added to a struct is added to its list.

enum ValueKind : uint8_t {
    VALUE_INPUT,      // argument `index` of the call
    VALUE_CAPTURED,   // captured[index]: a tensor from outside, read by identity each call
    VALUE_CONSTANT,   // constants[index]: data kept in the plan
    VALUE_GRAD,       // the .grad of grad_targets[index], as it is when the step runs
    VALUE_STEP,       // made by a step
};

// A shape stored once per distinct shape, for the life of the process (as source file names are):
// a long loop's million plan values have a handful of shapes, and a Shape is 56 bytes. Reads as a
// const Shape&; assigning a Shape interns it (O(1): a hash of the dims).
class ShapeRef {
public:
    ShapeRef() : shape_(&intern(Shape())) {}
    ShapeRef(const Shape& shape) : shape_(&intern(shape)) {}   // implicit: `value.shape = some_shape`
    operator const Shape&() const { return *shape_; }
    const Shape& get() const { return *shape_; }
    int64_t numel() const { return shape_->numel(); }
    std::string str() const { return shape_->str(); }
    friend bool operator==(ShapeRef a, ShapeRef b) { return a.shape_ == b.shape_; }   // interned: equal iff same
    friend bool operator!=(ShapeRef a, ShapeRef b) { return a.shape_ != b.shape_; }
    friend bool operator==(ShapeRef a, const Shape& b) { return *a.shape_ == b; }
    friend bool operator!=(ShapeRef a, const Shape& b) { return *a.shape_ != b; }
    friend bool operator==(const Shape& a, ShapeRef b) { return a == *b.shape_; }
    friend bool operator!=(const Shape& a, ShapeRef b) { return a != *b.shape_; }

private:
    static const Shape& intern(const Shape& shape);
    const Shape* shape_;
};

struct PlanValue {
    ValueKind kind = VALUE_STEP;
    DType dtype = DTYPE_F32;
    Device device = DEVICE_CPU;   // where its bytes are (a plan's buffers are on plan.device)
    int index = -1;            // see ValueKind
    int alias_of = -1;         // shares the bytes of that value (a view, or an in-place op's output)
    ShapeRef shape;
    int64_t recorded_id = 0;   // the node that made it when recorded (shown by :plan)
};
#define PLAN_VALUE_FIELDS(FIELD) \
    FIELD(kind, plain, 1)        \
    FIELD(index, plain, 1)       \
    FIELD(dtype, plain, 1)       \
    FIELD(shape, shape, 1)       \
    FIELD(alias_of, plain, 1)    \
    FIELD(recorded_id, plain, 1) \
    FIELD(device, none, 1)   /* plan files hold CPU plans only so far */

// A tensor from outside the function, held by identity: in-place updates between calls are seen.
struct PlanCaptured {
    Tensor tensor;
    std::string name;   // a Lua name for it when one was found ("W_h", "model.1.weight"), else ""
};
#define PLAN_CAPTURED_FIELDS(FIELD) \
    FIELD(name, plain, 1)           \
    FIELD(tensor, captured, 1)   /* requires_grad, then the data: a new leaf when loaded */

// A leaf whose .grad the plan accumulates into (a captured parameter, or an argument).
struct GradTarget {
    ValueKind kind = VALUE_CAPTURED;   // VALUE_CAPTURED or VALUE_INPUT
    int index = 0;
    int output = 0;                    // which output of the leaf node
    int grad_value = -1;               // the VALUE_GRAD value standing for its .grad
};
#define PLAN_GRAD_TARGET_FIELDS(FIELD) \
    FIELD(kind, plain, 1)              \
    FIELD(index, plain, 1)             \
    FIELD(output, plain, 1)            \
    FIELD(grad_value, plain, 1)

// ---------------------------------------------------------------------------------------------
// Steps

enum StepKind : uint8_t {
    STEP_KERNEL,            // op's kernel on input values -> output values
    STEP_FUSED,             // a chain of elementwise ops run as one loop over chunks
    STEP_GRAD_ACCUMULATE,   // target.grad += inputs[0] (a copy becomes .grad when it has none)
    STEP_GRAD_CLEAR,        // target.grad = nil
    STEP_GUARD,             // check guards[target]; a failure stops the run
    STEP_GROUP_DONE,        // backward: groups[target]'s rule has run (eager's HOOK_GROUP_DONE). Only in
                            // the debug replay (Plan::debug_replay), made from the recording's groups:
                            // a debugger stops there
};

enum FusedInputMode : uint8_t {
    FUSED_FULL,     // same shape as the result
    FUSED_SCALAR,   // one element, repeated
    FUSED_ROW,      // a trailing part of the shape, repeated (a bias row)
};

// One op of a fused step. Operand k < number of the step's inputs is that input; otherwise the
// result of op (k - number of inputs) of the same step.
struct FusedOp {
    OpId op = OP_add;
    int attrs = 0;                // Plan::attrs[attrs], as PlanStep::attrs
    int operands[2] = {0, 0};
    int64_t recorded_id = 0;
    int64_t recorded_group = 0;   // as PlanStep::recorded_group
    SourceLoc where;
};

// A step's value ids (its inputs, or its outputs): up to 3 kept in the step itself, more on the
// heap. Most steps have 1 to 3 of each; a std::vector<int> cost a 32-byte heap block per list,
// and a long loop's plan has a million steps (two lists each, in the recording and again in the
// compiled plan): 16 bytes, where 4 inline ids and two counts took 24. The parts of
// std::vector's interface plans use. Aligned to 8 so that the pointer lies in an aligned word,
// where leak checkers look for pointers.
class alignas(8) ValueIds {
public:
    ValueIds() : size_(0), on_heap_(0) {}
    ValueIds(std::initializer_list<int> ids);
    ValueIds(const std::vector<int>& ids);   // implicit: a list built as a vector becomes a step's
    ValueIds(const ValueIds& other);
    ValueIds(ValueIds&& other) noexcept;
    ValueIds& operator=(const ValueIds& other);
    ValueIds& operator=(ValueIds&& other) noexcept;
    ~ValueIds() {
        if (on_heap_) delete[] heap();
    }

    size_t size() const { return size_; }
    bool empty() const { return size_ == 0; }
    int* data() { return on_heap_ ? heap() : words_; }
    const int* data() const { return on_heap_ ? heap() : words_; }
    int* begin() { return data(); }
    int* end() { return data() + size_; }
    const int* begin() const { return data(); }
    const int* end() const { return data() + size_; }
    int& operator[](size_t i) { return data()[i]; }
    const int& operator[](size_t i) const { return data()[i]; }
    int& back() { return data()[size_ - 1]; }
    void push_back(int id);
    void reserve(size_t n);
    void clear() { size_ = 0; }
    bool operator==(const ValueIds& other) const;
    bool operator!=(const ValueIds& other) const { return !(*this == other); }

private:
    static constexpr uint32_t INLINE = 3;
    // On the heap, words_[0] is the capacity and words_[1..2] hold the pointer (copied in and out
    // with memcpy: the words are 4-byte aligned, which keeps the list at 16 bytes).
    size_t capacity() const { return on_heap_ ? static_cast<uint32_t>(words_[0]) : INLINE; }
    int* heap() const;
    void set_heap(int* ids, size_t capacity);

    uint32_t size_ : 31;
    uint32_t on_heap_ : 1;
    int words_[INLINE] = {};
};

// A fused step's ops, in order, and a FusedInputMode per input of the step. Empty for other steps,
// which are most: the lists are on the heap behind one pointer (two empty vectors in each step
// cost a long loop's plan 40 bytes a step). Copies are deep, as a vector's.
class FusedOps {
public:
    FusedOps() = default;
    FusedOps(const FusedOps& other) : lists_(other.lists_ ? std::make_unique<Lists>(*other.lists_) : nullptr) {}
    FusedOps(FusedOps&&) noexcept = default;
    FusedOps& operator=(const FusedOps& other) {
        if (this != &other) lists_ = other.lists_ ? std::make_unique<Lists>(*other.lists_) : nullptr;
        return *this;
    }
    FusedOps& operator=(FusedOps&&) noexcept = default;

    size_t size() const { return lists_ ? lists_->ops.size() : 0; }
    bool empty() const { return size() == 0; }
    const FusedOp& operator[](size_t j) const { return lists_->ops[j]; }
    const FusedOp* begin() const { return lists_ ? lists_->ops.data() : nullptr; }
    const FusedOp* end() const { return lists_ ? lists_->ops.data() + lists_->ops.size() : nullptr; }
    void push_back(const FusedOp& op) { lists().ops.push_back(op); }
    // Input i of the step: how the loop reads it.
    FusedInputMode input_mode(size_t i) const { return static_cast<FusedInputMode>(lists_->input_modes[i]); }
    void add_input_mode(FusedInputMode mode) { lists().input_modes.push_back(mode); }

private:
    struct Lists {
        std::vector<FusedOp> ops;
        std::vector<uint8_t> input_modes;
    };
    Lists& lists() {
        if (!lists_) lists_ = std::make_unique<Lists>();
        return *lists_;
    }
    std::unique_ptr<Lists> lists_;
};

struct PlanStep {                       // fields ordered so that none is padded: 80 bytes
    StepKind kind = STEP_KERNEL;
    Phase phase = PHASE_FORWARD;
    OpId op = OP_clone;
    int attrs = 0;              // the op's attributes: Plan::attrs[attrs] (plan_step_attrs)
    int target = -1;            // GRAD_*: grad_targets index; GUARD: guards index
    int into_grad = -1;         // KERNEL: writes straight into grad_targets[into_grad].grad
    ValueIds inputs;            // value ids
    ValueIds outputs;           // value ids
    SourceLoc where;
    int64_t recorded_id = 0;
    int64_t recorded_group = 0;            // backward: the recorded forward node it differentiates (Node::group)
    FusedOps fused;                        // STEP_FUSED: the ops, in order, and the input modes
};
// A recording's steps are in files (a compiled plan's are not: into_grad and fused are none).
#define PLAN_STEP_FIELDS(FIELD)                                                 \
    FIELD(kind, plain, 1)                                                       \
    FIELD(op, plain, 1)   /* by name: a file stays readable as the op table grows */ \
    FIELD(attrs, attrs, 1)   /* the set itself (OP_ATTRS_FIELDS), not its index */    \
    FIELD(inputs, plain, 1)                                                     \
    FIELD(outputs, plain, 1)                                                    \
    FIELD(target, plain, 1)                                                     \
    FIELD(phase, plain, 1)                                                      \
    FIELD(where, plain, 1)                                                      \
    FIELD(recorded_id, plain, 1)                                                \
    FIELD(recorded_group, plain, 4)                                             \
    FIELD(into_grad, none, 1)                                                   \
    FIELD(fused, none, 1)

// Steps packed into bytes (plan_pack_steps): ~15 bytes a step where a PlanStep is 80. Ids are
// written as varint differences from the ones before, which in a loop's recording are small. A
// recording keeps all but its last steps so: the recorder packs as it goes, while the recorded
// run's graph is still alive (a 50,000-step loop's 800,000 steps took 64 MB as PlanSteps), and the
// recording kept for the debug replay and f:with_passes stays packed. Compiling unpacks a copy.
// A recording's backward groups (PlanGroup) are packed the same way, all of them.
struct PackedSteps {
    BigVector<uint8_t> bytes;
    size_t count = 0;
    // What the next item's differences are taken from.
    int last_value = 0, last_file = 0, last_line = 0, last_step = 0;
    int64_t last_recorded_id = 0;
};

// A backward group as the recording saw it at eager's HOOK_GROUP_DONE: forward node
// `recorded_id`'s rule had run. Values are -1 where the recording made none (no gradient flowed,
// or the tensor came from outside the function). The recording keeps no step for it (a long
// loop's backward has a group per forward node): the debug replay's compile makes one.
struct PlanGroup {
    int64_t recorded_id = 0;
    SourceLoc where;                   // the forward node's line
    int before_step = 0;               // the rule ended after the recording's steps [0, before_step)
    int root_value = -1;               // the output backward() was called on
    ValueIds grad_outputs;             // per output of the forward node: the gradient arriving there
    ValueIds grad_inputs;              // per input: the gradient its rule produced
};

// ---------------------------------------------------------------------------------------------
// Guards: what must hold for the plan to be the function's answer.

enum GuardKind : uint8_t {
    GUARD_VALUES,       // the value's elements equal `expected` exactly (item(), totable())
    GUARD_COMPARE,      // (value OP other) has truth `truth` (a comparison that decided an if)
    GUARD_GRAD_STATE,   // grad target's .grad is defined (or not), as when recorded
};

enum CompareOp : uint8_t { COMPARE_LT, COMPARE_LE };

struct PlanGuard {
    GuardKind kind = GUARD_VALUES;
    int value = -1;
    std::vector<double> expected;   // GUARD_VALUES
    CompareOp compare = COMPARE_LT; // GUARD_COMPARE: value < other (or other < value when swapped)
    bool swapped = false;
    int other_value = -1;           // ... other is this value, or the number below
    double other_number = 0;
    bool truth = false;
    int target = -1;                // GUARD_GRAD_STATE
    bool defined = false;
    SourceLoc where;
    std::string text;               // what the Lua code did: "loss:item()", "y > 0"
};
#define PLAN_GUARD_FIELDS(FIELD)  \
    FIELD(kind, plain, 1)         \
    FIELD(value, plain, 1)        \
    FIELD(expected, plain, 1)     \
    FIELD(compare, plain, 1)      \
    FIELD(swapped, plain, 1)      \
    FIELD(other_value, plain, 1)  \
    FIELD(other_number, plain, 1) \
    FIELD(truth, plain, 1)        \
    FIELD(target, plain, 1)       \
    FIELD(defined, plain, 1)      \
    FIELD(where, plain, 1)        \
    FIELD(text, plain, 1)

// The arguments, and what the plan returns.
struct PlanInput {
    std::string name;   // the Lua parameter's name ("x"), or "argument 2"
    Shape shape;
    DType dtype = DTYPE_F32;
    Device device = DEVICE_CPU;
    bool requires_grad = false;
    bool contiguous = true;   // row-major (not a strided view): the plan's steps were recorded on that layout
};
#define PLAN_INPUT_FIELDS(FIELD)   \
    FIELD(name, plain, 1)          \
    FIELD(dtype, plain, 1)         \
    FIELD(device, plain, 1)        \
    FIELD(requires_grad, plain, 1) \
    FIELD(contiguous, plain, 2)    \
    FIELD(shape, shape, 1)

struct PlanOutput {
    int value = -1;
    int grad_value = -1;   // a returned tensor's .grad (retain_grad), -1: none
};
#define PLAN_OUTPUT_FIELDS(FIELD) \
    FIELD(value, plain, 1)        \
    FIELD(grad_value, plain, 1)

struct PlanPasses {
    bool dce = true;       // dead-node elimination
    bool cse = true;       // common subexpression elimination
    bool fold = true;      // constant folding of what depends on no input and no captured tensor
    bool fuse = true;      // elementwise chains as one loop
    bool inplace = true;   // gradients accumulated by the op that makes them; elementwise ops over a dying input
    bool reuse = true;     // liveness-based buffer reuse
};
#define PLAN_PASSES_FIELDS(FIELD) \
    FIELD(dce, plain, 1)          \
    FIELD(cse, plain, 1)          \
    FIELD(fold, plain, 1)         \
    FIELD(fuse, plain, 1)         \
    FIELD(inplace, plain, 1)      \
    FIELD(reuse, plain, 1)

// What the passes did, for :plan.
struct PlanStats {
    int recorded_nodes = 0;    // nodes the recording saw (custom functions count their inner ops)
    int dead = 0, common = 0, folded = 0, fused_ops = 0, fused_groups = 0, inplace = 0, grads_in_place = 0;
    int buffers = 0;
    size_t buffer_bytes = 0;   // bytes of the plan's own buffers (allocated once)
    size_t per_call_bytes = 0; // bytes handed out per call (outputs, new .grad tensors)
    size_t unshared_bytes = 0; // what the buffers would take with one per value
    size_t eager_peak_bytes = 0;   // peak bytes of the recorded eager run, above what was live before
    double record_seconds = 0;     // the recorded run, from plan_record_begin to plan_record_end (0: loaded)
    double compile_seconds = 0;    // plan_compile: the passes and buffers (not the debug replay)
};
#define PLAN_STATS_FIELDS(FIELD)   \
    FIELD(recorded_nodes, plain, 1) \
    FIELD(dead, none, 1)            \
    FIELD(common, none, 1)          \
    FIELD(folded, none, 1)          \
    FIELD(fused_ops, none, 1)       \
    FIELD(fused_groups, none, 1)    \
    FIELD(inplace, none, 1)         \
    FIELD(grads_in_place, none, 1)  \
    FIELD(buffers, none, 1)         \
    FIELD(buffer_bytes, none, 1)    \
    FIELD(per_call_bytes, none, 1)  \
    FIELD(unshared_bytes, none, 1)  \
    FIELD(eager_peak_bytes, plain, 1) \
    FIELD(record_seconds, none, 1)  \
    FIELD(compile_seconds, none, 1)

struct PlanExec;   // run-time state (plan_internal.h), built on first run
struct PlanNative; // native code of a compiled plan (plan_native.h), when made

// A field added here is added to PLAN_FIELDS below.
struct Plan {
    std::string name;
    SourceLoc where;                  // the line that froze it
    bool grad_mode = true;            // autograd was on when recorded
    // After compile: where its steps run, the GPU when any step made a value there. Values on
    // another device (a CPU scalar beside GPU steps) get fresh bytes each call, not buffers.
    Device device = DEVICE_CPU;
    std::vector<PlanInput> inputs;
    std::vector<PlanCaptured> captured;
    std::vector<Value> constants;
    std::vector<GradTarget> grad_targets;
    BigVector<PlanValue> values;   // (big_array.h: a long loop's plan has a million of each)
    BigVector<PlanStep> steps;     // a recording's are the packed ones, then these (plan_step_count)
    PackedSteps packed;            // only in a recording (empty in a compiled plan or a loaded one)
    // The steps' attributes, each distinct set once (a loop's steps share theirs; an OpAttrs is
    // 224 bytes, most of a step when each step held its own). Entry 0 is OpAttrs().
    BigVector<OpAttrs> attrs = BigVector<OpAttrs>(1);
    std::vector<PlanGuard> guards;
    std::vector<PlanOutput> outputs;
    BigVector<PlanGroup> groups;      // backward groups, for the debug replay (not in plan files, nor in
                                      // a compiled plan, whose steps announce none)
    PackedSteps packed_groups;        // a recording's groups are all here, packed (plan_unpacked_groups)
    bool compiled = false;
    PlanPasses passes;
    PlanStats stats;
    std::vector<int> value_buffer;    // after compile: the buffer of each value's bytes, -1 for none
    std::vector<size_t> buffer_bytes;
    std::vector<bool> value_per_call; // after compile: value's bytes are new each call (returned)
    int first_effect_step = -1;       // after compile: first step that changes state outside the plan
    std::shared_ptr<PlanExec> exec;
    // After compile: the recording it was compiled from, shared (the frozen function keeps it too).
    std::shared_ptr<const Plan> recording;
    // The same recording compiled with no pass, which plan_run runs when an observer (a debugger,
    // the viewer) is attached: every recorded node once, in record order, its backward groups
    // announced as eager does (STEP_GROUP_DONE), so stops are those of the eager run. Compiled by
    // the first call made with an observer attached (null until then: a plan nobody watches does
    // not pay a second plan's memory).
    std::shared_ptr<Plan> debug_replay;
    // After plan_native_build: the plan's native segments, loaded (null: every step interpreted).
    std::shared_ptr<PlanNative> native;
};
// Plan's fields: FIELD(name, file, since, copy), as the lists above, and `copy` says whether compiling
// copies the field from the recording (copied) or the compiled plan makes its own (made: its
// steps, from those the recording's dead-node elimination keeps; its device; its run-time state).
// In files: `list` is a count, then each element by its struct's list; `steps` the recording's
// steps so (packed ones unpacked, group steps left out); `passes` the passes the caller gives to
// plan_save (a recording's own are not used); `fields` the struct by its own list.
#define PLAN_FIELDS(FIELD)                       \
    FIELD(name, plain, 1, copied)                \
    FIELD(where, plain, 1, copied)               \
    FIELD(grad_mode, plain, 1, copied)           \
    FIELD(passes, passes, 1, copied)             \
    FIELD(inputs, list, 1, copied)               \
    FIELD(captured, list, 1, copied)             \
    FIELD(constants, list, 1, copied)            \
    FIELD(grad_targets, list, 1, copied)         \
    FIELD(values, list, 1, copied)               \
    FIELD(steps, steps, 1, made)                 \
    FIELD(guards, list, 1, copied)               \
    FIELD(outputs, list, 1, copied)              \
    FIELD(stats, fields, 1, copied)              \
    FIELD(device, none, 1, made)                 \
    FIELD(packed, none, 1, made)                 \
    FIELD(attrs, none, 1, copied)                \
    FIELD(groups, none, 1, made)   /* the debug replay's: unpacked (plan_copy_without_steps) */ \
    FIELD(packed_groups, none, 1, made)          \
    FIELD(compiled, none, 1, copied)             \
    FIELD(value_buffer, none, 1, copied)         \
    FIELD(buffer_bytes, none, 1, copied)         \
    FIELD(value_per_call, none, 1, copied)       \
    FIELD(first_effect_step, none, 1, copied)    \
    FIELD(exec, none, 1, made)                   \
    FIELD(recording, none, 1, made)              \
    FIELD(debug_replay, none, 1, made)           \
    FIELD(native, none, 1, made)

// A step's attributes.
inline const OpAttrs& plan_step_attrs(const Plan& plan, const PlanStep& step) { return plan.attrs[step.attrs]; }
// The step's attributes as an entry of its own, to change without changing other steps' (tests,
// the fuzzer's mutator). Valid until plan.attrs grows again.
OpAttrs& plan_step_own_attrs(Plan& plan, PlanStep& step);

// A recording's steps (its packed ones first): how many, all of them unpacked (a copy), each in
// order without unpacking them all at once. Plans that were never packed have just `steps`.
size_t plan_step_count(const Plan& plan);
BigVector<PlanStep> plan_unpacked_steps(const Plan& plan);
void plan_visit_steps(const Plan& plan, const std::function<void(const PlanStep&)>& visit);
// Packs all but the last `keep` of plan.steps into plan.packed (a recording's steps: no fused ones).
void plan_pack_steps(Plan& plan, size_t keep);
// A recording's backward groups: add one (packed), the last one's before_step (-1: none yet), all
// of them unpacked (the packed ones, then plan.groups).
void plan_add_group(Plan& plan, const PlanGroup& group);
int plan_last_group_end(const Plan& plan);
BigVector<PlanGroup> plan_unpacked_groups(const Plan& plan);

// Stores attribute sets in a plan's Plan::attrs, each distinct set once: index_of gives the index
// of an equal entry, adding one when there is none. O(1) per call (a hash of the fields).
class PlanAttrsTable {
public:
    explicit PlanAttrsTable(Plan& plan);   // knows the entries the plan has already
    int index_of(const OpAttrs& attrs);

private:
    Plan& plan_;
    std::unordered_multimap<size_t, int> by_hash_;
};

// ---------------------------------------------------------------------------------------------
// record

// Start recording. `inputs` are the function's tensor arguments, named for messages. One recording
// at a time (an error otherwise). Peak memory is measured from here.
void plan_record_begin(const std::string& name, const std::vector<Tensor>& inputs,
                       const std::vector<std::string>& input_names, SourceLoc where);
bool plan_recording();
// The Lua code read values out of t (item(), totable()): a guard on their exact values.
void plan_record_note_values(const Tensor& t, SourceLoc where, const std::string& text);
// The Lua code compared t with `other` (a tensor, or the number when other is null) and got truth.
void plan_record_note_compare(const Tensor& t, CompareOp op, bool swapped, const Tensor* other, double other_number,
                              bool truth, SourceLoc where, const std::string& text);
// The Lua code read leaf.grad (grad is empty when it was nil) / set leaf.grad = nil.
void plan_record_note_grad_read(const Tensor& leaf, const Tensor& grad, SourceLoc where);
void plan_record_note_grad_clear(const Tensor& leaf, SourceLoc where);
// Something the plan cannot replay happened: plan_record_end will fail with this message.
void plan_record_refuse(const std::string& why);
// Stop recording; `outputs` are the tensors the function returned. Raises EngineError when the
// recording was refused. The plan has had no pass run (see plan_compile).
std::unique_ptr<Plan> plan_record_end(const std::vector<Tensor>& outputs);
void plan_record_abort();   // stop without a plan (the function raised an error)

// ---------------------------------------------------------------------------------------------
// freeze

// A runnable copy of `recorded` with `passes` applied (recorded must be uncompiled). The plan keeps
// `recorded` (Plan::recording) for its debug replay. Time and memory O(steps + values). With
// `log`, what each pass decided is written there too (plan_log.h).
struct PlanPassLog;
std::unique_ptr<Plan> plan_compile(std::shared_ptr<const Plan> recorded, const PlanPasses& passes,
                                   PlanPassLog* log = nullptr);

// ---------------------------------------------------------------------------------------------
// replay

struct PlanRunResult {
    bool completed = false;
    int failed_guard = -1;          // guards index when a guard stopped the run
    std::string reason;             // the failed guard, said for people
    std::vector<Tensor> outputs;    // one per plan output when completed
};

// Whether `inputs` fit the plan (count, shapes, dtypes, devices, requires_grad, the .grad state of
// the targets): "" when they do, else the first mismatch, naming the input and what was expected.
std::string plan_check_inputs(const Plan& plan, const std::vector<Tensor>& inputs);
// Run the plan. A guard that fails before the plan changed anything outside it stops the run
// (completed = false, nothing changed); one that fails later raises EngineError. A kernel error
// raises EngineError naming the step's op and line. `inputs_checked`: the caller has just had ""
// from plan_check_inputs for these inputs (else plan_run checks them).
PlanRunResult plan_run(Plan& plan, const std::vector<Tensor>& inputs, bool inputs_checked = false);
// While an observed plan_run runs a step's node through exec_node, or announces a backward group
// (HOOK_GROUP_DONE of the replayed forward node): which step of which plan it is, and the ids the
// recording had. Null otherwise. A debugger stopped in a frozen call reads it for its banner and
// for `:break node N` with a recorded id.
struct PlanReplayStep {
    const Plan* plan = nullptr;      // what runs: the debug replay (Plan::debug_replay) or the plan itself
    const Plan* called = nullptr;    // the plan that was called (its steps are the ones :plan lists)
    const Node* node = nullptr;      // the node of this call (the forward node at a group)
    int step = 0;                    // index in plan->steps
    int64_t recorded_id = 0;         // the node the step was recorded from
    int64_t recorded_group = 0;      // backward: the recorded forward node it belongs to
};
const PlanReplayStep* plan_replay_current();
// The steps of a compiled plan (1-based, as :plan numbers them) that run recorded node `recorded_id`
// (a step of its own, or an op of a fused step); with `group`, those of its backward group instead.
std::vector<int> plan_steps_replaying(const Plan& plan, int64_t recorded_id, bool group);
// The recorded id of `node` when it is the node of the replayed step in progress, else 0.
int64_t plan_replay_recorded_id(const Node* node);

// The current value of a captured tensor (what plan_run reads).
const Value& plan_captured_value(const PlanCaptured& captured);

// ---------------------------------------------------------------------------------------------
// describe

// The plan for people (:plan): passes, steps (fused groups, buffers), guards, memory. No timings
// and no addresses, so it is the same text every run.
std::string plan_describe(const Plan& plan);
// The floating-point operations one call of the plan does: products (mm, bmm, conv2d, lstm) as 2
// per multiply-add, any other step one per element (the bench's `limit` column divides this by
// the machine's FMA peak).
double plan_flops(const Plan& plan);
// A byte count for people: "512 B", "1.5 KiB", "2.25 MiB" (plan_describe, the pass log).
std::string plan_bytes_text(size_t bytes);

// A GPU plan's CUDA graphs so far (plan_internal.h, GraphSegment): the runs of steps a graph may replay,
// the steps in them, how many are captured now and how many could not be.
struct PlanGraphStats {
    int segments = 0, steps = 0, captured = 0, refused = 0;
};
PlanGraphStats plan_graph_stats(const Plan& plan);
// A guard said for people: "y > 0 was true (script.lua:4)".
std::string plan_guard_describe(const Plan& plan, int guard);
// What to do about a guard on a value the Lua code read out of a tensor (item(), totable(), a
// comparison), for the message of a call it sent back to recording ("return the tensor, or read
// item() outside the frozen function"); "" for other guards.
std::string plan_guard_advice(const Plan& plan, int guard);
// Whether a guard is on a value read out of a tensor (GUARD_VALUES or GUARD_COMPARE).
bool plan_guard_reads_value(const Plan& plan, int guard);
// "float32 [64,1000]"-style description of one value ("x", "captured W_h", "#12 mm").
std::string plan_value_name(const Plan& plan, int value);

}  // namespace td

namespace td {

// ---------------------------------------------------------------------------------------------
// files (plan_file.cpp)

// Write a recorded plan (not compiled: the passes run again on load) with its captured tensors'
// data, its constants and the passes to use. Data only: loading runs no code from the file.
void plan_save(const Plan& recorded, const PlanPasses& passes, const std::string& path);
// The same file's bytes, in memory.
std::string plan_save_bytes(const Plan& recorded, const PlanPasses& passes);

// What loading a plan may cost. max_bytes: the most bytes of tensor data that loading, compiling
// and running the plan may allocate (plan_memory_bound), and the largest file it reads; 0 means
// plan_load_default_max_bytes().
struct PlanLoadOptions {
    size_t max_bytes = 0;
};
size_t plan_load_default_max_bytes();   // half of memory_limit_bytes() (3/8 of physical memory by default)

// Read a plan written by plan_save. Everything is checked (magic, version, sizes, checksum, every
// count against the bytes left, op names, indices, every step's shapes and attributes against its
// op's shape rule, and the memory bound); a bad file raises EngineError naming load_plan, the file
// and what is wrong. `passes` receives the file's passes. Captured tensors become new leaves.
std::unique_ptr<Plan> plan_load(const std::string& path, PlanPasses* passes, const PlanLoadOptions& options = {});
// The same from the file's bytes in memory; `name` stands for the file in messages.
std::unique_ptr<Plan> plan_load_bytes(const std::string& bytes, const std::string& name, PlanPasses* passes,
                                      const PlanLoadOptions& options = {});
// An upper bound of the bytes of tensor data that compiling and running `plan` allocates, with
// its captured tensors, constants and arguments: every value a step makes counted as if no buffer
// were shared, every .grad, and the largest scratch any one kernel takes. SIZE_MAX when it overflows.
size_t plan_memory_bound(const Plan& plan);

}  // namespace td
