// test_plan_file.cpp: the plan file loader against hostile files (checksum-valid, as any editor
// makes them): attributes out of range, counts the file cannot hold, shapes that overflow, plans
// that would take more memory than the bound, and every attribute of every op of the fuzz seeds
// pushed to extremes. Each must load (and then compile and run) or fail with an error naming
// load_plan and the file; none may crash (the sanitizer build checks what a release build hides).
#include <catch2/catch.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>

#include "plan.h"
#include "test_helpers.h"

using namespace td;
using namespace td_test;

namespace {

uint64_t fnv1a(const std::string& s, size_t from) {
    uint64_t hash = 1469598103934665603ull;
    for (size_t i = from; i < s.size(); ++i) {
        hash ^= static_cast<unsigned char>(s[i]);
        hash *= 1099511628211ull;
    }
    return hash;
}

void fix_checksum(std::string& bytes) {
    uint64_t sum = fnv1a(bytes, 32);
    std::memcpy(&bytes[24], &sum, 8);
}

std::string load_error(const std::string& bytes, const PlanLoadOptions& options = {}) {
    try {
        PlanPasses passes;
        plan_load_bytes(bytes, "hostile.tdp", &passes, options);
    } catch (const EngineError& e) {
        return e.what();
    }
    return "";
}

// A recorded plan of `fn` over tensors of these shapes (float32 zeros).
template <class F>
std::unique_ptr<Plan> record(const std::vector<Shape>& shapes, F fn) {
    std::vector<Tensor> inputs;
    std::vector<std::string> names;
    for (const Shape& s : shapes) {
        inputs.push_back(ops::create(OP_zeros, s, DTYPE_F32));
        names.push_back("x" + std::to_string(names.size() + 1));
    }
    plan_record_begin("hostile", inputs, names, SourceLoc());
    std::vector<Tensor> outputs = fn(inputs);
    return plan_record_end(outputs);
}

PlanStep& step_of(Plan& plan, OpId op) {
    for (PlanStep& s : plan.steps)
        if (s.kind == STEP_KERNEL && s.op == op) return s;
    FAIL("no step of op " << op_info(op).name);
    throw 0;
}

// Loads, compiles and runs on zero inputs; "" when all of it worked, else the error.
std::string load_compile_run(const std::string& bytes, size_t max_bytes = size_t(64) << 20) {
    try {
        PlanPasses passes;
        PlanLoadOptions options;
        options.max_bytes = max_bytes;
        std::unique_ptr<Plan> recorded = plan_load_bytes(bytes, "hostile.tdp", &passes, options);
        std::unique_ptr<Plan> plan = plan_compile(std::move(recorded), passes);
        std::vector<Tensor> inputs;
        for (const PlanInput& in : plan->inputs) {
            inputs.push_back(ops::create(OP_zeros, in.shape, in.dtype));
            inputs.back().node->outputs[0].requires_grad = in.requires_grad;
        }
        NoGradGuard keep_mode;
        set_grad_enabled(plan->grad_mode);
        plan_run(*plan, inputs);
        plan_run(*plan, inputs);
    } catch (const EngineError& e) {
        return e.what();
    }
    return "";
}

std::string read_file(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

}  // namespace

TEST_CASE("plan file: an out-of-range dim on a max step is an error naming load_plan, the step and the op") {
    std::unique_ptr<Plan> plan = record({Shape{2, 3}}, [](const std::vector<Tensor>& x) {
        return std::vector<Tensor>{ops::reduce(OP_max, x[0], 1, false)};
    });
    plan_step_own_attrs(*plan, step_of(*plan, OP_max)).dim = 7;
    std::string error = load_error(plan_save_bytes(*plan, PlanPasses{}));
    CHECK(error.find("load_plan: hostile.tdp: step 1 (max): max: dim 8 out of range for a 2-d tensor") != std::string::npos);
    plan_step_own_attrs(*plan, step_of(*plan, OP_max)).dim = -100000;
    CHECK(load_error(plan_save_bytes(*plan, PlanPasses{})).find("max: dim -99999 out of range") != std::string::npos);
}

TEST_CASE("plan file: a count the bytes left cannot hold fails before anything is allocated for it") {
    std::unique_ptr<Plan> plan = record({Shape{2}}, [](const std::vector<Tensor>& x) {
        return std::vector<Tensor>{ops::neg(x[0])};
    });
    std::string good = plan_save_bytes(*plan, PlanPasses{});
    // payload: name (u32 + 8 bytes "hostile"), loc (u32 + 0 bytes, i32), grad mode, 6 passes, then the inputs' count
    size_t at = 32 + 4 + plan->name.size() + 4 + 4 + 1 + 6;
    uint32_t count = 0;
    std::memcpy(&count, &good[at], 4);
    REQUIRE(count == 1);
    for (uint32_t n : {uint32_t(1) << 24, uint32_t(1) << 20, uint32_t(1000)}) {
        std::string bad = good;
        std::memcpy(&bad[at], &n, 4);
        fix_checksum(bad);
        std::string error = load_error(bad);
        CHECK(error.find("load_plan: hostile.tdp: the file says it holds " + std::to_string(n) + " inputs, but only") !=
              std::string::npos);
    }
}

TEST_CASE("plan file: shapes whose element count overflows are refused where they are read") {
    std::unique_ptr<Plan> plan = record({Shape{2, 2}}, [](const std::vector<Tensor>& x) {
        return std::vector<Tensor>{ops::neg(x[0])};
    });
    Shape huge{int64_t(1) << 32, int64_t(1) << 32};
    plan->inputs[0].shape = huge;
    for (PlanValue& v : plan->values) v.shape = huge;
    std::string error = load_error(plan_save_bytes(*plan, PlanPasses{}));
    CHECK(error.find("load_plan: hostile.tdp: a tensor of shape [4294967296,4294967296]") != std::string::npos);
    CHECK(error.find("more elements than a tensor can hold") != std::string::npos);
}

TEST_CASE("plan file: a small file that would make a huge tensor is refused by the memory bound, before anything is allocated") {
    std::unique_ptr<Plan> plan = record({}, [](const std::vector<Tensor>&) {
        return std::vector<Tensor>{ops::create(OP_full, Shape{2, 2}, DTYPE_F64, 1.5)};
    });
    Shape big{int64_t(1) << 15, int64_t(1) << 15};   // 8 GiB of float64, folded (filled) at load by the fold pass
    plan_step_own_attrs(*plan, step_of(*plan, OP_full)).shape = big;
    for (PlanValue& v : plan->values) v.shape = big;
    std::string bytes = plan_save_bytes(*plan, PlanPasses{});
    CHECK(bytes.size() < 1000);
    PlanLoadOptions options;
    options.max_bytes = size_t(1) << 30;
    size_t live = storage_bytes_live();
    std::string error = load_error(bytes, options);
    CHECK(error.find("load_plan: hostile.tdp: the plan needs 8.00 GB") != std::string::npos);
    CHECK(error.find("the bound is 1.00 GB") != std::string::npos);
    CHECK(storage_bytes_live() == live);
    // The default bound is half the memory limit; a bound that covers it lets the plan load.
    CHECK(plan_load_default_max_bytes() == memory_limit_bytes() / 2);
    options.max_bytes = size_t(9) << 30;
    CHECK(load_error(bytes, options) == "");
}

TEST_CASE("plan file: the memory bound counts inputs, captured tensors, every value made and kernel scratch") {
    Tensor w = make_leaf(Shape{30, 40}, std::vector<double>(1200, 0.5), DTYPE_F32);
    std::unique_ptr<Plan> plan = record({Shape{50, 30}}, [&](const std::vector<Tensor>& x) {
        Tensor y = ops::mm(x[0], w);   // [50,40]
        Tensor loss = ops::reduce_all(OP_sum, ops::unary(OP_tanh, y));
        backward(loss, nullptr);
        return std::vector<Tensor>{loss};
    });
    size_t bound = plan_memory_bound(*plan);
    size_t made = 0;
    for (const PlanValue& v : plan->values)
        if ((v.kind == VALUE_STEP && v.alias_of < 0) || v.kind == VALUE_GRAD) made += static_cast<size_t>(v.shape.numel()) * dtype_size(v.dtype);
    CHECK(bound >= made + 50 * 30 * 4 + 30 * 40 * 4);
    std::string bytes = plan_save_bytes(*plan, PlanPasses{});
    REQUIRE(bytes.size() < bound);
    CHECK(load_compile_run(bytes, bound) == "");
    CHECK(load_compile_run(bytes, bound - 1).find("the plan needs") != std::string::npos);
    w.node->outputs[0].grad = Tensor();
}

TEST_CASE("plan file: a reshape to -1 (view(-1)) round-trips") {
    std::unique_ptr<Plan> plan = record({Shape{2, 3}}, [](const std::vector<Tensor>& x) {
        return std::vector<Tensor>{ops::reshape(ops::mul_scalar(x[0], 2), Shape{-1})};
    });
    CHECK(load_compile_run(plan_save_bytes(*plan, PlanPasses{})) == "");
}

TEST_CASE("plan file: conv2d and max_pool2d windows (H and W, dilation, groups, ceil_mode) round-trip") {
    std::unique_ptr<Plan> plan = record({Shape{1, 4, 7, 6}, Shape{4, 2, 2, 3}}, [](const std::vector<Tensor>& x) {
        Window2d conv;
        conv.stride_h = 2, conv.padding_w = 1, conv.dilation_h = 2, conv.groups = 2;
        Window2d pool;
        pool.kernel_h = 3, pool.kernel_w = 2, pool.stride_h = 1, pool.stride_w = 2, pool.padding_h = 1;
        pool.dilation_w = 2, pool.ceil_mode = true;
        return std::vector<Tensor>{ops::max_pool2d(ops::conv2d(x[0], x[1], Tensor(), conv), pool)};
    });
    PlanPasses passes;
    std::unique_ptr<Plan> loaded = plan_load_bytes(plan_save_bytes(*plan, PlanPasses{}), "windows.tdp", &passes);
    for (OpId op : {OP_conv2d, OP_max_pool2d}) {
        INFO(op_info(op).name);
        CHECK(attrs_equal(plan_step_attrs(*loaded, step_of(*loaded, op)), plan_step_attrs(*plan, step_of(*plan, op))));
    }
    CHECK(plan_step_attrs(*loaded, step_of(*loaded, OP_conv2d)).groups == 2);
    CHECK(plan_step_attrs(*loaded, step_of(*loaded, OP_max_pool2d)).ceil_mode);
    CHECK(load_compile_run(plan_save_bytes(*plan, PlanPasses{})) == "");
}

TEST_CASE("plan file: an older file's single kernel, stride and padding hold along H and W") {
    // conv_net_step.tdp was saved before version 3: conv2d with padding 1, max_pool2d with kernel 2.
    std::filesystem::path seed = std::filesystem::path(TAPEDECK_SOURCE_DIR) / "tests/fuzz/corpus/plan_load/conv_net_step.tdp";
    std::string bytes = read_file(seed);
    uint32_t version;
    std::memcpy(&version, &bytes[8], 4);
    REQUIRE(version < 3);
    PlanPasses passes;
    std::unique_ptr<Plan> plan = plan_load_bytes(bytes, "conv_net_step.tdp", &passes);
    const OpAttrs &conv = plan_step_attrs(*plan, step_of(*plan, OP_conv2d)),
                  &pool = plan_step_attrs(*plan, step_of(*plan, OP_max_pool2d));
    CHECK(conv.padding_h == 1);
    CHECK(conv.padding_w == 1);
    CHECK(conv.stride_w == 1);
    CHECK(conv.dilation_w == 1);
    CHECK(conv.groups == 1);
    CHECK(pool.kernel_h == 2);
    CHECK(pool.kernel_w == 2);
    CHECK(pool.stride_w == 2);
    CHECK_FALSE(pool.ceil_mode);
    CHECK_NOTHROW(plan_compile(std::make_shared<Plan>(*plan), passes));
}

TEST_CASE("plan file: a step that adds into its output (a compiled plan's own attribute) is refused") {
    std::unique_ptr<Plan> plan = record({Shape{2, 2}}, [](const std::vector<Tensor>& x) {
        return std::vector<Tensor>{ops::mm(x[0], x[0])};
    });
    plan_step_own_attrs(*plan, step_of(*plan, OP_mm)).accumulate = true;
    CHECK(load_error(plan_save_bytes(*plan, PlanPasses{})).find("adds into its output") != std::string::npos);
}

TEST_CASE("plan file: plan_load and plan_load_bytes read the same plan; file errors name load_plan and the file") {
    std::unique_ptr<Plan> plan = record({Shape{2}}, [](const std::vector<Tensor>& x) {
        return std::vector<Tensor>{ops::unary(OP_exp, x[0])};
    });
    std::string path = "test_plan_file_same.tdp";
    plan_save(*plan, PlanPasses{}, path);
    CHECK(read_file(path) == plan_save_bytes(*plan, PlanPasses{}));
    PlanPasses passes;
    CHECK(plan_load(path, &passes)->steps.size() == plan->steps.size());
    PlanLoadOptions tiny;
    tiny.max_bytes = 16;
    try {
        plan_load(path, &passes, tiny);
        FAIL("a file larger than max_bytes loaded");
    } catch (const EngineError& e) {
        CHECK(std::string(e.what()).find("load_plan: test_plan_file_same.tdp: the file is larger than the bound of 16 bytes") !=
              std::string::npos);
    }
    std::remove(path.c_str());
    try {
        plan_load(".", &passes);
        FAIL("a directory loaded");
    } catch (const EngineError& e) {
        CHECK(std::string(e.what()) == "load_plan: . is a directory, not a file");
    }
}

// Every attribute of the first step of each op in the fuzz seeds, pushed to extremes one at a
// time: the plan loads and runs, or fails with an error. Under ASan and UBSan this shows that no
// shape rule or kernel reads out of bounds or overflows on any attribute value a file can hold.
TEST_CASE("plan file: every attribute of every seed op at extreme values loads and runs, or is an error") {
    std::filesystem::path seeds = std::filesystem::path(TAPEDECK_SOURCE_DIR) / "tests/fuzz/corpus/plan_load";
    const int ints[] = {std::numeric_limits<int>::min(), -2, -1, 0, 1, 5, 6, 7, 1 << 30, std::numeric_limits<int>::max()};
    const int64_t longs[] = {std::numeric_limits<int64_t>::min(), -1, 0, 3, int64_t(1) << 40, std::numeric_limits<int64_t>::max()};
    const double numbers[] = {std::nan(""), INFINITY, -INFINITY, 1e300, -1e300, 0x1p63, 0.5};
    const Shape shapes[] = {Shape{}, Shape{-1}, Shape{-5, 2}, Shape{0}, Shape{int64_t(1) << 40, int64_t(1) << 40, -1},
                            Shape{int64_t(1) << 32, int64_t(1) << 32}, Shape{2, 1, 1, 1, 1, 1}, Shape{1, 1, 3, 3}};
    int files = 0, tried = 0, refused = 0;
    for (const auto& entry : std::filesystem::directory_iterator(seeds)) {
        PlanPasses passes;
        std::unique_ptr<Plan> plan;
        try {
            plan = plan_load_bytes(read_file(entry.path()), entry.path().filename().string(), &passes);
        } catch (const EngineError&) {
            continue;   // a crash found by the fuzzer, kept as a regression input: it must not load
        }
        ++files;
        std::vector<bool> seen(OP_COUNT, false);
        for (size_t k = 0; k < plan->steps.size(); ++k) {
            if (plan->steps[k].kind != STEP_KERNEL || seen[plan->steps[k].op]) continue;
            seen[plan->steps[k].op] = true;
            auto attempt = [&](auto&& change) {
                Plan copy = *plan;
                change(plan_step_own_attrs(copy, copy.steps[k]));
                std::string error = load_compile_run(plan_save_bytes(copy, passes));
                ++tried;
                refused += !error.empty();
            };
            for (int v : ints) {
                attempt([&](OpAttrs& a) { a.dim = v; });
                attempt([&](OpAttrs& a) { a.dim2 = v; });
                attempt([&](OpAttrs& a) { a.kernel_h = v; });
                attempt([&](OpAttrs& a) { a.kernel_w = v; });
                attempt([&](OpAttrs& a) { a.stride_h = v; });
                attempt([&](OpAttrs& a) { a.stride_w = v; });
                attempt([&](OpAttrs& a) { a.padding_h = v; });
                attempt([&](OpAttrs& a) { a.padding_w = v; });
                attempt([&](OpAttrs& a) { a.dilation_h = v; });
                attempt([&](OpAttrs& a) { a.dilation_w = v; });
                attempt([&](OpAttrs& a) { a.groups = v; });
            }
            for (int64_t v : longs) {
                attempt([&](OpAttrs& a) { a.start = v; });
                attempt([&](OpAttrs& a) { a.length = v; });
            }
            for (double v : numbers) {
                attempt([&](OpAttrs& a) { a.scalar = v; });
                attempt([&](OpAttrs& a) { a.lo = v; });
                attempt([&](OpAttrs& a) { a.hi = v; });
            }
            for (const Shape& s : shapes) attempt([&](OpAttrs& a) { a.shape = s; });
            attempt([](OpAttrs& a) { a.all = !a.all; });
            attempt([](OpAttrs& a) { a.keepdim = !a.keepdim; });
            attempt([](OpAttrs& a) { a.trans_a = !a.trans_a; });
            attempt([](OpAttrs& a) { a.trans_b = !a.trans_b; });
            attempt([](OpAttrs& a) { a.reduction = a.reduction == REDUCTION_SUM ? REDUCTION_MEAN : REDUCTION_SUM; });
            for (DType d : {DTYPE_F32, DTYPE_F64, DTYPE_I64}) attempt([&](OpAttrs& a) { a.dtype = d; });
        }
    }
    CHECK(files >= 5);
    CHECK(tried > 1000);
    CHECK(refused > 0);
    CHECK(refused < tried);
}

// A .grad read before the plan sets it is safe only when a guard checks, before the run, that it is
// set: without the guard (a file edited to drop it), a kernel read the nil .grad (segfault).
TEST_CASE("plan file: a step reading a .grad that may be nil is refused") {
    std::filesystem::path seed = std::filesystem::path(TAPEDECK_SOURCE_DIR) / "tests/fuzz/corpus/plan_load/grad_state.tdp";
    PlanPasses passes;
    std::unique_ptr<Plan> plan = plan_load_bytes(read_file(seed), "grad_state.tdp", &passes);
    CHECK(load_compile_run(plan_save_bytes(*plan, passes)).find("w.grad was a tensor when recorded") != std::string::npos);
    std::vector<PlanGuard> kept;
    std::vector<int> renumber(plan->guards.size(), -1);
    for (size_t g = 0; g < plan->guards.size(); ++g) {
        if (plan->guards[g].kind == GUARD_GRAD_STATE) continue;
        renumber[g] = static_cast<int>(kept.size());
        kept.push_back(plan->guards[g]);
    }
    REQUIRE(kept.size() < plan->guards.size());
    plan->guards = kept;
    for (PlanStep& s : plan->steps)
        if (s.kind == STEP_GUARD) s.target = renumber[s.target];
    std::string error = load_error(plan_save_bytes(*plan, passes));
    CHECK(error.find("load_plan: hostile.tdp: step 1 (mul) reads the .grad of gradient target 0 where it may be nil") !=
          std::string::npos);
}

// Each crash the fuzzer found is kept in its corpus as crash_*.tdp (checksum-valid): each must be
// refused at load with an error naming the file (fuzz.plan_load_corpus replays them under ASan too).
TEST_CASE("plan file: the fuzzer's crash inputs in the corpus are refused with an error") {
    std::filesystem::path seeds = std::filesystem::path(TAPEDECK_SOURCE_DIR) / "tests/fuzz/corpus/plan_load";
    int crashes = 0;
    for (const auto& entry : std::filesystem::directory_iterator(seeds)) {
        std::string name = entry.path().filename().string();
        if (name.rfind("crash_", 0) != 0) continue;
        ++crashes;
        INFO(name);
        CHECK(load_error(read_file(entry.path())).rfind("load_plan: hostile.tdp: ", 0) == 0);
    }
    CHECK(crashes >= 2);
}
