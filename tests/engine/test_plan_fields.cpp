// test_plan_fields.cpp: the field lists of Plan and its structs (plan.h: PLAN_FIELDS,
// PLAN_VALUE_FIELDS, ...), as test_op_table.cpp checks OP_ATTRS_FIELDS: each listed field, changed,
// survives a save/load round trip when it is in files, and compiling's copy of the recording
// (plan_copy_without_steps) when PLAN_FIELDS says it is copied.
#include <catch2/catch.hpp>

#include <string>
#include <type_traits>

#include "plan.h"
#include "plan_internal.h"
#include "test_helpers.h"

using namespace td;
using namespace td_test;

namespace {

// A recording with one of each struct at least: an input, a captured tensor that is a grad
// target, a guard, steps, values and an output.
std::unique_ptr<Plan> record_base() {
    Tensor w = make_leaf(Shape{2}, {1, 2});
    Tensor x = make_tensor(Shape{2}, {3, 4});
    plan_record_begin("fields", {x}, {"x"}, SourceLoc());
    plan_record_note_values(ops::reduce_all(OP_sum, x), SourceLoc(), "item()");
    Tensor loss = ops::reduce_all(OP_sum, ops::mul(w, x));
    backward(loss, nullptr);
    return plan_record_end({loss});
}

// A value of each field type that differs from `v` (and that the payload reader accepts).
double other_than(double v) { return v == 0.25 ? 0.5 : 0.25; }
int other_than(int v) { return v + 1; }
int64_t other_than(int64_t v) { return v + 1; }
size_t other_than(size_t v) { return v + 1; }
bool other_than(bool v) { return !v; }
DType other_than(DType v) { return v == DTYPE_F64 ? DTYPE_F32 : DTYPE_F64; }
Device other_than(Device v) { return v == DEVICE_CPU ? DEVICE_CUDA : DEVICE_CPU; }
ValueKind other_than(ValueKind v) { return v == VALUE_INPUT ? VALUE_CAPTURED : VALUE_INPUT; }
StepKind other_than(StepKind v) { return v == STEP_KERNEL ? STEP_GUARD : STEP_KERNEL; }
Phase other_than(Phase v) { return v == PHASE_FORWARD ? PHASE_BACKWARD : PHASE_FORWARD; }
GuardKind other_than(GuardKind v) { return v == GUARD_VALUES ? GUARD_COMPARE : GUARD_VALUES; }
CompareOp other_than(CompareOp v) { return v == COMPARE_LT ? COMPARE_LE : COMPARE_LT; }
OpId other_than(OpId v) { return v == OP_add ? OP_mul : OP_add; }
Shape other_than(const Shape& v) { return v == Shape{3} ? Shape{4} : Shape{3}; }
ShapeRef other_than(ShapeRef v) { return other_than(v.get()); }
std::string other_than(const std::string& v) { return v + "'"; }
SourceLoc other_than(SourceLoc v) {
    v.file = source_file_intern("fields.lua");
    ++v.line;
    return v;
}
ValueIds other_than(ValueIds v) {
    v.push_back(0);
    return v;
}
std::vector<double> other_than(std::vector<double> v) {
    v.push_back(0.5);
    return v;
}
Tensor other_than(const Tensor&) { return make_leaf(Shape{3}, {1, 2, 3}); }
PlanPasses other_than(PlanPasses v) {
    v.dce = !v.dce;
    return v;
}
PlanStats other_than(PlanStats v) {
    ++v.recorded_nodes;
    return v;
}
// A list: one more element.
template <class T>
std::vector<T> other_than(std::vector<T> v) {
    v.push_back(T());
    return v;
}
template <class T>
BigVector<T> other_than(BigVector<T> v) {
    v.push_back(T());
    return v;
}

// Whether two fields hold the same (a loaded tensor is another leaf with the same data).
template <class T>
bool same(const T& a, const T& b) {
    return a == b;
}
bool same(SourceLoc a, SourceLoc b) { return a.file == b.file && a.line == b.line; }
bool same(const OpAttrs& a, const OpAttrs& b) { return attrs_equal(a, b); }
bool same(const FusedOps& a, const FusedOps& b) { return a.size() == b.size(); }
bool same(const Value& a, const Value& b) {
    if (!a.storage || !b.storage) return !a.storage && !b.storage;
    return a.shape == b.shape && a.dtype == b.dtype && values_of(a) == values_of(b);
}
bool same(const Tensor& a, const Tensor& b) {
    if (!a.defined() || !b.defined()) return !a.defined() && !b.defined();
    return a.requires_grad() == b.requires_grad() && same(a.value(), b.value());
}
#define SAME_FIELD(name, file, since) &&same(a.name, b.name)
bool same(const PlanInput& a, const PlanInput& b) { return true PLAN_INPUT_FIELDS(SAME_FIELD); }
bool same(const PlanCaptured& a, const PlanCaptured& b) { return true PLAN_CAPTURED_FIELDS(SAME_FIELD); }
bool same(const GradTarget& a, const GradTarget& b) { return true PLAN_GRAD_TARGET_FIELDS(SAME_FIELD); }
bool same(const PlanValue& a, const PlanValue& b) { return true PLAN_VALUE_FIELDS(SAME_FIELD); }
bool same(const PlanStep& a, const PlanStep& b) { return true PLAN_STEP_FIELDS(SAME_FIELD); }
bool same(const PlanGuard& a, const PlanGuard& b) { return true PLAN_GUARD_FIELDS(SAME_FIELD); }
bool same(const PlanOutput& a, const PlanOutput& b) { return true PLAN_OUTPUT_FIELDS(SAME_FIELD); }
bool same(const PlanPasses& a, const PlanPasses& b) { return true PLAN_PASSES_FIELDS(SAME_FIELD); }
bool same(const PlanStats& a, const PlanStats& b) { return true PLAN_STATS_FIELDS(SAME_FIELD); }
#undef SAME_FIELD
template <class List>
bool same_list(const List& a, const List& b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
        if (!same(a[i], b[i])) return false;
    return true;
}
template <class T>
bool same(const std::vector<T>& a, const std::vector<T>& b) {
    return same_list(a, b);
}
template <class T>
bool same(const BigVector<T>& a, const BigVector<T>& b) {
    return same_list(a, b);
}

// The item of each struct the round trips change: the first of its list.
PlanInput& first(Plan& p, PlanInput*) { return p.inputs.at(0); }
PlanCaptured& first(Plan& p, PlanCaptured*) { return p.captured.at(0); }
GradTarget& first(Plan& p, GradTarget*) { return p.grad_targets.at(0); }
PlanValue& first(Plan& p, PlanValue*) { return p.values[0]; }
PlanStep& first(Plan& p, PlanStep*) { return p.steps[0]; }
PlanGuard& first(Plan& p, PlanGuard*) { return p.guards.at(0); }
PlanOutput& first(Plan& p, PlanOutput*) { return p.outputs.at(0); }
PlanStats& first(Plan& p, PlanStats*) { return p.stats; }

// Which of the lists' `file` ways a struct's round trip checks here: all but none. (Plan's
// lists and its stats are checked element by element, by their structs' round trips.)
constexpr bool IN_FILE_plain = true, IN_FILE_shape = true, IN_FILE_attrs = true, IN_FILE_captured = true;
constexpr bool IN_FILE_none = false, IN_FILE_list = false, IN_FILE_steps = false, IN_FILE_fields = false,
               IN_FILE_passes = false;

std::unique_ptr<Plan> round_trip(const Plan& plan, const PlanPasses& passes = PlanPasses(), PlanPasses* loaded = nullptr) {
    PlanPasses ignored;
    return plan_payload_read(plan_payload_bytes(plan, passes), loaded ? loaded : &ignored);
}

// Field `name` of struct S (field(item) is it), changed in the first item of the recording,
// read back from the recording's payload.
template <class S, bool in_file, class Field>
void check_round_trip(const char* name, Field field) {
    if constexpr (in_file) {
        INFO("field " << name);
        std::unique_ptr<Plan> plan = record_base();
        REQUIRE(plan->packed.count == 0);
        S& item = first(*plan, static_cast<S*>(nullptr));
        if constexpr (std::is_same_v<S, PlanStep>)
            if (std::string(name) == "attrs") {   // the step's attribute set (by index): another set
                OpAttrs other;
                other.dim = 7;
                plan->attrs.push_back(other);
            }
        auto changed = other_than(field(item));
        REQUIRE_FALSE(same(decltype(changed)(field(item)), changed));
        field(item) = changed;
        std::unique_ptr<Plan> loaded = round_trip(*plan);
        S& read = first(*loaded, static_cast<S*>(nullptr));
        if constexpr (std::is_same_v<S, PlanStep>)
            if (std::string(name) == "attrs") {   // indices are the loaded plan's own: compare the sets
                CHECK(attrs_equal(plan_step_attrs(*loaded, read), plan_step_attrs(*plan, item)));
                return;
            }
        CHECK(same(field(read), field(item)));
    }
}

#define ROUND_TRIP(name, file, since) \
    check_round_trip<S, IN_FILE_##file>(#name, [](auto& x) -> auto& { return x.name; });

}  // namespace

TEST_CASE("plan fields: each field of each struct's list in plan files survives a save/load round trip") {
    SECTION("PlanInput") {
        using S = PlanInput;
        PLAN_INPUT_FIELDS(ROUND_TRIP)
    }
    SECTION("PlanCaptured") {
        using S = PlanCaptured;
        PLAN_CAPTURED_FIELDS(ROUND_TRIP)
    }
    SECTION("GradTarget") {
        using S = GradTarget;
        PLAN_GRAD_TARGET_FIELDS(ROUND_TRIP)
    }
    SECTION("PlanValue") {
        using S = PlanValue;
        PLAN_VALUE_FIELDS(ROUND_TRIP)
    }
    SECTION("PlanStep") {
        using S = PlanStep;
        PLAN_STEP_FIELDS(ROUND_TRIP)
    }
    SECTION("PlanGuard") {
        using S = PlanGuard;
        PLAN_GUARD_FIELDS(ROUND_TRIP)
    }
    SECTION("PlanOutput") {
        using S = PlanOutput;
        PLAN_OUTPUT_FIELDS(ROUND_TRIP)
    }
    SECTION("PlanStats") {
        using S = PlanStats;
        PLAN_STATS_FIELDS(ROUND_TRIP)
    }
    SECTION("Plan") {   // its own fields (name, where, grad_mode); its lists by the sections above
        std::unique_ptr<Plan> plan = record_base();
        auto check = [&plan](auto in_file, const char* name, auto field) {
            if constexpr (decltype(in_file)::value) {
                INFO("field " << name);
                auto was = field(*plan);
                field(*plan) = other_than(field(*plan));
                CHECK(same(field(*round_trip(*plan)), field(*plan)));
                field(*plan) = was;
            }
        };
#define ROUND_TRIP_PLAN(name, file, since, copy) \
    check(std::bool_constant<IN_FILE_##file>(), #name, [](Plan& p) -> auto& { return p.name; });
        PLAN_FIELDS(ROUND_TRIP_PLAN)
#undef ROUND_TRIP_PLAN
    }
}

TEST_CASE("plan fields: the passes given to plan_save come back from the file, each switch") {
    std::unique_ptr<Plan> plan = record_base();
#define PASS_ROUND_TRIP(name, file, since)          \
    {                                               \
        INFO("pass " #name);                        \
        PlanPasses given;                           \
        given.name = other_than(given.name);        \
        PlanPasses loaded;                          \
        round_trip(*plan, given, &loaded);          \
        CHECK(same(loaded, given));                 \
    }
    PLAN_PASSES_FIELDS(PASS_ROUND_TRIP)
#undef PASS_ROUND_TRIP
}

TEST_CASE("plan fields: compiling copies each field PLAN_FIELDS says is copied") {
    constexpr bool COPIED_copied = true, COPIED_made = false;
    std::unique_ptr<Plan> plan = record_base();
    auto check = [&plan](auto copied, const char* name, auto field) {
        if constexpr (decltype(copied)::value) {
            INFO("field " << name);
            field(*plan) = other_than(field(*plan));
            CHECK(same(field(*plan_copy_without_steps(*plan, false)), field(*plan)));
        }
    };
#define COPY_FIELD(name, file, since, copy) \
    check(std::bool_constant<COPIED_##copy>(), #name, [](Plan& p) -> auto& { return p.name; });
    PLAN_FIELDS(COPY_FIELD)
#undef COPY_FIELD
    CHECK(plan_copy_without_steps(*plan, false)->steps.empty());   // plan_compile_with copies those it keeps
}

TEST_CASE("plan fields: a recording saved and loaded (checked) keeps every listed field") {
    std::unique_ptr<Plan> plan = record_base();
    PlanPasses passes, loaded_passes;
    passes.fuse = false;
    std::unique_ptr<Plan> loaded = plan_load_bytes(plan_save_bytes(*plan, passes), "fields.tdp", &loaded_passes);
    CHECK(same(loaded_passes, passes));
    CHECK(loaded->name == plan->name);
    CHECK(same(loaded->inputs, plan->inputs));
    CHECK(same(loaded->captured, plan->captured));
    CHECK(same(loaded->constants, plan->constants));
    CHECK(same(loaded->grad_targets, plan->grad_targets));
    CHECK(same(loaded->values, plan->values));
    REQUIRE(loaded->steps.size() == plan->steps.size());
    for (size_t k = 0; k < plan->steps.size(); ++k) {
        PlanStep a = loaded->steps[k], b = plan->steps[k];
        CHECK(attrs_equal(plan_step_attrs(*loaded, a), plan_step_attrs(*plan, b)));
        a.attrs = b.attrs = 0;   // indices are each plan's own
        CHECK(same(a, b));
    }
    CHECK(same(loaded->guards, plan->guards));
    CHECK(same(loaded->outputs, plan->outputs));
    CHECK(loaded->stats.recorded_nodes == plan->stats.recorded_nodes);
    CHECK(loaded->stats.eager_peak_bytes == plan->stats.eager_peak_bytes);
}
