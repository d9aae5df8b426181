// format.cpp: PyTorch-style tensor printing, and the tape as a table.
#include "format.h"
#include "node_names.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>

namespace td {

namespace {

constexpr int64_t SUMMARY_THRESHOLD = 1000;   // print "..." beyond this many elements
constexpr int64_t EDGE_ITEMS = 3;             // shown at each end of a summarised dim
constexpr int LINE_WIDTH = 80;

// How every element of one tensor is written, chosen from all of its values (as PyTorch does).
struct NumberStyle {
    bool is_float = true;
    bool whole = false;        // every finite value is a whole number: "300."
    bool scientific = false;   // "1.2346e+05"
    int width = 1;

    // Element i of `value`, a host value (int64 elements are read as they are: a double cannot
    // hold them all).
    std::string format(const Value& value, int64_t i) const {
        char buffer[64];
        if (!is_float) {
            const int64_t* elements = static_cast<const int64_t*>(value.storage->data);
            snprintf(buffer, sizeof buffer, "%lld", static_cast<long long>(elements[value_storage_index(value, i)]));
            return buffer;
        }
        double v = value_get(value, i);
        if (std::isnan(v)) snprintf(buffer, sizeof buffer, "nan");
        else if (std::isinf(v)) snprintf(buffer, sizeof buffer, v > 0 ? "inf" : "-inf");
        else if (scientific) snprintf(buffer, sizeof buffer, "%.4e", v);
        else if (whole) snprintf(buffer, sizeof buffer, "%.0f.", v);
        else snprintf(buffer, sizeof buffer, "%.4f", v);
        return buffer;
    }
};

// The indices printed along a dim of size n: all, or the first and last EDGE_ITEMS.
std::vector<int64_t> shown_indices(int64_t n, bool summarize) {
    std::vector<int64_t> idx;
    if (!summarize || n <= 2 * EDGE_ITEMS) {
        for (int64_t i = 0; i < n; ++i) idx.push_back(i);
    } else {
        for (int64_t i = 0; i < EDGE_ITEMS; ++i) idx.push_back(i);
        idx.push_back(-1);   // the "..." marker
        for (int64_t i = n - EDGE_ITEMS; i < n; ++i) idx.push_back(i);
    }
    return idx;
}

// The indices of the elements that will be printed (for choosing the style).
void collect_shown(const Value& v, int dim, int64_t offset, bool summarize, std::vector<int64_t>& out) {
    if (dim == v.shape.ndim) {
        out.push_back(offset);
        return;
    }
    int64_t stride = 1;
    for (int i = dim + 1; i < v.shape.ndim; ++i) stride *= v.shape.dims[i];
    for (int64_t i : shown_indices(v.shape.dims[dim], summarize))
        if (i >= 0) collect_shown(v, dim + 1, offset + i * stride, summarize, out);
}

NumberStyle choose_style(const Value& v, bool summarize) {
    NumberStyle style;
    style.is_float = dtype_is_float(v.dtype);
    std::vector<int64_t> shown;
    collect_shown(v, 0, 0, summarize, shown);
    if (style.is_float) {
        double lo = INFINITY, hi = 0;
        bool whole = true, any = false;
        for (int64_t i : shown) {
            double x = value_get(v, i);
            if (!std::isfinite(x) || x == 0) continue;
            any = true;
            lo = std::min(lo, std::fabs(x));
            hi = std::max(hi, std::fabs(x));
            whole = whole && std::ceil(x) == x;
        }
        if (any) {
            style.whole = whole;
            if (whole) style.scientific = hi / lo > 1000 || hi > 1e8;
            else style.scientific = hi / lo > 1000 || hi > 1e8 || lo < 1e-4;
        } else {
            style.whole = true;
        }
    }
    for (int64_t i : shown) style.width = std::max(style.width, static_cast<int>(style.format(v, i).size()));
    return style;
}

std::string padded(const std::string& s, int width) {
    return std::string(width > static_cast<int>(s.size()) ? width - s.size() : 0, ' ') + s;
}

void format_dim(const Value& v, const NumberStyle& style, int dim, int64_t offset, int indent, bool summarize,
                std::string& out) {
    const Shape& s = v.shape;
    int64_t stride = 1;
    for (int i = dim + 1; i < s.ndim; ++i) stride *= s.dims[i];
    std::vector<int64_t> idx = shown_indices(s.dims[dim], summarize);
    out += '[';
    if (dim == s.ndim - 1) {   // innermost: numbers, wrapped at the line width
        int per_line = std::max(1, (LINE_WIDTH - indent - 1) / (style.width + 2));
        for (size_t k = 0; k < idx.size(); ++k) {
            if (k > 0) {
                out += ',';
                if (k % per_line == 0) out += "\n" + std::string(indent + 1, ' ');
                else out += ' ';
            }
            out += idx[k] < 0 ? "..." : padded(style.format(v, offset + idx[k] * stride), style.width);
        }
    } else {
        int blank_lines = s.ndim - dim - 2;   // as PyTorch: more blank lines between higher dims
        for (size_t k = 0; k < idx.size(); ++k) {
            if (k > 0) {
                out += ",";
                out += std::string(1 + blank_lines, '\n');
                out += std::string(indent + 1, ' ');
            }
            if (idx[k] < 0) out += "...";
            else format_dim(v, style, dim + 1, offset + idx[k] * stride, indent + 1, summarize, out);
        }
    }
    out += ']';
}

}  // namespace

std::string value_format(const Value& value, int indent) {
    if (value_freed(value)) return std::string("(") + VALUE_FREED_TEXT + ")";
    if (value.numel() == 0) return "[]";
    Value v = value_to_host(value);   // the elements below are read on the host
    bool summarize = v.numel() > SUMMARY_THRESHOLD;
    NumberStyle style = choose_style(v, summarize);
    if (v.shape.ndim == 0) return style.format(v, 0);
    std::string out;
    format_dim(v, style, 0, 0, indent, summarize, out);
    return out;
}

std::string tensor_format(const Tensor& t) {
    const Value& v = t.value();
    std::string s = "tensor(";
    s += value_format(v, 7);
    if (v.shape.ndim > 0) {
        s += ", size=";
        s += v.shape.str();
    }
    if (!value_freed(v) && v.device() != DEVICE_CPU) {   // as PyTorch: the device before the dtype
        s += ", device=";
        s += device_name(v.device());
    }
    if (v.dtype != DTYPE_F32) {
        s += ", dtype=";
        s += dtype_name(v.dtype);
    }
    if (t.node->tracks_grad) {
        s += ", grad_fn=<";
        s += t.node->name();
        s += " #";
        s += std::to_string(t.node->id);
        s += '>';
    } else if (t.requires_grad()) {
        s += ", requires_grad=true";
    }
    s += ')';
    return s;
}

NodeList tape_nodes() {
    NodeList nodes;
    for (Node* n = tape_first(); n; n = n->tape_next) nodes.push_back(n);
    return nodes;
}

// Columns on a terminal: UTF-8 continuation bytes ("ᵀ" is three bytes) take no column of their own.
static size_t display_width(const std::string& s) {
    size_t width = 0;
    for (unsigned char ch : s) width += (ch & 0xC0) != 0x80;
    return width;
}

std::string graph_format_table(const NodeList& nodes, const std::vector<int64_t>& marked) {
    // One row of cells per node; each column is as wide as its widest cell (at least as wide as
    // before), so a long op ("expand(shape=[2,2])") or phase ("backward of #12") keeps the columns.
    std::vector<std::array<std::string, 7>> rows = {{"id", "op", "name", "phase", "inputs", "shape", "where"}};
    for (const Ref<Node>& n : nodes) {
        std::string inputs;
        for (const Edge& e : n->inputs) {
            if (!inputs.empty()) inputs += ",";
            inputs += "#" + std::to_string(e.id);
        }
        std::string shapes;
        for (const Output& o : n->outputs) {
            if (!shapes.empty()) shapes += " ";
            shapes += o.value.shape.str();
        }
        std::string phase = n->phase == PHASE_FORWARD ? "forward" : "backward";
        if (n->phase == PHASE_BACKWARD) phase += " of #" + std::to_string(n->group);
        if (n->edited & EDITED_OUTPUT) phase += " (edited)";
        if (n->edited & EDITED_GRAD) phase += " (grad edited)";
        std::string op = n->shown_op();
        std::string attrs = op == n->name() ? op_describe_attrs(n->op, n->attrs()) : "";   // none for "parameter"
        if (!attrs.empty()) op += "(" + attrs + ")";
        std::string id = std::to_string(n->id);
        if (std::find(marked.begin(), marked.end(), n->id) != marked.end()) id = "=> " + id;
        std::string name = node_label(n.get());
        rows.push_back({id, op, name[0] == '#' ? "" : name, phase, inputs, shapes, source_loc_str(n->where)});
    }
    size_t width[7] = {6, 18, 8, 9, 16, 14, 0};
    for (const auto& r : rows)
        for (int c = 0; c < 6; ++c) width[c] = std::max(width[c], display_width(r[c]));
    std::string out;
    for (const auto& r : rows) {
        out += std::string(width[0] - display_width(r[0]), ' ') + r[0] + " ";   // the id, right-aligned
        for (int c = 1; c < 6; ++c) out += " " + r[c] + std::string(width[c] - display_width(r[c]), ' ');
        out += " " + r[6] + "\n";
    }
    return out;
}

std::string number_text(double x, int significant) {
    char buffer[48];
    snprintf(buffer, sizeof buffer, "%.*g", significant, x);
    return buffer;
}

}  // namespace td
