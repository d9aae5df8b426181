// debugger_why.cpp: `:why` and dbg.why — where a NaN or Inf came from.
//
// From a tensor holding NaN or Inf, walk back through the tape (each node's recorded inputs) along
// the inputs that hold NaN or Inf too, to the nodes whose inputs were all finite but whose result
// is not: the origins. The first of them (the lowest id: recorded first) is where the values first
// went bad. Explain it in words: the op and its line, its inputs' statistics (tensor_stats.h), and
// what in them made that op give NaN or Inf (log of 0, x/0, e^x past float32's range, ...); for a
// gradient, the forward op whose gradient rule made it and why (sqrt's gradient at 0). A leaf that
// already held Inf (a weight) is said to be one, with how it got them (made so, or written in place).
//
// The walk reads the values the nodes hold now, so it needs them alive: a stop (`:break if nan`),
// or a graph that tracks gradients (its nodes hold their inputs). A node that nothing holds any more,
// or a gradient whose bytes a backward pass freed, ends the trail, and :why says so.
//
// [SECTION] values      what is not finite in a value; broadcasting an element back to an input
// [SECTION] walk        the walk back through the tape to the origins
// [SECTION] reasons     why an op gave NaN or Inf from finite inputs, per op; why a gradient rule did
// [SECTION] explain     the explanation: text (:why) and table (dbg.why)
// [SECTION] commands    :why [EXPR] and dbg.why(t)
#include "debugger_why.h"

#include <lua.hpp>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "debugger.h"
#include "debugger_internal.h"
#include "node_names.h"
#include "tapedeck_lua.h"
#include "tensor_stats.h"
#include "lua_util.h"
#include "format.h"

using namespace td;

namespace dbg {

namespace {

// ============================================================================================
// [SECTION] values

// What is not finite in a value. `freed`: its bytes are gone (a backward pass used them).
struct BadCount {
    int64_t nan = 0, pos_inf = 0, neg_inf = 0, count = 0;
    bool freed = false;
    bool any() const { return nan + pos_inf + neg_inf > 0; }
};

BadCount bad_count(const Value& value) {
    BadCount b;
    if (value_freed(value)) {
        b.freed = true;
        return b;
    }
    b.count = value.numel();
    if (!dtype_is_float(value.dtype)) return b;
    Value host = value_to_host(value);
    for (int64_t i = 0; i < b.count; ++i) {
        double x = value_get(host, i);
        if (std::isnan(x)) ++b.nan;
        else if (std::isinf(x)) ++(x > 0 ? b.pos_inf : b.neg_inf);
    }
    return b;
}

std::string elements_text(int64_t n) { return std::to_string(n) + (n == 1 ? " element" : " elements"); }

// "1 NaN, 2 -Inf" (of what is there).
std::string bad_text(const BadCount& b) {
    std::string s;
    auto part = [&](int64_t n, const char* what) {
        if (n) s += (s.empty() ? "" : ", ") + std::to_string(n) + " " + what;
    };
    part(b.nan, "NaN");
    part(b.pos_inf, "+Inf");
    part(b.neg_inf, "-Inf");
    return s.empty() ? "no NaN or Inf" : s;
}

// The element of a value of shape `in` that row-major element i of the broadcast shape `out` reads.
int64_t broadcast_index(const Shape& out, const Shape& in, int64_t i) {
    int64_t index = 0, stride = 1;
    for (int d = out.ndim - 1, e = in.ndim - 1; d >= 0 && e >= 0; --d, --e) {
        int64_t coord = i % out.dims[d];
        i /= out.dims[d];
        if (in.dims[e] != 1) index += coord * stride;
        stride *= in.dims[e];
    }
    return index;
}

bool broadcasts_to(const Shape& in, const Shape& out) {
    if (in.ndim > out.ndim) return false;
    for (int d = out.ndim - 1, e = in.ndim - 1; e >= 0; --d, --e)
        if (in.dims[e] != 1 && in.dims[e] != out.dims[d]) return false;
    return true;
}

double dtype_max(DType dtype) { return dtype == DTYPE_F64 ? DBL_MAX : FLT_MAX; }

// How a node is shown: "logp (#4 log)" when the script named it, else "#4 log".
std::string node_text(const Node* node, int output = 0) {
    std::string id = "#" + std::to_string(node->id) + " " + node->shown_op();
    std::string label = node_label(node, output);
    return label.empty() || label[0] == '#' ? id : label + " (" + id + ")";
}

// A short name for an input in a sentence: its label ("p", "h2h + i2h"), else its id.
std::string input_name(const Node* producer, const Edge& e) {
    if (!producer) return "#" + std::to_string(e.id);
    std::string label = node_label(producer, e.output);
    return label.empty() ? "#" + std::to_string(e.id) : label;
}

std::string location_text(const Node* node) {
    if (node->where.file < 0) return "";
    std::string file = source_file_name(node->where.file);
    std::string s = file + ":" + std::to_string(node->where.line);
    std::string text = source_line_text(file, node->where.line);
    return text.empty() ? s : s + "  " + text;
}

// ============================================================================================
// [SECTION] walk

enum OriginKind : uint8_t {
    ORIGIN_OP,        // the op made NaN or Inf from finite inputs
    ORIGIN_LEAF,      // a node with no inputs (made from values, loaded) that holds them
    ORIGIN_WRITTEN,   // its inputs are finite; its values were written in place after it ran
    ORIGIN_GONE,      // the bad values came in from a node that is gone
    ORIGIN_FREED,     // an input's values were freed: the trail cannot go on
};

const char* origin_kind_name(OriginKind kind) {
    switch (kind) {
        case ORIGIN_OP: return "op";
        case ORIGIN_LEAF: return "leaf";
        case ORIGIN_WRITTEN: return "written";
        case ORIGIN_GONE: return "gone";
        case ORIGIN_FREED: return "freed";
    }
    return "?";
}

struct Origin {
    OriginKind kind = ORIGIN_OP;
    Ref<Node> node;       // the origin; GONE and FREED: the node whose input ends the trail
    int output = 0;
    int input = -1;       // GONE, FREED: that input
    int64_t order() const { return kind == ORIGIN_GONE ? node->inputs[input].id : node->id; }
};

// The walk back from one tensor. Costs O(nodes it visits + their elements): each node is visited
// once, each output's values are scanned once (the counts are kept), and nodes are found by id
// through one map of the tape built at the start (tape_find would walk the tape for each).
class Walk {
public:
    Walk() {
        for (Node* n = tape_first(); n; n = n->tape_next) by_id_[n->id] = n;
    }

    Node* find(int64_t id) const {
        auto it = by_id_.find(id);
        return it == by_id_.end() ? nullptr : it->second;
    }

    // What is not finite in output `output` of `node` (counted once).
    const BadCount& output_bad(Node* node, int output) {
        auto key = std::make_pair(node->id, output);
        auto it = counts_.find(key);
        if (it != counts_.end()) return it->second;
        return counts_[key] = bad_count(node->outputs[output].value);
    }

    // What is not finite in input i of `node`, through its producer when that lives.
    BadCount input_bad(Node* node, int i) {
        const Edge& e = node->inputs[i];
        Node* producer = e.node() ? e.node() : find(e.id);
        return producer ? output_bad(producer, e.output) : bad_count(e.value());
    }

    Node* producer(const Edge& e) const { return e.node() ? e.node() : find(e.id); }

    // Walk back from output `output` of `start` (which holds NaN or Inf) to the origins.
    void run(Node* start, int output) {
        std::vector<std::pair<Node*, int>> stack{{start, output}};
        std::unordered_set<int64_t> visited;
        while (!stack.empty()) {
            auto [node, out] = stack.back();
            stack.pop_back();
            if (!visited.insert(node->id).second) continue;
            held_.push_back(Ref<Node>(node));
            bool in_place = node->info().flags & OPF_INPLACE;
            bool bad_input = false;
            int freed_input = -1;
            for (int i = 0; i < node->inputs.size(); ++i) {
                if (in_place && i == 0) continue;   // the tensor it wrote: its old values are gone
                BadCount b = input_bad(node, i);
                if (b.freed) {
                    freed_input = i;
                    continue;
                }
                if (!b.any()) continue;
                bad_input = true;
                const Edge& e = node->inputs[i];
                Node* p = producer(e);
                if (!p) {
                    origins.push_back(Origin{ORIGIN_GONE, Ref<Node>(node), out, i});
                    continue;
                }
                reached_from.emplace(p->id, node->id);
                stack.push_back({p, e.output});
            }
            if (bad_input) continue;
            Origin o{ORIGIN_OP, Ref<Node>(node), out, -1};
            if (freed_input >= 0) {
                o.kind = ORIGIN_FREED;
                o.input = freed_input;
            } else if (written_since(node, out)) {
                o.kind = ORIGIN_WRITTEN;
            } else if (node->inputs.size() == 0) {
                o.kind = ORIGIN_LEAF;
            }
            origins.push_back(o);
        }
        std::sort(origins.begin(), origins.end(), [](const Origin& a, const Origin& b) { return a.order() < b.order(); });
    }

    // Whether output `output`'s storage was written after the node ran (an in-place op, an
    // assignment x[i] = v, an optimizer step): its values are not what the node computed.
    static bool written_since(const Node* node, int output) {
        const Output& o = node->outputs[output];
        return o.value.storage && o.value.storage->version != o.version;
    }

    // The newest live in-place node that wrote `node`'s output storage after it ran, or null.
    Node* in_place_writer(const Node* node, int output) const {
        const Storage* storage = node->outputs[output].value.storage.get();
        Node* writer = nullptr;
        for (Node* n = tape_first(); n; n = n->tape_next)
            if (n->id > node->id && (n->info().flags & OPF_INPLACE) && n->outputs.size() > 0 &&
                n->outputs[0].value.storage.get() == storage)
                writer = n;
        return writer;
    }

    // The forward nodes whose backward groups made the nodes reachable back from `from` (through
    // producers that live, whatever their values), newest first: where a gradient can have gone bad
    // when its values were freed. Each node once.
    std::vector<Node*> groups_behind(Node* from) const {
        std::vector<Node*> stack{from}, groups;
        std::unordered_set<int64_t> visited, seen_groups;
        while (!stack.empty()) {
            Node* node = stack.back();
            stack.pop_back();
            if (!visited.insert(node->id).second) continue;
            if (node->phase == PHASE_BACKWARD && seen_groups.insert(node->group).second)
                if (Node* group = find(node->group)) groups.push_back(group);
            if (node->phase != PHASE_BACKWARD) continue;   // the forward values are not where a gradient goes bad
            for (const Edge& e : node->inputs)
                if (Node* p = producer(e)) stack.push_back(p);
        }
        std::sort(groups.begin(), groups.end(), [](Node* a, Node* b) { return a->id > b->id; });
        return groups;
    }

    std::vector<Origin> origins;                        // sorted: the first one recorded first
    std::unordered_map<int64_t, int64_t> reached_from;  // node id -> the node (toward the start) whose input it is

private:
    std::unordered_map<int64_t, Node*> by_id_;
    std::map<std::pair<int64_t, int>, BadCount> counts_;
    std::vector<Ref<Node>> held_;
};

// ============================================================================================
// [SECTION] reasons
//
// For an elementwise op, each element the op made NaN or Inf is put in a category by the values it
// was computed from (a from input 1, b from input 2 or the op's number); each category is one
// sentence with its count. Other ops (matrix products, reductions, ...) get the general sentence:
// an overflow when they made only Inf, else the counts.

enum Category : uint8_t {
    CAT_NONE,
    CAT_LOG_ZERO, CAT_LOG_NEGATIVE, CAT_LOG1P_MINUS_ONE, CAT_LOG1P_BELOW,
    CAT_SQRT_NEGATIVE, CAT_RSQRT_ZERO, CAT_RECIPROCAL_ZERO,
    CAT_ZERO_OVER_ZERO, CAT_OVER_ZERO, CAT_SCALAR_ZERO_OVER_ZERO, CAT_SCALAR_OVER_ZERO,
    CAT_EXP_OVERFLOW, CAT_POW_ZERO_NEGATIVE, CAT_POW_NEGATIVE_FRACTION,
    CAT_FILL, CAT_OVERFLOW,
    CAT_INF_MINUS_INF, CAT_ZERO_TIMES_INF, CAT_INF_OVER_INF, CAT_FROM_NAN_OR_INF,
    CAT_COUNT
};

// The sentence of each category. %K: how many elements, %N: of how many, %A and %B: the inputs'
// names, %P: the op's number, %L: the limit of e^x, %T: the dtype, %M: its largest value, %a: the
// lowest (for negatives) or largest (for overflows) input value among those elements.
const char* const CATEGORY_TEXT[CAT_COUNT] = {
    "",
    "log of 0 is -Inf: %K of %N elements of %A were 0",
    "log of a negative number is NaN: %K of %N elements of %A were negative (the lowest %a)",
    "log1p of -1 is -Inf: %K of %N elements of %A were -1",
    "log1p of a number below -1 is NaN: %K of %N elements of %A were below -1 (the lowest %a)",
    "sqrt of a negative number is NaN: %K of %N elements of %A were negative (the lowest %a)",
    "1/sqrt(0) is Inf: %K of %N elements of %A were 0",
    "1/0 is Inf: %K of %N elements of %A were 0",
    "0/0 is NaN: at %K of %N elements both %A and %B were 0",
    "x/0 is Inf: at %K of %N elements %B was 0 and %A was not",
    "0/0 is NaN: the divisor is the number 0, and %K of %N elements of %A were 0",
    "x/0 is Inf: the divisor is the number 0, and %K of %N elements of %A were not 0",
    "e^x overflows %T for x above %L: %K of %N elements of %A were above it (the largest %a)",
    "0 to a negative power is Inf: %K of %N elements of %A were 0 (the power %P)",
    "a negative number to a fractional power is NaN: %K of %N elements of %A were negative (the power %P)",
    "it wrote its fill value %P at %K of %N elements",
    "the result overflowed %T (beyond ±%M) at %K of %N elements (the inputs' largest magnitude %a)",
    "Inf - Inf is NaN: at %K of %N elements",
    "0 * Inf is NaN: at %K of %N elements",
    "Inf / Inf is NaN: at %K of %N elements",
    "computed from NaN or Inf at %K of %N elements",
};

// The ops whose elements are classified, and how many inputs they read elementwise.
int elementwise_inputs(OpId op) {
    switch (op) {
        case OP_log: case OP_log1p: case OP_sqrt: case OP_rsqrt: case OP_reciprocal: case OP_exp: case OP_expm1:
        case OP_pow: case OP_div_scalar: case OP_rdiv_scalar: case OP_mul_scalar: case OP_add_scalar:
        case OP_rsub_scalar: case OP_square: case OP_to: case OP_neg: case OP_abs:
            return 1;
        case OP_div: case OP_mul: case OP_add: case OP_sub: case OP_pow_tensor: case OP_masked_fill:
            return 2;   // (not the in-place ops: what they wrote over is gone)
        default:
            return 0;
    }
}

// Why element (a, b) of `op` is y (not finite). Inputs finite: the op's own doing; not finite:
// how NaN came out of Inf.
Category classify(OpId op, double a, double b, double y, const OpAttrs& attrs, DType dtype) {
    double s = attrs.scalar;
    if (!std::isfinite(a) || !std::isfinite(b)) {
        if (!std::isnan(y) || std::isnan(a) || std::isnan(b)) return CAT_FROM_NAN_OR_INF;
        if (op == OP_sub && std::isinf(a) && std::isinf(b) && (a > 0) == (b > 0)) return CAT_INF_MINUS_INF;
        if (op == OP_add && std::isinf(a) && std::isinf(b) && (a > 0) != (b > 0)) return CAT_INF_MINUS_INF;
        if (op == OP_mul && (a == 0 || b == 0)) return CAT_ZERO_TIMES_INF;
        if (op == OP_mul_scalar && s == 0) return CAT_ZERO_TIMES_INF;
        if (op == OP_div && std::isinf(a) && std::isinf(b)) return CAT_INF_OVER_INF;
        return CAT_FROM_NAN_OR_INF;
    }
    switch (op) {
        case OP_log:
            if (a == 0) return CAT_LOG_ZERO;
            if (a < 0) return CAT_LOG_NEGATIVE;
            break;
        case OP_log1p:
            if (a == -1) return CAT_LOG1P_MINUS_ONE;
            if (a < -1) return CAT_LOG1P_BELOW;
            break;
        case OP_sqrt:
            if (a < 0) return CAT_SQRT_NEGATIVE;
            break;
        case OP_rsqrt:
            if (a == 0) return CAT_RSQRT_ZERO;
            if (a < 0) return CAT_SQRT_NEGATIVE;
            break;
        case OP_reciprocal:
            if (a == 0) return CAT_RECIPROCAL_ZERO;
            break;
        case OP_rdiv_scalar:   // s / x
            if (a == 0) return s == 0 ? CAT_ZERO_OVER_ZERO : CAT_RECIPROCAL_ZERO;
            break;
        case OP_div:
            if (b == 0) return a == 0 ? CAT_ZERO_OVER_ZERO : CAT_OVER_ZERO;
            break;
        case OP_div_scalar:
            if (s == 0) return a == 0 ? CAT_SCALAR_ZERO_OVER_ZERO : CAT_SCALAR_OVER_ZERO;
            break;
        case OP_exp: case OP_expm1:
            if (a > std::log(dtype_max(dtype))) return CAT_EXP_OVERFLOW;
            break;
        case OP_pow:
            if (a == 0 && s < 0) return CAT_POW_ZERO_NEGATIVE;
            if (a < 0 && s != std::floor(s)) return CAT_POW_NEGATIVE_FRACTION;
            break;
        case OP_pow_tensor:
            if (a == 0 && b < 0) return CAT_POW_ZERO_NEGATIVE;
            if (a < 0 && b != std::floor(b)) return CAT_POW_NEGATIVE_FRACTION;
            break;
        case OP_masked_fill:
            if (!std::isfinite(s)) return CAT_FILL;
            break;
        default:
            break;
    }
    return std::isinf(y) ? CAT_OVERFLOW : CAT_NONE;
}

struct CategoryCount {
    int64_t count = 0;
    double extreme = NAN;   // the lowest a (negatives) or the largest |a| / a (overflows) seen
};

std::string fill_template(const char* text, int64_t k, int64_t n, const std::string& a_name, const std::string& b_name,
                          double p, DType dtype, double extreme) {
    std::string s;
    for (const char* c = text; *c; ++c) {
        if (*c != '%' || !c[1]) {
            s += *c;
            continue;
        }
        switch (*++c) {
            case 'K': s += std::to_string(k); break;
            case 'N': s += std::to_string(n); break;
            case 'A': s += a_name; break;
            case 'B': s += b_name; break;
            case 'P': s += number_text(p); break;
            case 'L': s += number_text(std::log(dtype_max(dtype))); break;
            case 'T': s += dtype_name(dtype); break;
            case 'M': s += number_text(dtype_max(dtype)); break;
            case 'a': s += number_text(extreme); break;
            default: s += *c; break;
        }
    }
    return s;
}

// The reason an elementwise node made its non-finite elements: one sentence per category, "; "
// between. Empty when the op is not elementwise here (or a shape does not broadcast).
std::string elementwise_reason(const Walk& walk, const Node* node, int output, const std::string& op_prefix) {
    int arity = elementwise_inputs(node->op);
    if (arity == 0 || node->inputs.size() < arity) return "";
    const Value& out_value = node->outputs[output].value;
    if (value_freed(out_value)) return "";
    Value y = value_to_host(out_value);
    Value inputs[2];
    std::string names[2];
    for (int i = 0; i < arity; ++i) {
        const Edge& e = node->inputs[i];
        if (value_freed(e.value()) || !broadcasts_to(e.value().shape, y.shape)) return "";
        inputs[i] = value_to_host(e.value());
        names[i] = input_name(walk.producer(e), e);
    }
    CategoryCount counts[CAT_COUNT];
    std::vector<Category> order;
    const OpAttrs& attrs = node->attrs();
    int64_t n = y.numel();
    for (int64_t i = 0; i < n; ++i) {
        double yi = value_get(y, i);
        if (std::isfinite(yi)) continue;
        double a = value_get(inputs[0], broadcast_index(y.shape, inputs[0].shape, i));
        double b = arity > 1 ? value_get(inputs[1], broadcast_index(y.shape, inputs[1].shape, i)) : 0;
        if (node->op == OP_masked_fill && b == 0) continue;   // not filled here: a passed through
        Category c = classify(node->op, a, b, yi, attrs, y.dtype);
        if (c == CAT_NONE) continue;
        CategoryCount& cc = counts[c];
        if (cc.count++ == 0) order.push_back(c);
        bool lowest = c == CAT_LOG_NEGATIVE || c == CAT_LOG1P_BELOW || c == CAT_SQRT_NEGATIVE;
        double v = c == CAT_OVERFLOW ? std::max(std::fabs(a), arity > 1 ? std::fabs(b) : 0.0) : a;
        if (std::isnan(cc.extreme) || (lowest ? v < cc.extreme : v > cc.extreme)) cc.extreme = v;
    }
    std::string s;
    for (Category c : order)
        s += (s.empty() ? "" : "; ") + op_prefix +
             fill_template(CATEGORY_TEXT[c], counts[c].count, n, names[0], names[1], attrs.scalar, y.dtype, counts[c].extreme);
    return s;
}

// The largest finite magnitude among a node's inputs.
double inputs_absmax(const Node* node) {
    double m = 0;
    for (const Edge& e : node->inputs)
        if (!value_freed(e.value()) && dtype_is_float(e.value().dtype)) m = std::max(m, tensor_stats(e.value()).absmax);
    return m;
}

// Why `node` (all inputs finite) made the NaN or Inf of output `output`.
std::string op_reason(const Walk& walk, Node* node, int output, const BadCount& bad) {
    std::string s = elementwise_reason(walk, node, output, "");
    if (!s.empty()) return s;
    DType dtype = node->outputs[output].value.dtype;
    if (bad.nan == 0)
        return "the result overflowed " + std::string(dtype_name(dtype)) + " (beyond ±" + number_text(dtype_max(dtype)) +
               ") at " + std::to_string(bad.pos_inf + bad.neg_inf) + " of " + std::to_string(bad.count) +
               " elements (the inputs' largest magnitude " + number_text(inputs_absmax(node)) + ")";
    return std::string(node->name()) + " made " + bad_text(bad) + " (of " + std::to_string(bad.count) +
           " elements) from finite inputs" +
           (bad.pos_inf + bad.neg_inf ? "" : " (an overflow inside it, Inf - Inf, is one way: the inputs' largest magnitude " +
                                                 number_text(inputs_absmax(node)) + ")");
}

// How many elements of input `input` of `node` are 0 (or equal `value`); count in *n.
int64_t count_equal(const Node* node, int input, double value, int64_t* n) {
    *n = 0;
    if (input >= node->inputs.size()) return 0;
    const Value& v = node->inputs[input].value();
    if (value_freed(v)) return 0;
    Value host = value_to_host(v);
    *n = host.numel();
    int64_t k = 0;
    for (int64_t i = 0; i < *n; ++i) k += value_get(host, i) == value;
    return k;
}

// Why the gradient rule of the forward node `forward` made NaN or Inf from finite values: where
// its derivative is infinite (sqrt at 0, ...). Empty when nothing in its inputs explains it.
std::string gradient_reason(const Walk& walk, const Node* forward) {
    auto zeros_of = [&](int input, double at, const std::string& what) -> std::string {
        int64_t n = 0, k = count_equal(forward, input, at, &n);
        if (k == 0) return "";
        std::string name = input_name(walk.producer(forward->inputs[input]), forward->inputs[input]);
        return what + ": " + std::to_string(k) + " of " + std::to_string(n) + " elements of " + name + " were " + number_text(at);
    };
    double p = forward->attrs().scalar;
    switch (forward->op) {
        case OP_sqrt: return zeros_of(0, 0, "sqrt's gradient grad / (2 sqrt(x)) is infinite where x = 0");
        case OP_rsqrt: return zeros_of(0, 0, "rsqrt's gradient -grad / (2 x^(3/2)) is infinite where x = 0");
        case OP_log: return zeros_of(0, 0, "log's gradient grad / x is infinite where x = 0");
        case OP_log1p: return zeros_of(0, -1, "log1p's gradient grad / (1 + x) is infinite where x = -1");
        case OP_reciprocal: return zeros_of(0, 0, "reciprocal's gradient -grad / x^2 is infinite where x = 0");
        case OP_div: return zeros_of(1, 0, "div's gradient grad / b is infinite where b = 0");
        case OP_pow:
            if (p > 0 && p < 1)
                return zeros_of(0, 0, "pow's gradient p x^(p-1) is infinite where x = 0 for a power below 1 (p = " + number_text(p) + ")");
            return "";
        case OP_pow_tensor: {
            std::string s = zeros_of(0, 0, "pow's gradient b a^(b-1) is infinite where a = 0 for a power below 1, and its "
                                           "gradient for b reads log(a)");
            return s;
        }
        default: return "";
    }
}

// The rule's lines of the forward node, for people: "dx = grad / (2 y)".
std::string rule_text(const Node* forward) {
    std::string s;
    for (int i = 0; i < forward->inputs.size(); ++i) {
        const char* rule = op_grad_rule(forward->op, i, &forward->attrs());
        if (!rule) continue;
        std::string line = rule;
        if (line.rfind("no gradient", 0) == 0) continue;
        if (s.find(line) != std::string::npos) continue;
        s += (s.empty() ? "" : "; ") + line;
    }
    return s;
}

// ============================================================================================
// [SECTION] explain

struct InputFacts {
    int64_t id = 0;
    std::string name, shape, dtype;
    TensorStats stats;
    bool freed = false, changed = false;   // values freed; written in place since the node read them
};

struct Explanation {
    bool bad = false;
    std::string target;          // "loss (#9 sum)"
    BadCount target_bad;
    OriginKind kind = ORIGIN_OP;
    Ref<Node> node;              // the origin node (GONE, FREED: where the trail ends)
    int output = 0;
    std::string reason, because, rule;
    Ref<Node> group;             // a backward origin: the forward node whose rule made it
    std::vector<InputFacts> inputs;
    BadCount origin_bad;
    std::string then;            // where Inf became NaN on the way, when it did
    std::vector<int64_t> path;   // origin ... start
    std::vector<std::string> also;
    std::vector<int64_t> suspects;   // FREED: forward nodes whose gradient rule is infinite at their inputs
    std::string text;
};

std::string stats_text(const InputFacts& f) {
    if (f.freed) return std::string("(") + VALUE_FREED_TEXT + ")";
    const TensorStats& s = f.stats;
    std::string t = f.shape + " " + f.dtype + "  ";
    if (s.finite == 0) t += "no finite elements";
    else t += "min " + number_text(s.min) + "  max " + number_text(s.max) + "  mean " + number_text(s.mean);
    t += "  zeros " + std::to_string(s.zeros) + "  negative " + std::to_string(s.negatives) + "  NaN " +
         std::to_string(s.nan) + "  Inf " + std::to_string(s.inf());
    if (f.changed) t += "  (written in place since: these are its values now)";
    return t;
}

std::vector<InputFacts> input_facts(const Walk& walk, const Node* node) {
    std::vector<InputFacts> facts;
    for (int i = 0; i < node->inputs.size(); ++i) {
        const Edge& e = node->inputs[i];
        InputFacts f;
        f.id = e.id;
        Node* p = walk.producer(e);
        f.name = p ? node_text(p, e.output) : "#" + std::to_string(e.id);
        f.shape = e.value().shape.str();
        f.dtype = dtype_name(e.value().dtype);
        f.freed = value_freed(e.value());
        if (!f.freed) {
            f.stats = tensor_stats(e.value());
            f.changed = e.value().storage->version != e.version;
        }
        facts.push_back(f);
    }
    return facts;
}

// How an op that is not elementwise turns Inf into NaN, for the `then` line.
std::string inf_to_nan_hint(OpId op) {
    switch (op) {
        case OP_softmax: case OP_log_softmax: case OP_cross_entropy:
            return " (a row holding Inf: it subtracts the row's largest value, and Inf - Inf is NaN)";
        case OP_sum: case OP_mean: case OP_cumsum: case OP_sum_to:
            return " (+Inf + -Inf is NaN)";
        case OP_mm: case OP_bmm: case OP_conv2d:
            return " (inside the products' sums: 0 * Inf or +Inf + -Inf is NaN)";
        default:
            return "";
    }
}

// Where Inf became NaN on the path (origin first), when the origin made no NaN: the first node
// on it whose output has NaN and whose inputs have none.
std::string became_nan(Walk& walk, const std::vector<int64_t>& path, const BadCount& origin_bad) {
    if (origin_bad.nan > 0) return "";
    for (size_t k = 1; k < path.size(); ++k) {
        Node* n = walk.find(path[k]);
        if (!n) return "";
        int output = 0;
        for (int o = 0; o < n->outputs.size(); ++o)
            if (walk.output_bad(n, o).nan > 0) output = o;
        if (walk.output_bad(n, output).nan == 0) continue;
        bool nan_in = false;
        for (int i = 0; i < n->inputs.size(); ++i) nan_in = nan_in || walk.input_bad(n, i).nan > 0;
        if (nan_in) return "";
        std::string how = elementwise_reason(walk, n, output, "");
        size_t cut = how.find("computed from NaN or Inf");   // only the sentences that say how NaN came
        if (cut != std::string::npos) how = how.substr(0, cut == 0 ? 0 : cut - 2);
        if (how.empty()) how = std::to_string(walk.output_bad(n, output).nan) + " NaN from inputs holding Inf" + inf_to_nan_hint(n->op);
        std::string loc = location_text(n);
        std::string where = node_text(n, output);
        if (n->phase == PHASE_BACKWARD) {
            Node* group = walk.find(n->group);
            where += ", in the gradient of " + (group ? node_text(group) : "#" + std::to_string(n->group));
        }
        return "the Inf became NaN at " + where + (loc.empty() ? "" : "  (" + loc + ")") + ": " + how;
    }
    return "";
}

std::string path_text(Walk& walk, const std::vector<int64_t>& path) {
    std::vector<std::string> parts;
    for (int64_t id : path) {
        Node* n = walk.find(id);
        parts.push_back(n ? node_text(n) : "#" + std::to_string(id));
    }
    const size_t most = 8;
    if (parts.size() > most) {
        size_t skipped = parts.size() - 6;
        std::vector<std::string> shown(parts.begin(), parts.begin() + 3);
        shown.push_back("(" + std::to_string(skipped) + " more)");
        shown.insert(shown.end(), parts.end() - 3, parts.end());
        parts = shown;
    }
    std::string s;
    for (const std::string& p : parts) s += (s.empty() ? "" : " -> ") + p;
    return s;
}

void add_line(std::string& s, const char* label, const std::string& text) {
    char head[16];
    snprintf(head, sizeof head, "  %-10s", label);
    s += head + text + "\n";
}

// The origin being explained, as each of its lines needs it.
struct OriginView {
    const Origin& origin;
    Node* node;            // origin.node
    bool backward;         // a node of a backward pass
    Node* group;           // backward: the forward node whose rule made it (null when gone)
    std::string at;        // "  (file:line  text)", or ""
};

// "backward #7 mul, in the gradient of p (#3 sqrt)": the origin as its `origin` line heads it.
std::string origin_head(const OriginView& v) {
    std::string head = std::string(v.backward ? "backward " : "forward ") + node_text(v.node, v.origin.output);
    if (v.backward) head += ", in the gradient of " + (v.group ? node_text(v.group) : "#" + std::to_string(v.node->group));
    return head;
}

// Fill what the walk found about the first origin: its path to the start (origin first), its
// counts, its inputs' facts, and up to three other origins (`also`). Returns how many other
// origins there are in all (gone and freed ones left out).
size_t explanation_fill_origin(Explanation& e, Walk& walk, const Origin& o) {
    e.kind = o.kind;
    e.node = o.node;
    e.output = o.output;
    Node* n = o.node.get();
    for (int64_t id = n->id;;) {   // the path, origin first
        e.path.push_back(id);
        auto it = walk.reached_from.find(id);
        if (it == walk.reached_from.end()) break;
        id = it->second;
    }
    e.origin_bad = walk.output_bad(n, o.output);
    e.inputs = input_facts(walk, n);
    for (size_t i = 1; i < walk.origins.size() && e.also.size() < 3; ++i) {
        const Origin& other = walk.origins[i];
        if (other.kind == ORIGIN_GONE || other.kind == ORIGIN_FREED) continue;
        e.also.push_back(node_text(other.node.get(), other.output) +
                         (other.node->where.file >= 0 ? " (" + source_loc_str(other.node->where) + ")" : ""));
    }
    size_t more_origins = 0;
    for (size_t i = 1; i < walk.origins.size(); ++i)
        more_origins += walk.origins[i].kind != ORIGIN_GONE && walk.origins[i].kind != ORIGIN_FREED;
    return more_origins;
}

// ORIGIN_OP: the op made NaN or Inf from finite inputs; for a backward op, the forward node's
// gradient rule and why it did.
void explain_op_origin(Explanation& e, Walk& walk, const OriginView& v, std::string& s) {
    s += ". It first went bad at:\n";
    add_line(s, "origin", origin_head(v) + v.at);
    e.reason = op_reason(walk, v.node, v.origin.output, e.origin_bad);
    add_line(s, "why", e.reason);
    if (!v.group) return;
    e.rule = std::string(v.group->name()) + ": " + rule_text(v.group);
    add_line(s, "rule", e.rule);
    e.because = gradient_reason(walk, v.group);
    if (e.because.empty()) e.because = "the rule made them from a finite incoming gradient and finite saved values";
    add_line(s, "because", e.because);
}

// ORIGIN_LEAF, ORIGIN_WRITTEN: a node that holds NaN or Inf no op on the tape made: it was made
// so, or written in place after it ran (by which op, when one is still on the tape).
void explain_leaf_or_written_origin(Explanation& e, Walk& walk, const OriginView& v, std::string& s) {
    const Origin& o = v.origin;
    Node* n = v.node;
    s += ". It first went bad at:\n";
    bool parameter = node_is_parameter(n);
    std::string kind = parameter ? ", a parameter (a leaf)" : o.kind == ORIGIN_LEAF || n->inputs.size() == 0 ? ", a leaf" : "";
    add_line(s, "origin", node_text(n, o.output) + kind + v.at);
    if (o.kind == ORIGIN_LEAF) {
        std::string made = n->op == OP_tensor ? "torch.tensor's values, a file loaded, or a frozen call's result: :break if nan stops inside the call"
                           : n->op == OP_full ? "torch.full with the value " + number_text(n->attrs().scalar)
                                              : std::string("its op, ") + n->name();
        e.reason = "it holds " + bad_text(e.origin_bad) + ", and no op on the tape made them: it was made so (" + made + ")";
    } else {
        const Output& out = n->outputs[o.output];
        uint32_t writes = out.value.storage->version - out.version;
        Node* writer = walk.in_place_writer(n, o.output);
        e.reason = "it holds " + bad_text(e.origin_bad) + ", written into it in place after it was made (" +
                   std::to_string(writes) + (writes == 1 ? " write" : " writes") + " since)";
        if (writer) {
            std::string wloc = location_text(writer);
            e.reason += ", the last by " + node_text(writer) + (wloc.empty() ? "" : "  (" + wloc + ")");
        } else {
            e.reason += ", by no op still on the tape: an assignment (x[i] = v), copy_ or fill_, or an optimizer "
                        "step under no_grad";
        }
    }
    add_line(s, "why", e.reason);
}

// ORIGIN_GONE: the bad values came in from a node nothing holds any more.
void explain_gone_origin(Explanation& e, const OriginView& v, std::string& s) {
    const Edge& edge = v.node->inputs[v.origin.input];
    s += ". The trail ends at a node that is gone:\n";
    add_line(s, "origin", "unknown: it came into " + node_text(v.node) + " (input " + std::to_string(v.origin.input + 1) +
                              ") from #" + std::to_string(edge.id) + v.at);
    e.reason = "the node that made it is gone: nothing holds #" + std::to_string(edge.id) + " any more " +
               (v.backward ? std::string("(a backward pass keeps its nodes only under tapedeck -i, "
                                         "torch.autograd.keep_backward_graph(true) or a breakpoint: :break if nan "
                                         "stops where it first appears)")
                           : std::string("(a graph that needs no gradient does not keep its nodes; with "
                                         "requires_grad, or stopped by :break if nan, they live)"));
    add_line(s, "why", e.reason);
}

// ORIGIN_FREED: an input's values were freed; what can still be said is which gradient rules
// behind it are infinite at their inputs' values (the suspects, up to three).
void explain_freed_origin(Explanation& e, Walk& walk, const OriginView& v, std::string& s) {
    s += ". The trail ends at values that were freed:\n";
    add_line(s, "origin", "unknown: input " + std::to_string(v.origin.input + 1) + " of " + origin_head(v) + v.at);
    e.reason = "its values were freed after the backward pass used them; set :break if nan (or open the viewer) "
               "and run backward again to stop where it first appears, with the values kept";
    add_line(s, "why", e.reason);
    int shown = 0;
    for (Node* suspect : walk.groups_behind(v.node)) {
        std::string because = gradient_reason(walk, suspect);
        if (because.empty() || shown == 3) continue;
        std::string sloc = location_text(suspect);
        add_line(s, shown++ ? "" : "suspect", node_text(suspect) + (sloc.empty() ? "" : "  (" + sloc + ")") + ": " + because);
        e.suspects.push_back(suspect->id);
    }
}

// The lines after the origin's: its inputs and output (when it has values to show), where Inf
// became NaN, the path to the start, and the other origins.
void explain_after_origin(Explanation& e, Walk& walk, const OriginView& v, size_t more_origins, std::string& s) {
    const Origin& o = v.origin;
    if (o.kind != ORIGIN_GONE && o.kind != ORIGIN_FREED) {
        for (size_t i = 0; i < e.inputs.size(); ++i) {
            std::string label = e.inputs.size() == 1 ? "input" : "input " + std::to_string(i + 1);
            add_line(s, label.c_str(), e.inputs[i].name + " " + stats_text(e.inputs[i]));
        }
        const Value& out = v.node->outputs[o.output].value;
        add_line(s, "output", out.shape.str() + " " + dtype_name(out.dtype) + ": " + bad_text(e.origin_bad) + " of " +
                                  std::to_string(e.origin_bad.count));
    }
    e.then = became_nan(walk, e.path, e.origin_bad);
    if (!e.then.empty()) add_line(s, "then", e.then);
    if (e.path.size() > 1) add_line(s, "path", path_text(walk, e.path));
    if (more_origins > 0) {
        std::string also;
        for (const std::string& a : e.also) also += (also.empty() ? "" : ", ") + a;
        if (more_origins > e.also.size()) also += ", and " + std::to_string(more_origins - e.also.size()) + " more";
        add_line(s, "also", std::to_string(more_origins) + " more made NaN or Inf from finite values later: " + also);
    }
}

// Explain the NaN/Inf of output `output` of `start`; `what` names it ("loss", "out"). When it has
// none, e.bad is false and e.text says so.
Explanation explain(Node* start, int output, const std::string& what) {
    Explanation e;
    Walk walk;
    e.target = what;
    e.target_bad = walk.output_bad(start, output);
    if (e.target_bad.freed) {
        e.text = what + ": " + VALUE_FREED_TEXT + "\n";
        return e;
    }
    if (!e.target_bad.any()) {
        e.text = what + " has no NaN or Inf: nothing to explain\n";
        return e;
    }
    e.bad = true;
    walk.run(start, output);
    if (walk.origins.empty()) {   // cannot happen (a bad node is an origin or leads to one); said rather than assumed
        e.bad = false;
        e.text = what + " has " + bad_text(e.target_bad) + ", but no node it was computed from explains it\n";
        return e;
    }
    const Origin& o = walk.origins.front();
    size_t more_origins = explanation_fill_origin(e, walk, o);
    Node* n = o.node.get();
    std::string loc = location_text(n);
    bool backward = n->phase == PHASE_BACKWARD;
    OriginView view{o, n, backward, backward ? walk.find(n->group) : nullptr, loc.empty() ? "" : "  (" + loc + ")"};
    if (view.group) e.group = Ref<Node>(view.group);

    std::string s = what + " has " + bad_text(e.target_bad) + " (of " + elements_text(e.target_bad.count) + ")";
    switch (o.kind) {
        case ORIGIN_OP: explain_op_origin(e, walk, view, s); break;
        case ORIGIN_LEAF:
        case ORIGIN_WRITTEN: explain_leaf_or_written_origin(e, walk, view, s); break;
        case ORIGIN_GONE: explain_gone_origin(e, view, s); break;
        case ORIGIN_FREED: explain_freed_origin(e, walk, view, s); break;
    }
    explain_after_origin(e, walk, view, more_origins, s);
    e.text = s;
    return e;
}

// ============================================================================================
// [SECTION] commands

void fail(const std::string& message) {
    fflush(stdout);
    fprintf(stderr, "%s\n", message.c_str());
    fflush(stderr);
}

struct Target {
    td::Tensor tensor;
    std::string what;   // how the explanation names it
};

// The first tensor holding NaN or Inf among `candidates` (what a stop shows), else none.
bool first_bad(const std::vector<Target>& candidates, Target& found) {
    for (const Target& t : candidates) {
        if (!t.tensor.defined() || value_freed(t.tensor.value())) continue;
        if (bad_count(t.tensor.value()).any()) {
            found = t;
            return true;
        }
    }
    return false;
}

// "loss (#9 sum)", "score (#4 mean, a local of why_div.lua:7)".
std::string tensor_what(const std::string& name, const td::Tensor& t, const std::string& where = "") {
    return name + " (#" + std::to_string(t.id()) + " " + t.node->shown_op() + (where.empty() ? "" : ", " + where) + ")";
}

// The tensors with NaN or Inf among the variables of frame `frame` of the stop; the newest (the
// highest node id: what was computed last from them) goes to `found`. False when none has.
bool bad_in_frame(lua_State* L, const DebugStop& stop, int frame, Target& found) {
    DebugStop view;
    view.kind = stop.kind;
    view.thread = stop.thread;
    view.frames = stop.frames;
    view.frame = frame;
    view.snapshot_ref = stop.snapshot_ref;
    int top = lua_gettop(L);
    if (!push_frame_variables(L, view)) return false;
    bool any = false;
    const DebugFrame& f = stop.frames[frame];
    for (const char* kind : {"locals", "upvalues"}) {
        lua_getfield(L, -1, kind);
        for (lua_Integer i = 1; lua_rawgeti(L, -1, i) == LUA_TTABLE; ++i) {
            lua_rawgeti(L, -1, 1);
            lua_rawgeti(L, -2, 2);
            td::Tensor* t = tapedeck_test_tensor(L, -1);
            if (t && !value_freed(t->value()) && bad_count(t->value()).any() && (!any || t->id() > found.tensor.id())) {
                found.tensor = *t;
                found.what = tensor_what(lua_tostring(L, -2), *t, std::string(kind[0] == 'l' ? "a local" : "an upvalue") +
                                                                       " of " + f.short_src + ":" + std::to_string(f.line));
                any = true;
            }
            lua_pop(L, 3);
        }
        lua_pop(L, 2);
    }
    lua_settop(L, top);
    return any;
}

// The newest tensor with NaN or Inf among the globals (scripts written as lectures keep theirs
// there). False when none has.
bool bad_in_globals(lua_State* L, Target& found) {
    bool any = false;
    lua_pushglobaltable(L);
    lua_pushnil(L);
    while (lua_next(L, -2)) {
        td::Tensor* t = lua_type(L, -2) == LUA_TSTRING ? tapedeck_test_tensor(L, -1) : nullptr;
        if (t && !value_freed(t->value()) && bad_count(t->value()).any() && (!any || t->id() > found.tensor.id())) {
            found.tensor = *t;
            found.what = tensor_what(lua_tostring(L, -2), *t, "a global");
            any = true;
        }
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
    return any;
}

// What :why explains at the stop: the stopped node's result (or its inputs), a backward group's
// gradients, else the newest tensor with NaN or Inf among the selected frame's variables (then the
// other frames', then the globals). False (message printed) when there is none.
bool stop_target(lua_State* L, const DebugStop& stop, Target& found) {
    std::vector<Target> candidates;
    Node* node = stop.node.get();
    if (stop.kind == STOP_GROUP && stop.pass) {
        const BackwardGroup& group = stop.pass->group;
        for (int i = 0; i < node->inputs.size(); ++i)
            if (group.grad_inputs && group.grad_inputs[i].defined())
                candidates.push_back({group.grad_inputs[i], "grad_input[" + std::to_string(i + 1) + "] (#" +
                                                                std::to_string(group.grad_inputs[i].id()) + " " +
                                                                group.grad_inputs[i].node->name() + ")"});
        for (int i = 0; i < node->outputs.size(); ++i)
            if (group.grad_outputs && group.grad_outputs[i].defined())
                candidates.push_back({group.grad_outputs[i], "grad_output (#" + std::to_string(group.grad_outputs[i].id()) +
                                                                 " " + group.grad_outputs[i].node->name() + ")"});
    }
    if (node) {
        for (int i = 0; i < node->outputs.size(); ++i)
            candidates.push_back({td::Tensor(node, i), (node->outputs.size() > 1 ? "outputs[" + std::to_string(i + 1) + "]" : std::string("out")) +
                                                           " (#" + std::to_string(node->id) + " " + node->name() + ")"});
        Walk walk;
        for (int i = 0; i < node->inputs.size(); ++i) {
            Node* p = walk.producer(node->inputs[i]);
            if (p) candidates.push_back({td::Tensor(p, node->inputs[i].output), "inputs[" + std::to_string(i + 1) + "] (" + node_text(p, node->inputs[i].output) + ")"});
        }
    }
    if (first_bad(candidates, found)) return true;
    if (stop.frame >= 0) {
        if (bad_in_frame(L, stop, stop.frame, found)) return true;
        for (int f = 0; f < static_cast<int>(stop.frames.size()); ++f)
            if (f != stop.frame && stop.frames[f].what != "C" && bad_in_frame(L, stop, f, found)) return true;
    }
    if (bad_in_globals(L, found)) return true;
    if (node) fail(":why: nothing here holds a NaN or Inf (the stop's node, its inputs and gradients, the frames' variables, the globals); :why EXPR explains a tensor");
    else fail(":why: no variable of the stopped frames and no global holds a NaN or Inf; :why EXPR explains a tensor");
    return false;
}

}  // namespace

}  // namespace dbg

using namespace dbg;

bool debugger_cmd_why(lua_State* L, const std::string& args) {
    Target target;
    if (!args.empty()) {
        if (!g.front.eval(L, args)) return true;
        td::Tensor* t = tapedeck_test_tensor(L, -1);
        if (!t) {
            fail(":why: '" + args + "' is a " + luaL_typename(L, -1) + ", not a tensor");
            lua_pop(L, 1);
            return true;
        }
        target.tensor = *t;
        lua_pop(L, 1);
        tapedeck_name_tensors(g.stop ? g.stop->thread : L);
        target.what = tensor_what(args, target.tensor);
    } else {
        const DebugStop* stop = debugger_stop();
        if (!stop) {
            fail(":why: not at a stop; :why EXPR explains a tensor's NaN or Inf (as in :why loss)");
            return true;
        }
        tapedeck_name_tensors(stop->thread);
        if (!stop_target(L, *stop, target)) return true;
    }
    Explanation e = explain(target.tensor.node.get(), target.tensor.output, target.what);
    fputs(e.text.c_str(), stdout);
    fflush(stdout);
    return true;
}

using tdlua::set_integer;
using tdlua::set_number;
using tdlua::set_string;

int debugger_why_lua(lua_State* L) {
    td::Tensor* t = tapedeck_test_tensor(L, 1);
    if (!t) return luaL_error(L, "dbg.why: expected a tensor, got a %s", luaL_typename(L, 1));
    td::Tensor tensor = *t;
    tapedeck_name_tensors(g.stop ? g.stop->thread : L);
    Explanation e = explain(tensor.node.get(), tensor.output, node_text(tensor.node.get(), tensor.output));
    if (!e.bad) {
        lua_pushnil(L);
        std::string text = e.text;
        if (!text.empty() && text.back() == '\n') text.pop_back();
        lua_pushstring(L, text.c_str());
        return 2;
    }
    Node* n = e.node.get();
    lua_newtable(L);
    set_integer(L, "node", n->id);
    set_string(L, "op", n->name());
    set_string(L, "kind", origin_kind_name(e.kind));
    set_string(L, "phase", n->phase == PHASE_BACKWARD ? "backward" : "forward");
    set_string(L, "name", node_label(n, e.output));
    set_string(L, "file", n->where.file >= 0 ? source_file_name(n->where.file) : "");
    set_integer(L, "line", n->where.line);
    set_string(L, "reason", e.reason);
    if (e.group) {
        set_integer(L, "group", e.group->id);
        set_string(L, "group_op", e.group->name());
        set_string(L, "rule", e.rule);
        set_string(L, "because", e.because);
    }
    set_integer(L, "nan", e.origin_bad.nan);
    set_integer(L, "inf", e.origin_bad.pos_inf + e.origin_bad.neg_inf);
    if (!e.then.empty()) set_string(L, "then", e.then);
    lua_createtable(L, static_cast<int>(e.inputs.size()), 0);
    for (size_t i = 0; i < e.inputs.size(); ++i) {
        const InputFacts& f = e.inputs[i];
        lua_createtable(L, 0, 10);
        set_integer(L, "id", f.id);
        set_string(L, "name", f.name);
        if (!f.freed) {
            set_integer(L, "count", f.stats.count);
            set_number(L, "min", f.stats.min);
            set_number(L, "max", f.stats.max);
            set_number(L, "mean", f.stats.mean);
            set_integer(L, "zeros", f.stats.zeros);
            set_integer(L, "negatives", f.stats.negatives);
            set_integer(L, "nan", f.stats.nan);
            set_integer(L, "inf", f.stats.inf());
        }
        lua_rawseti(L, -2, static_cast<lua_Integer>(i + 1));
    }
    lua_setfield(L, -2, "inputs");
    lua_createtable(L, static_cast<int>(e.path.size()), 0);
    for (size_t i = 0; i < e.path.size(); ++i) {
        lua_pushinteger(L, e.path[i]);
        lua_rawseti(L, -2, static_cast<lua_Integer>(i + 1));
    }
    lua_setfield(L, -2, "path");
    if (!e.suspects.empty()) {
        lua_createtable(L, static_cast<int>(e.suspects.size()), 0);
        for (size_t i = 0; i < e.suspects.size(); ++i) {
            lua_pushinteger(L, e.suspects[i]);
            lua_rawseti(L, -2, static_cast<lua_Integer>(i + 1));
        }
        lua_setfield(L, -2, "suspects");
    }
    set_string(L, "text", e.text);
    return 1;
}
