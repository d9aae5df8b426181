// test_format.cpp: tensors and tapes as text (format.h) and as Graphviz graphs (dot_export.h).
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <unistd.h>

#include "dot_export.h"
#include "format.h"
#include "test_helpers.h"

using namespace td;
using namespace td_test;
using Catch::Matchers::Contains;

namespace {

std::string read_file(const std::filesystem::path& path) {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

// A fresh empty directory under the system's temp dir, removed at the end of the scope.
struct TempDir {
    std::filesystem::path path;
    TempDir() {
        path = std::filesystem::temp_directory_path() /
               ("tapedeck_engine_tests_" + std::to_string(::getpid()) + "_" + std::to_string(tape_next_id()));
        std::filesystem::create_directories(path);
    }
    ~TempDir() { std::filesystem::remove_all(path); }
};

}  // namespace

TEST_CASE("format: a scalar product prints its value and grad_fn with the node id") {
    Tensor a = make_scalar(15, DTYPE_F32, true), b = make_scalar(20, DTYPE_F32, true);
    Tensor c = ops::mul(a, b);
    CHECK(tensor_format(c) == "tensor(300., grad_fn=<mul #" + std::to_string(c.id()) + ">)");
    CHECK(tensor_format(a) == "tensor(15., requires_grad=true)");
    CHECK(tensor_format(make_scalar(0.5, DTYPE_F32)) == "tensor(0.5000)");
}

TEST_CASE("format: value_format of a 2x2 float tensor uses a shared width and 4 decimals") {
    Tensor t = make_tensor(Shape{2, 2}, {1.5, -2, 3, 4.25}, DTYPE_F32);
    CHECK(value_format(t.value(), 0) == "[[ 1.5000, -2.0000],\n [ 3.0000,  4.2500]]");
    CHECK(tensor_format(t) == "tensor([[ 1.5000, -2.0000],\n        [ 3.0000,  4.2500]], size=[2,2])");
}

TEST_CASE("format: dtypes other than float32 are named, whole numbers print with a trailing dot") {
    CHECK(tensor_format(make_tensor(Shape{3}, {1, -2, 30}, DTYPE_I64)) == "tensor([ 1, -2, 30], size=[3], dtype=int64)");
    CHECK(tensor_format(make_tensor(Shape{2}, {1, 2}, DTYPE_F64)) == "tensor([1., 2.], size=[2], dtype=float64)");
    CHECK(value_format(make_tensor(Shape{0}, {}).value(), 0) == "[]");
}

TEST_CASE("format: more than 1,000 elements are summarised with ...") {
    Tensor big = ops::create(OP_arange, Shape{2000}, DTYPE_I64);
    std::string text = tensor_format(big);
    INFO(text);
    CHECK_THAT(text, Contains("...") && Contains("1999") && Contains("size=[2000]"));
    CHECK(text.size() < 200);
}

TEST_CASE("format: graph_format_table lists each node's id, op, phase and inputs") {
    Tensor x = make_leaf(Shape{2}, {1, 2});
    Tensor y = ops::unary(OP_tanh, x);
    Tensor loss = ops::reduce_all(OP_sum, y);
    backward(loss, nullptr);
    NodeList nodes = graph_collect(loss);
    std::string table = graph_format_table(nodes);
    INFO(table);
    CHECK_THAT(table, Contains("id") && Contains("op") && Contains("phase") && Contains("inputs"));
    bool has_backward = false;
    for (const Ref<Node>& n : nodes) {
        std::string id = std::to_string(n->id);
        CHECK_THAT(table, Contains(id + "  " + n->name()));
        has_backward = has_backward || n->phase == PHASE_BACKWARD;
    }
    CHECK(has_backward);
    CHECK_THAT(table, Contains("backward of #" + std::to_string(y.id())));
    CHECK_THAT(table, Contains("#" + std::to_string(x.id())));   // tanh's input
    // One line per node plus the header.
    CHECK(std::count(table.begin(), table.end(), '\n') == static_cast<long>(nodes.size()) + 1);
}

TEST_CASE("dot: graph_to_dot names every node by id and op, with its edges") {
    Tensor x = make_leaf(Shape{2}, {1, 2});
    Tensor y = ops::mul_scalar(x, 3);
    Tensor loss = ops::reduce_all(OP_sum, y);
    NodeList nodes = graph_collect(loss);
    REQUIRE(nodes.size() == 3);
    std::string dot = graph_to_dot(nodes);
    INFO(dot);
    CHECK_THAT(dot, Contains("digraph"));
    for (const Ref<Node>& n : nodes) {
        CHECK_THAT(dot, Contains("n" + std::to_string(n->id) + " [label=\"#" + std::to_string(n->id) + " " + n->name()));
    }
    CHECK_THAT(dot, Contains("n" + std::to_string(x.id()) + " -> n" + std::to_string(y.id())));
    CHECK_THAT(dot, Contains("n" + std::to_string(y.id()) + " -> n" + std::to_string(loss.id())));
    CHECK_THAT(dot, Contains("mul_scalar(s=3)"));
}

TEST_CASE("dot: graph_write writes DOT text to .dot and renders SVG for .svg") {
    Tensor x = make_leaf(Shape{2}, {1, 2});
    Tensor loss = ops::reduce_all(OP_sum, ops::unary(OP_exp, x));
    backward(loss, nullptr);
    NodeList nodes = graph_collect(loss);
    TempDir dir;
    std::filesystem::path dot_path = dir.path / "graph.dot", svg_path = dir.path / "graph.svg";
    graph_write(nodes, dot_path.string());
    graph_write(nodes, svg_path.string());
    REQUIRE(std::filesystem::exists(dot_path));
    REQUIRE(std::filesystem::exists(svg_path));
    std::string dot = read_file(dot_path), svg = read_file(svg_path);
    CHECK(dot == graph_to_dot(nodes));
    CHECK_THAT(svg, Contains("<svg"));
    CHECK_THAT(svg, Contains("exp"));
    CHECK_THROWS_WITH(graph_write(nodes, (dir.path / "graph").string()), Contains("needs one of the extensions"));
    CHECK_THROWS_AS(graph_write(nodes, (dir.path / "missing_dir" / "g.dot").string()), EngineError);
}

// Graphviz 2.42's pango plugin keeps a pointer into the font dictionary of the context that first
// laid text out; a context freed and made again left it dangling, and the next render compared
// freed memory (a heap-use-after-free under ./run.sh test-asan). One context serves the process.
TEST_CASE("dot: graph_write renders again and again through the one Graphviz context") {
    Tensor x = make_leaf(Shape{2}, {1, 2});
    Tensor loss = ops::reduce_all(OP_sum, ops::unary(OP_tanh, x));
    NodeList nodes = graph_collect(loss);
    TempDir dir;
    GVC_s* context = nullptr;
    {
        std::lock_guard<std::mutex> lock(graphviz_mutex());
        context = graphviz_context();
    }
    REQUIRE(context != nullptr);
    for (int i = 0; i < 3; ++i) {
        std::filesystem::path svg_path = dir.path / ("graph" + std::to_string(i) + ".svg");
        graph_write(nodes, svg_path.string());
        CHECK_THAT(read_file(svg_path), Contains("tanh"));
        std::lock_guard<std::mutex> lock(graphviz_mutex());
        CHECK(graphviz_context() == context);
    }
}
