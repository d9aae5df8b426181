// test_plan_native.cpp: freeze to native code (plan_native.h) at the engine layer — every op-table
// row through a plan made native against the same plan interpreted, the prelude's products and
// sums against plain loops, and the cache: miss, hit, a corrupt or foreign object, no compiler, a
// compile error, and cache folders that are open to others, not the user's or not writable.
//
// Every test builds into a folder of its own (NativeBuildOptions::cache_dir, from mkdtemp), so the
// user's cache is neither read nor written. Without a C++ compiler the tests that need one say so
// (a warning) and pass: tapedeck then runs every plan interpreted, which the other tests check.
//
// The tolerance: native code runs elementwise.def's lines with the C library's math (glibc's libm,
// and libmvec's vector functions where GCC vectorises a loop), where the interpreted kernels run
// Eigen's vectorised exp, log, tanh, ...; and its products and sums add in another order. So:
//   - exactly equal (every bit): the output of each row whose op's line uses only + - * /,
//     comparisons and exactly rounded functions (where, maximum, abs, floor, sqrt, ...), and its
//     inputs' gradients; and every output of an op native code does not run (the same kernel);
//   - within NATIVE_TOLERANCE_F32 / _F64 relative to the tensor's largest magnitude: the rest
//     (transcendental functions, tanh_backward (see exactly_rounded), mm, sum, mean, the combined
//     loss, gradients through them). Measured over every row on this machine (x86-64, AVX-512,
//     GCC 12, glibc 2.36): worst 1.8e-7 in float32, 2.5e-16 in float64, a unit or two in the last
//     place; the tolerances (1e-6, 4e-15) leave room for another machine's vector math (libmvec
//     promises 4 ulp).
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "elementwise.h"
#include "native/native_prelude.h"   // compiled here as well, so the build checks it
#include "op_cases.h"
#include "op_checks.h"
#include "plan.h"
#include "plan_native.h"
#include "test_helpers.h"

using namespace td;
using namespace td_test;

namespace {

constexpr double NATIVE_TOLERANCE_F32 = 1e-6;
constexpr double NATIVE_TOLERANCE_F64 = 4e-15;

// ============================================================================================
// Shared pieces

// A private folder from mkdtemp, removed (with what the builds put there) at the end.
struct CacheFolder {
    std::string dir;
    CacheFolder() {
        char path[] = "/tmp/tapedeck_native_test_XXXXXX";
        REQUIRE(mkdtemp(path) != nullptr);
        dir = path;
    }
    ~CacheFolder() {
        std::error_code ignored;
        chmod(dir.c_str(), 0700);
        std::filesystem::remove_all(dir, ignored);
    }
    NativeBuildOptions options() const { return NativeBuildOptions{"", dir}; }
    CacheFolder(const CacheFolder&) = delete;
    CacheFolder& operator=(const CacheFolder&) = delete;
};

bool no_compiler(const NativeBuildResult& built) { return built.message.rfind("no C++ compiler found", 0) == 0; }

std::vector<double> ramp(int64_t n, double scale, double phase) {
    std::vector<double> v;
    for (int64_t k = 0; k < n; ++k) v.push_back(scale * std::sin(1.3 * static_cast<double>(k) + phase));
    return v;
}

// The worst difference between two runs' values of one tensor, relative to the largest
// magnitude in `b` (0: every value the same, NaN where b has NaN; infinity: a NaN or an infinity
// on one side only).
double worst_difference(const std::vector<double>& a, const std::vector<double>& b) {
    if (a.size() != b.size()) return INFINITY;
    double largest = 0, worst = 0;
    for (double x : b)
        if (std::isfinite(x)) largest = std::max(largest, std::fabs(x));
    for (size_t i = 0; i < a.size(); ++i) {
        if (a[i] == b[i] || (std::isnan(a[i]) && std::isnan(b[i]))) continue;
        if (!std::isfinite(a[i]) || !std::isfinite(b[i])) return INFINITY;
        worst = std::max(worst, std::fabs(a[i] - b[i]) / std::max(largest, 1e-300));
    }
    return worst;
}

// ============================================================================================
// The op rows, all in one plan

// Whether the op's line calls only exactly rounded functions of scalar_math.h, so that native code
// and the interpreted kernel give the same bits. Not tanh_backward's x * (1 - y * y): the
// interpreted kernel's loop is compiled as the engine is (-std=gnu++20: GCC's -ffp-contract=fast),
// which makes 1 - y * y one fused multiply-add; native code is compiled with -ffp-contract=off
// (each op rounded, as the interpreted plan's fused loops round them). One rounding apart.
bool exactly_rounded(OpId op) {
    if (op == OP_tanh_backward) return false;
    static const std::set<std::string> exact = {"where", "maximum", "minimum", "abs", "sign", "clamp", "floor",
                                                "ceil",  "rint",    "trunc",   "isnan", "isinf", "isfinite", "sqrt"};
    const ElementwiseMath* line = elementwise_math(op);
    if (!line) return false;
    std::string text = line->expression;
    for (size_t at = text.find("math::"); at != std::string::npos; at = text.find("math::", at + 1)) {
        size_t end = text.find('(', at);
        if (!exact.count(text.substr(at + 6, end - at - 6))) return false;
    }
    return true;
}

// Whether native code must run this row's op (plan_native.h: elementwise ops and fused loops of
// one float dtype, small products, sums and means of all elements).
bool expect_native(OpId op, const OpCase& c) {
    if (op_info(op).flags & (OPF_VIEW | OPF_INPLACE | OPF_CREATE)) return false;
    if (c.outputs.size() != 1 || !dtype_is_float(c.outputs[0].dtype) || c.inputs.empty()) return false;
    for (const InputCase& in : c.inputs)
        if (in.dtype != c.outputs[0].dtype) return false;
    if (op == OP_mm) return c.inputs[0].shape.ndim == 2 && c.inputs[1].shape.ndim == 2;
    if (op == OP_sum || op == OP_mean) return c.attrs.all;
    const ElementwiseMath* line = elementwise_math(op);
    return line && line->arity == static_cast<int>(c.inputs.size());
}

bool input_wants_grad(OpId op, const OpCase& c, size_t j) {
    const OpInfo& info = op_info(op);
    if (!info.backward_rule || (info.flags & (OPF_INPLACE | OPF_CREATE)) || !dtype_is_float(c.inputs[j].dtype)) return false;
    return c.grad_inputs.empty() || std::find(c.grad_inputs.begin(), c.grad_inputs.end(), static_cast<int>(j)) != c.grad_inputs.end();
}

// The row's inputs as new tensors (an in-place op changes its input 0: each run gets its own).
std::vector<Tensor> row_inputs(OpId op, const OpCase& c) {
    std::vector<Tensor> inputs;
    for (size_t j = 0; j < c.inputs.size(); ++j)
        inputs.push_back(make_tensor(c.inputs[j].shape, c.inputs[j].values, c.inputs[j].dtype, input_wants_grad(op, c, j)));
    return inputs;
}

// One row's part of the plan: its inputs and outputs among the plan's, whether a loss term
// sum(y * r) of its output 0 joins the plan's loss.
struct RowPart {
    const OpCase* row = nullptr;
    OpId op = OP_clone;
    size_t first_input = 0, first_output = 0, outputs = 0;
};

// The row's op on `inputs`: its outputs added to `outputs`, its loss term (or an empty tensor).
Tensor run_row(const RowPart& part, const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs) {
    Tensor y = run_op(part.op, inputs, attrs_of(*part.row));
    for (int i = 0; i < y.node->outputs.size(); ++i) outputs.emplace_back(y.node.get(), i);
    if (!y.requires_grad()) return Tensor();
    Tensor r = make_tensor(y.shape(), ramp(y.numel(), 1, static_cast<double>(part.first_output)), y.dtype());
    // (A view's y * r: native code must leave a step that reads a strided view to the kernels,
    // or its segment would fall back to the interpreted steps every call.)
    Tensor term = ops::reduce_all(OP_sum, ops::mul(y, r));
    return term.dtype() == DTYPE_F64 ? term : ops::to(term, DTYPE_F64);
}

// Why the row alone cannot be frozen and replayed ("" when it can).
std::string row_freezes(const RowPart& part) {
    try {
        std::vector<Tensor> inputs = row_inputs(part.op, *part.row), outputs;
        plan_record_begin(part.row->op, inputs, std::vector<std::string>(inputs.size(), "x"), SourceLoc());
        try {
            Tensor loss = run_row(part, inputs, outputs);
            if (loss.defined()) backward(loss, nullptr);
        } catch (...) {
            plan_record_abort();
            throw;
        }
        std::unique_ptr<Plan> plan = plan_compile(plan_record_end(outputs), PlanPasses{});
        engine_manual_seed(5);
        return plan_run(*plan, row_inputs(part.op, *part.row)).completed ? "" : "a guard failed";
    } catch (const std::exception& e) {
        return e.what();
    }
}

// Every row that freezes, in one plan: each row's op on inputs of its own, one loss (the sum of
// the rows' terms, float64) and one backward pass. Rows that do not freeze are left in `refused`.
struct RowsPlan {
    std::vector<RowPart> parts;
    std::vector<std::string> refused;
    std::unique_ptr<Plan> plan;
    size_t loss_output = 0;
};

std::vector<Tensor> all_inputs(const RowsPlan& rows) {
    std::vector<Tensor> inputs;
    for (const RowPart& part : rows.parts)
        for (Tensor& t : row_inputs(part.op, *part.row)) inputs.push_back(t);
    return inputs;
}

RowsPlan record_rows() {
    RowsPlan rows;
    for (const OpCase& c : op_cases()) {
        RowPart part{&c, op_of(c)};
        if (op_info(part.op).flags & OPF_CUSTOM) continue;
        std::string why = row_freezes(part);
        if (why.empty()) rows.parts.push_back(part);
        else rows.refused.push_back(c.op + " (" + c.variant + "): " + why);
    }
    std::vector<Tensor> inputs = all_inputs(rows), outputs;
    plan_record_begin("op rows", inputs, std::vector<std::string>(inputs.size(), "x"), SourceLoc());
    Tensor loss;
    size_t at = 0;
    for (RowPart& part : rows.parts) {
        part.first_input = at;
        part.first_output = outputs.size();
        std::vector<Tensor> own(inputs.begin() + static_cast<long>(at), inputs.begin() + static_cast<long>(at + part.row->inputs.size()));
        at += own.size();
        Tensor term = run_row(part, own, outputs);
        part.outputs = outputs.size() - part.first_output;
        if (term.defined()) loss = loss.defined() ? ops::add(loss, term) : term;
    }
    backward(loss, nullptr);
    rows.loss_output = outputs.size();
    outputs.push_back(loss);
    rows.plan = plan_compile(plan_record_end(outputs), PlanPasses{});
    return rows;
}

// One run of the plan: each output's values, then each input's gradient (empty: none).
std::vector<std::vector<double>> run_rows(RowsPlan& rows) {
    std::vector<Tensor> inputs = all_inputs(rows);
    engine_manual_seed(5);   // the random ops draw the same numbers in both runs
    PlanRunResult result = plan_run(*rows.plan, inputs);
    REQUIRE(result.completed);
    std::vector<std::vector<double>> values;
    for (const Tensor& out : result.outputs) values.push_back(values_of(out));
    for (const Tensor& in : inputs) values.push_back(grad_of(in).defined() ? values_of(grad_of(in)) : std::vector<double>());
    return values;
}

// Whether the step that makes plan value v runs inside a native segment.
bool made_natively(const Plan& plan, int v) {
    for (size_t k = 0; k < plan.steps.size(); ++k) {
        const PlanStep& s = plan.steps[k];
        if (std::find(s.outputs.begin(), s.outputs.end(), v) == s.outputs.end()) continue;
        for (const NativeSegment& seg : plan.native->segments)
            if (k >= seg.begin && k < seg.end) return true;
        return false;
    }
    return false;
}

}  // namespace

TEST_CASE("native: every op-table row through a native plan gives the interpreted plan's values and gradients") {
    CacheFolder cache;
    RowsPlan rows = record_rows();
    INFO("rows that do not freeze:\n" << [&] { std::string s; for (auto& r : rows.refused) s += "  " + r + "\n"; return s; }());
    CHECK(rows.refused.size() * 20 < rows.parts.size());   // nearly every row is in the plan
    NativeBuildResult built = plan_native_build(*rows.plan, cache.options());
    if (no_compiler(built)) {
        WARN("no C++ compiler: " << built.message);
        return;
    }
    INFO(built.message);
    REQUIRE(built.ok);
    PlanNative& native = *rows.plan->native;
    native.enabled = false;
    std::vector<std::vector<double>> interpreted = run_rows(rows);
    CHECK(native.segment_calls == 0);
    native.enabled = true;
    std::vector<std::vector<double>> ran_native = run_rows(rows);
    CHECK(native.segment_calls == static_cast<int64_t>(native.segments.size()));
    CHECK(native.fallbacks == 0);

    double worst[2] = {0, 0};   // float32, float64: over the values compared with the tolerance
    int native_rows = 0;
    for (const RowPart& part : rows.parts) {
        const OpCase& c = *part.row;
        INFO("row " << c.op << " (" << c.variant << ")");
        bool runs_native = expect_native(part.op, c);
        if (runs_native) {
            CHECK(made_natively(*rows.plan, rows.plan->outputs[part.first_output].value));
            ++native_rows;
        }
        bool exact = !runs_native || exactly_rounded(part.op);
        std::vector<size_t> grads;
        for (size_t j = 0; j < c.inputs.size(); ++j) grads.push_back(rows.plan->outputs.size() + part.first_input + j);
        auto compare = [&](size_t index, bool must_be_exact, const char* what) {
            INFO(what);
            double d = worst_difference(ran_native[index], interpreted[index]);
            if (must_be_exact) CHECK(d == 0);
            bool f32 = c.outputs[0].dtype == DTYPE_F32 || (!c.inputs.empty() && c.inputs[0].dtype == DTYPE_F32);
            worst[f32 ? 0 : 1] = std::max(worst[f32 ? 0 : 1], d);
            CHECK(d <= (f32 ? NATIVE_TOLERANCE_F32 : NATIVE_TOLERANCE_F64));
        };
        for (size_t i = 0; i < part.outputs; ++i) compare(part.first_output + i, exact, "an output");
        for (size_t g : grads) compare(g, runs_native && exactly_rounded(part.op), "an input's gradient");
    }
    INFO("worst relative difference: float32 " << worst[0] << ", float64 " << worst[1]);
    CHECK(worst_difference(ran_native[rows.loss_output], interpreted[rows.loss_output]) <= NATIVE_TOLERANCE_F32);   // float32 rows' terms
    CHECK(native_rows >= 60);   // the elementwise, product and sum rows
    WARN("op rows: " << rows.parts.size() << " in one plan, " << native_rows << " run native; " << native.native_steps
                     << " of " << rows.plan->steps.size() << " steps native; compiled in " << native.compile_seconds
                     << " s; worst relative difference float32 " << worst[0] << ", float64 " << worst[1]);
}

// ============================================================================================
// The prelude's products and sums against plain loops

namespace {

// Y = op(A) op(B) (+ Y0 when ACC) by td::native::mm against a plain loop, in double.
template <int M, int N, int K, bool TA, bool TB, bool ACC>
void check_prelude_mm() {
    INFO("mm M " << M << " N " << N << " K " << K << (TA ? " A^T" : "") << (TB ? " B^T" : "") << (ACC ? " accumulate" : ""));
    std::vector<double> a = ramp(M * K, 1, 0.3), b = ramp(K * N, 1, 1.1), y = ramp(M * N, 1, 2.0), want = y;
    for (int i = 0; i < M; ++i)
        for (int j = 0; j < N; ++j) {
            double sum = 0;
            for (int k = 0; k < K; ++k) sum += a[TA ? k * M + i : i * K + k] * b[TB ? j * K + k : k * N + j];
            want[i * N + j] = ACC ? want[i * N + j] + sum : sum;
        }
    td::native::mm<double, M, N, K, TA, TB, ACC>(a.data(), b.data(), y.data());
    check_values(y, want, 1e-13, 1e-13);
}

}  // namespace

TEST_CASE("native prelude: its products (each layout and branch) and sums give a plain loop's values") {
    check_prelude_mm<5, 7, 3, false, false, false>();    // rows as sums of rows
    check_prelude_mm<5, 7, 19, false, false, true>();
    check_prelude_mm<4, 3, 17, false, true, false>();    // narrow Y: a dot product per element
    check_prelude_mm<4, 9, 6, false, true, true>();      // B^T copied to rows first
    check_prelude_mm<6, 5, 4, true, false, false>();
    check_prelude_mm<12, 1, 10, true, false, false>();   // a column: as a row, b^T A
    check_prelude_mm<12, 1, 10, true, false, true>();
    check_prelude_mm<3, 4, 5, true, true, true>();
    std::vector<double> x = ramp(37, 1, 0.5);
    double sum = 0, dot = 0;
    for (size_t i = 0; i < x.size(); ++i) sum += x[i], dot += x[i] * x[x.size() - 1 - i];
    CHECK(std::fabs(td::native::sum_all<double, 37>(x.data()) - sum) < 1e-13);
    CHECK(std::fabs(td::native::dot<double, 37, 1, -1>(x.data(), x.data() + 36) - dot) < 1e-13);
}

// ============================================================================================
// The cache

namespace {

// A small plan: sum(tanh(x * x + 1)) of an argument x [n], compiled from one recording per n (the
// source names the recorded nodes: a recording made again is another source). Plans of another
// n are other sources.
std::unique_ptr<Plan> small_plan(int64_t n) {
    static std::map<int64_t, std::shared_ptr<const Plan>> recordings;
    std::shared_ptr<const Plan>& recorded = recordings[n];
    if (!recorded) {
        Tensor x = make_tensor(Shape{n}, ramp(n, 0.5, 0));
        plan_record_begin("small", {x}, {"x"}, SourceLoc());
        Tensor y = ops::reduce_all(OP_sum, ops::unary(OP_tanh, ops::add_scalar(ops::mul(x, x), 1)));
        recorded = plan_record_end({y});
    }
    return plan_compile(recorded, PlanPasses{});
}

// The plan's result on x = ramp(n, 0.7, 1), checked against a plain loop.
void check_small_plan_computes(Plan& plan, int64_t n) {
    std::vector<double> x = ramp(n, 0.7, 1);
    double want = 0;
    for (double v : x) want += std::tanh(v * v + 1);
    PlanRunResult result = plan_run(plan, {make_tensor(Shape{n}, x)});
    REQUIRE(result.completed);
    CHECK(std::fabs(item(result.outputs[0]) - want) <= 1e-14 * std::fabs(want));
}

std::string file_bytes(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Replaces a file by `bytes` as a new file (a loaded object's pages stay those of the old one).
void replace_file(const std::string& path, const std::string& bytes) {
    unlink(path.c_str());
    std::ofstream(path, std::ios::binary) << bytes;
}

std::string without_extension(const std::string& path) { return path.substr(0, path.rfind('.')); }

// Builds a new small plan of n in `cache`: the build's result, the plan left in `plan`.
NativeBuildResult build_small(std::unique_ptr<Plan>& plan, int64_t n, const NativeBuildOptions& options) {
    plan = small_plan(n);
    return plan_native_build(*plan, options);
}

}  // namespace

TEST_CASE("native cache: a miss compiles into a private folder, a second build of the plan loads the checked object") {
    CacheFolder cache;
    std::unique_ptr<Plan> plan;
    NativeBuildResult miss = build_small(plan, 9, cache.options());
    if (no_compiler(miss)) {
        WARN("no C++ compiler: " << miss.message);
        return;
    }
    INFO(miss.message);
    REQUIRE(miss.ok);
    CHECK(miss.message.find("(compiled)") != std::string::npos);
    CHECK_FALSE(plan->native->cache_hit);
    CHECK(plan->native->compile_seconds > 0);
    std::string object = plan->native->object_path, stem = without_extension(object);
    CHECK(object.rfind(cache.dir + "/", 0) == 0);
    for (const char* extension : {".so", ".check", ".cpp", ".log"}) CHECK(access((stem + extension).c_str(), R_OK) == 0);
    check_small_plan_computes(*plan, 9);
    CHECK(plan->native->segment_calls == 1);
    double compile_seconds = plan->native->compile_seconds;
    plan.reset();   // unloaded: the second build maps the file again (dlopen would hand back a loaded one)

    std::unique_ptr<Plan> again;
    NativeBuildResult hit = build_small(again, 9, cache.options());
    INFO(hit.message);
    REQUIRE(hit.ok);
    CHECK(hit.message.find("(cached object)") != std::string::npos);
    CHECK(again->native->cache_hit);
    CHECK(again->native->compile_seconds == 0);
    CHECK(again->native->object_path == object);
    check_small_plan_computes(*again, 9);
    CHECK(again->native->segment_calls == 1);
    WARN("native cache: compiled in " << compile_seconds * 1e3 << " ms, the cached object checked and loaded in "
                                      << again->native->load_seconds * 1e3 << " ms");
}

TEST_CASE("native cache: a corrupt or truncated object, or one without its check file, is rebuilt, never loaded") {
    CacheFolder cache;
    std::unique_ptr<Plan> plan;
    NativeBuildResult first = build_small(plan, 11, cache.options());
    if (no_compiler(first)) {
        WARN("no C++ compiler: " << first.message);
        return;
    }
    REQUIRE(first.ok);
    std::string object = plan->native->object_path, check = without_extension(object) + ".check";
    std::string good = file_bytes(object);
    plan.reset();   // unloads the object
    std::string flipped = good;
    flipped[flipped.size() / 2] = static_cast<char>(~flipped[flipped.size() / 2]);
    struct Damage {
        const char* what;
        std::string object_bytes;
        bool drop_check;
        const char* said;
    } damages[] = {
        {"a byte flipped", flipped, false, "its size or hash did not match its check file"},
        {"truncated", good.substr(0, good.size() / 3), false, "its size or hash did not match its check file"},
        {"no check file", good, true, "it had no check file"},
    };
    for (const Damage& d : damages) {
        INFO(d.what);
        replace_file(object, d.object_bytes);
        if (d.drop_check) unlink(check.c_str());
        NativeBuildResult built = build_small(plan, 11, cache.options());
        INFO(built.message);
        REQUIRE(built.ok);
        CHECK_FALSE(plan->native->cache_hit);
        CHECK(built.message.find(std::string("the cached object was rebuilt: ") + d.said) != std::string::npos);
        CHECK(file_bytes(object) == good);   // the compiler makes the same bytes again
        check_small_plan_computes(*plan, 11);
        CHECK(plan->native->segment_calls == 1);
        plan.reset();
    }
}

TEST_CASE("native cache: another plan's object and check file in a plan's place are rejected before loading and rebuilt") {
    CacheFolder cache;
    std::unique_ptr<Plan> plan, other;
    NativeBuildResult first = build_small(plan, 5, cache.options());
    if (no_compiler(first)) {
        WARN("no C++ compiler: " << first.message);
        return;
    }
    REQUIRE(first.ok);
    REQUIRE(build_small(other, 7, cache.options()).ok);
    std::string mine = without_extension(plan->native->object_path), theirs = without_extension(other->native->object_path);
    REQUIRE(mine != theirs);
    std::string their_object = file_bytes(theirs + ".so");
    plan.reset();
    other.reset();
    replace_file(mine + ".so", their_object);
    replace_file(mine + ".check", file_bytes(theirs + ".check"));
    NativeBuildResult built = build_small(plan, 5, cache.options());
    INFO(built.message);
    REQUIRE(built.ok);
    CHECK_FALSE(plan->native->cache_hit);
    CHECK(built.message.find("the cached object was rebuilt: its check file is another object's") != std::string::npos);
    CHECK(file_bytes(mine + ".so") != their_object);
    check_small_plan_computes(*plan, 5);
    CHECK(plan->native->segment_calls == 1);
}

namespace {

// Sets an environment variable for the life of the object, then puts back what was there.
struct ScopedEnv {
    std::string name;
    bool had = false;
    std::string old;
    ScopedEnv(const char* n, const std::string& value) : name(n) {
        if (const char* v = getenv(n)) had = true, old = v;
        setenv(n, value.c_str(), 1);
    }
    ~ScopedEnv() {
        if (had) setenv(name.c_str(), old.c_str(), 1);
        else unsetenv(name.c_str());
    }
};

// A build that fails leaves the plan interpreted, computing right.
void check_stays_interpreted(Plan& plan, const NativeBuildResult& built, int64_t n) {
    CHECK_FALSE(built.ok);
    CHECK(plan.native == nullptr);
    check_small_plan_computes(plan, n);
}

}  // namespace

TEST_CASE("native build: a compiler that is not there, given or from TAPEDECK_CXX, is named and the plan stays interpreted") {
    CacheFolder cache;
    std::unique_ptr<Plan> plan;
    NativeBuildResult given = build_small(plan, 6, NativeBuildOptions{"/nonexistent/c++", cache.dir});
    INFO(given.message);
    CHECK(given.message == "no C++ compiler at the compiler option=/nonexistent/c++ (not an executable file, nor one on PATH)");
    check_stays_interpreted(*plan, given, 6);

    ScopedEnv cxx("TAPEDECK_CXX", "/nonexistent/tapedeck-c++");
    NativeBuildResult from_env = build_small(plan, 6, cache.options());
    INFO(from_env.message);
    CHECK(from_env.message.find("TAPEDECK_CXX=/nonexistent/tapedeck-c++") != std::string::npos);
    check_stays_interpreted(*plan, from_env, 6);
    ScopedEnv path("PATH", cache.dir);   // no compiler on it, none asked for
    ScopedEnv unset_tapedeck("TAPEDECK_CXX", ""), unset_cxx("CXX", "");
    NativeBuildResult none = build_small(plan, 6, cache.options());
    CHECK(no_compiler(none));
    check_stays_interpreted(*plan, none, 6);
    CHECK(std::filesystem::is_empty(cache.dir));   // nothing written
}

TEST_CASE("native build: a compiler that fails puts its own messages in the result and the plan stays interpreted") {
    CacheFolder cache, tools;
    std::string fake = tools.dir + "/fake-c++";
    std::ofstream(fake) << "#!/bin/sh\necho 'fake-c++: error: the plan does not compile' >&2\nexit 1\n";
    chmod(fake.c_str(), 0755);
    std::unique_ptr<Plan> plan;
    NativeBuildResult built = build_small(plan, 6, NativeBuildOptions{fake, cache.dir});
    INFO(built.message);
    CHECK(built.message.rfind("the compiler failed (exit status 1) on " + cache.dir + "/", 0) == 0);
    CHECK(built.message.find(":\nfake-c++: error: the plan does not compile") != std::string::npos);
    check_stays_interpreted(*plan, built, 6);
    for (const auto& entry : std::filesystem::directory_iterator(cache.dir)) {   // the source and the log, no object
        std::string extension = entry.path().extension();
        CHECK((extension == ".cpp" || extension == ".log"));
    }
}

namespace {

mode_t mode_of(const std::string& path) {
    struct stat st;
    REQUIRE(stat(path.c_str(), &st) == 0);
    return st.st_mode & 07777;
}

// plan_native_build as user `uid` in a child process (root cannot be refused a folder's
// permissions): the result's message, "ok: " before it when it succeeded.
std::string build_as_user(Plan& plan, const NativeBuildOptions& options, uid_t uid) {
    int pipe_ends[2];
    REQUIRE(pipe(pipe_ends) == 0);
    pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        close(pipe_ends[0]);
        std::string said = "could not become the user";
        if (setgid(uid) == 0 && setuid(uid) == 0) {
            NativeBuildResult built = plan_native_build(plan, options);
            said = (built.ok ? "ok: " : "") + built.message;
        }
        ssize_t written = write(pipe_ends[1], said.data(), said.size());
        _exit(written == static_cast<ssize_t>(said.size()) ? 0 : 1);
    }
    close(pipe_ends[1]);
    std::string said;
    char chunk[512];
    for (ssize_t n; (n = read(pipe_ends[0], chunk, sizeof chunk)) > 0;) said.append(chunk, static_cast<size_t>(n));
    close(pipe_ends[0]);
    int status = 0;
    waitpid(child, &status, 0);
    CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0));
    return said;
}

}  // namespace

TEST_CASE("native cache folder: one open to others is made private, as is the one under XDG_CACHE_HOME") {
    CacheFolder cache;
    chmod(cache.dir.c_str(), 0777);
    std::unique_ptr<Plan> plan;
    NativeBuildResult built = build_small(plan, 4, cache.options());
    if (no_compiler(built)) {   // (the folder is looked at once there is a compiler)
        WARN("no C++ compiler: " << built.message);
        return;
    }
    CHECK(mode_of(cache.dir) == 0700);
    REQUIRE(built.ok);
    ScopedEnv xdg("XDG_CACHE_HOME", cache.dir + "/xdg");
    built = build_small(plan, 4, NativeBuildOptions{});
    INFO(built.message);
    REQUIRE(built.ok);
    CHECK(plan->native->object_path.rfind(cache.dir + "/xdg/tapedeck/native/", 0) == 0);
    CHECK(mode_of(cache.dir + "/xdg/tapedeck") == 0700);
    CHECK(mode_of(cache.dir + "/xdg/tapedeck/native") == 0700);
    check_small_plan_computes(*plan, 4);
}

TEST_CASE("native cache folder: another user's, or one the user cannot write, is refused by name and the plan stays interpreted") {
    CacheFolder cache;
    std::unique_ptr<Plan> plan = small_plan(4);
    std::string foreign = "/";   // root's: another user's unless the test runs as root
    if (geteuid() == 0) {
        REQUIRE(chown(cache.dir.c_str(), 65534, 65534) == 0);
        foreign = cache.dir;
    }
    NativeBuildResult built = plan_native_build(*plan, NativeBuildOptions{"", foreign});
    if (no_compiler(built)) {   // (the folder is looked at once there is a compiler)
        WARN("no C++ compiler: " << built.message);
        return;
    }
    INFO(built.message);
    CHECK(built.message == "the cache folder " + foreign + " belongs to another user");
    check_stays_interpreted(*plan, built, 4);

    chmod(cache.dir.c_str(), 0500);
    std::string said;
    if (geteuid() == 0) {
        said = build_as_user(*plan, cache.options(), 65534);   // the folder is that user's
    } else {
        built = plan_native_build(*plan, cache.options());
        said = (built.ok ? "ok: " : "") + built.message;
    }
    CHECK(said == "the cache folder " + cache.dir + " is not writable");
    CHECK(plan->native == nullptr);
    check_small_plan_computes(*plan, 4);
}
