// page_data.cpp: the page's data as one JSON text (page_internal.h): the nodes drawn, their
// values' and gradients' summaries (statistics and a sampled grid, shared by every node and event
// that shows the same bytes), and the history's events about these nodes with what they held.
//
// [SECTION] json      [SECTION] values      [SECTION] nodes      [SECTION] events      [SECTION] page
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <unordered_map>
#include <unordered_set>

#include "heat_colour.h"
#include "history.h"
#include "json.h"
#include "node_names.h"
#include "page_internal.h"
#include "source_cache.h"
#include "tensor_stats.h"

namespace td {

namespace {

// ============================================================================================
// [SECTION] json

// A number with 4 significant digits; NaN as null and the infinities as 1e999 (JSON.parse reads
// that as Infinity).
void json_number(std::string& out, double x) {
    if (std::isnan(x)) {
        out += "null";
        return;
    }
    if (std::isinf(x)) {
        out += x > 0 ? "1e999" : "-1e999";
        return;
    }
    char text[32];
    snprintf(text, sizeof text, "%.4g", x);
    out += text;
}

void json_key(std::string& out, const char* key) {
    if (out.back() != '{') out += ',';
    out += '"';
    out += key;
    out += "\":";
}
void json_field(std::string& out, const char* key, const std::string& text) {
    json_key(out, key);
    out += json_quote(text);
}
void json_field(std::string& out, const char* key, double x) {
    json_key(out, key);
    json_number(out, x);
}
void json_field(std::string& out, const char* key, int64_t x) {
    json_key(out, key);
    out += std::to_string(x);
}
void json_field(std::string& out, const char* key, const char* text) = delete;   // would be read as a bool
void json_field(std::string& out, const char* key, bool b) {
    json_key(out, key);
    out += b ? "true" : "false";
}

// "#rrggbb" of heat_colour's 0xAABBGGRR.
std::string colour_text(uint32_t abgr) {
    char text[8];
    snprintf(text, sizeof text, "#%02x%02x%02x", abgr & 0xFF, (abgr >> 8) & 0xFF, (abgr >> 16) & 0xFF);
    return text;
}

// heat_colour's two scales sampled at 65 points, and its colours for NaN and the infinities: the
// page's heatmaps pick from these, so they are the viewer's colours.
std::string palette_json() {
    std::string out = "{\"diverging\":[";
    for (int i = 0; i <= 64; ++i) out += (i ? ",\"" : "\"") + colour_text(heat_colour(-1 + i / 32.0, -1, 1)) + "\"";
    out += "],\"sequential\":[";
    for (int i = 0; i <= 64; ++i) out += (i ? ",\"" : "\"") + colour_text(heat_colour(i / 64.0, 0, 1)) + "\"";
    out += "],\"nan\":\"" + colour_text(HEAT_NAN) + "\",\"pos_inf\":\"" + colour_text(HEAT_POS_INF) + "\",\"neg_inf\":\"" +
           colour_text(HEAT_NEG_INF) + "\"}";
    return out;
}

// ============================================================================================
// [SECTION] values

// Every value the page shows, once per distinct bytes and layout: a value is noted first (held,
// so that its storage cannot be reused for another while the page is made), then summarised
// with a grid whose side fits the page's cell budget among all of them.
class ValueTable {
public:
    // The index of `v` in the table (-1 for a value without bytes: none, or freed).
    int note(const Value& v) {
        if (value_freed(v)) return -1;
        char key[160];
        snprintf(key, sizeof key, "%p:%lld:%d:", static_cast<const void*>(v.storage.get()), static_cast<long long>(v.offset), int(v.dtype));
        std::string k = key + v.shape.str();
        if (v.strided())
            for (int d = 0; d < v.shape.ndim; ++d) k += ":" + std::to_string(v.stride(d));
        auto found = index_.find(k);
        if (found != index_.end()) return found->second;
        values_.push_back(v);
        return index_[k] = static_cast<int>(values_.size()) - 1;
    }
    size_t size() const { return values_.size(); }
    // The summaries as a JSON array, grids of at most `side` x `side` cells.
    std::string json(int side) const {
        std::string out = "[";
        for (size_t i = 0; i < values_.size(); ++i) {
            if (i) out += ',';
            summary_append(out, values_[i], side);
        }
        return out + "]";
    }

private:
    static void summary_append(std::string& out, const Value& value, int side);
    std::vector<Value> values_;
    std::unordered_map<std::string, int> index_;
};

// {shape, dtype, count, finite, min, max, mean, std, norm, nan, pos_inf, neg_inf, grid: {rows, cols,
// row_step, col_step, v: [row-major]}}; the grid samples every row_step-th row and col_step-th
// column of the value seen as rows of its last dim (as :animate's panel).
void ValueTable::summary_append(std::string& out, const Value& value, int side) {
    Value host = value.device() == DEVICE_CPU ? value : value_to_host(value);
    TensorStats st = tensor_stats(host);
    out += "{\"shape\":[";
    for (int d = 0; d < host.shape.ndim; ++d) out += (d ? "," : "") + std::to_string(host.shape.dims[d]);
    out += "]";
    json_field(out, "dtype", std::string(dtype_name(host.dtype)));
    json_field(out, "count", st.count);
    json_field(out, "finite", st.finite);
    json_field(out, "min", st.min);
    json_field(out, "max", st.max);
    json_field(out, "mean", st.mean);
    json_field(out, "std", st.std);
    json_field(out, "norm", st.norm);
    json_field(out, "nan", st.nan);
    json_field(out, "pos_inf", st.pos_inf);
    json_field(out, "neg_inf", st.neg_inf);
    HeatGrid grid = host.numel() > 1 ? heat_grid_sample(host, side) : HeatGrid();
    if (grid.rows > 0) {
        json_key(out, "grid");
        out += "{\"rows\":" + std::to_string(grid.rows) + ",\"cols\":" + std::to_string(grid.cols) + ",\"row_step\":" +
               std::to_string(grid.row_step) + ",\"col_step\":" + std::to_string(grid.col_step) + ",\"v\":[";
        for (size_t k = 0; k < grid.values.size(); ++k) {
            if (k) out += ',';
            json_number(out, grid.values[k]);
        }
        out += "]}";
    } else if (host.numel() == 1) {
        json_field(out, "item", value_get(host, 0));
    }
    out += "}";
}

// The strings many nodes repeat (file names, source lines, module paths, notes), once each: a
// node holds their index into the page's "strings".
class StringTable {
public:
    int64_t index(const std::string& text) {
        auto found = index_.find(text);
        if (found != index_.end()) return found->second;
        strings_.push_back(text);
        return index_[text] = static_cast<int64_t>(strings_.size()) - 1;
    }
    std::string json() const {
        std::string out = "[";
        for (size_t i = 0; i < strings_.size(); ++i) out += (i ? "," : "") + json_quote(strings_[i]);
        return out + "]";
    }

private:
    std::vector<std::string> strings_;
    std::unordered_map<std::string, int64_t> index_;
};

// What the nodes and events share: the values they show and the strings they repeat.
struct PageTables {
    ValueTable values;
    StringTable strings;
    // A string field as its index in `strings`, left out when empty.
    void text_field(std::string& out, const char* key, const std::string& text) {
        if (!text.empty()) json_field(out, key, strings.index(text));
    }
};

// ============================================================================================
// [SECTION] nodes

// What the page shows as a node's gradient (output 0), as the viewer's Gradient tab finds it: its
// .grad (a leaf, or one that retains it), else the one that arrived in a watched pass; else a note.
int node_gradient(ValueTable& values, const Node* n, std::string* note) {
    if (n->phase == PHASE_BACKWARD) {
        *note = "a backward node: its value is part of the gradient of #" + std::to_string(n->group);
        return -1;
    }
    if (n->outputs.size() == 0) return -1;
    if (n->outputs[0].grad.defined()) return values.note(n->outputs[0].grad.value());
    const ArrivedGradient* arrived = arrived_gradient(n, 0);
    if (arrived && arrived->complete) return values.note(arrived->value);
    if (arrived) *note = "backward pass " + std::to_string(arrived->pass) + " has not reached it yet";
    else if (!n->outputs[0].requires_grad) *note = "none: nothing that made it requires grad";
    else if (n->is_leaf()) *note = "no .grad yet: no backward pass has reached it";
    else *note = "not kept: a backward pass keeps the gradient of each node only while a breakpoint, a step or the viewer "
                 "watches (leaves keep theirs in .grad, as do tensors that called retain_grad())";
    return -1;
}

// One node: {id, op, name, label, backward, group, module, file, line, src, inputs, leaf, parameter,
// outputs: [value index], value_note, grad, grad_note}; strings as indices into the page's
// strings; a field left out is empty, 0, false, or -1 (grad).
void node_append(std::string& out, PageTables& t, const Node* n) {
    out += "{";
    json_field(out, "id", n->id);
    std::string op = n->shown_op();
    std::string attrs = op_describe_attrs(n->op, n->attrs());
    if (!attrs.empty() && op == n->name()) op += "(" + attrs + ")";
    json_field(out, "op", op);
    std::string name = node_bound_name(n), label = node_label(n);
    if (!name.empty()) json_field(out, "name", name);
    if (label != name && label[0] != '#') json_field(out, "label", label);
    if (n->phase == PHASE_BACKWARD) json_field(out, "backward", true);
    if (n->group) json_field(out, "group", n->group);
    t.text_field(out, "module", scope_path(n->scope));
    std::string file = n->where.file < 0 ? "" : source_file_name(n->where.file);
    t.text_field(out, "file", file);
    if (!file.empty()) json_field(out, "line", static_cast<int64_t>(n->where.line));
    if (!file.empty()) t.text_field(out, "src", source_line_text(file, n->where.line));
    if (n->inputs.size()) {
        json_key(out, "inputs");
        out += "[";
        for (int i = 0; i < n->inputs.size(); ++i) out += (i ? "," : "") + std::to_string(n->inputs[i].id);
        out += "]";
    }
    if (n->is_leaf()) json_field(out, "leaf", true);
    if (node_is_parameter(n)) json_field(out, "parameter", true);
    json_key(out, "outputs");
    out += "[";
    bool freed = false;
    for (int i = 0; i < n->outputs.size(); ++i) {
        int v = t.values.note(n->outputs[i].value);
        freed = freed || v < 0;
        out += (i ? "," : "") + std::to_string(v);
    }
    out += "]";
    if (freed) t.text_field(out, "value_note", std::string("value ") + VALUE_FREED_TEXT);
    std::string grad_note;
    int grad = node_gradient(t.values, n, &grad_note);
    if (grad >= 0) json_field(out, "grad", static_cast<int64_t>(grad));
    t.text_field(out, "grad_note", grad_note);
    out += "}";
}

// ============================================================================================
// [SECTION] events

// [[node id, value index], ...] of an event's run of values, as they were at the event.
void event_values_append(std::string& out, ValueTable& values, HistoryValues run, uint64_t serial) {
    out += "[";
    for (size_t i = 0; i < run.size(); ++i) {
        int v = run[i].value.storage ? values.note(history_value_as_of(run[i].value, serial)) : -1;
        out += (i ? ",[" : "[") + std::to_string(run[i].node_id) + "," + std::to_string(v) + "]";
    }
    out += "]";
}

// {serial, node, op, backward, group, file, line, newest, kept, inputs, outputs, grad_outputs,
// grad_inputs}; the file as an index into the page's strings.
void event_append(std::string& out, PageTables& t, const HistoryEvent& e) {
    out += "{";
    json_field(out, "serial", static_cast<int64_t>(e.serial));
    json_field(out, "node", e.node_id);
    json_field(out, "op", e.op);
    json_field(out, "backward", e.phase == PHASE_BACKWARD);
    json_field(out, "group", e.group);
    t.text_field(out, "file", std::string(e.where.file < 0 ? "" : source_file_name(e.where.file)));
    json_field(out, "line", static_cast<int64_t>(e.where.line));
    json_field(out, "newest", e.newest_id);
    json_field(out, "kept", e.values_kept);
    const std::pair<const char*, HistoryValues> runs[] = {
        {"inputs", e.inputs()}, {"outputs", e.outputs()}, {"grad_outputs", e.grad_outputs()}, {"grad_inputs", e.grad_inputs()}};
    for (const auto& run : runs) {
        json_key(out, run.first);
        event_values_append(out, t.values, run.second, e.serial);
    }
    out += "}";
}

// The serials of the listed events about `drawn` nodes, oldest first, at most `most` (the newest).
std::vector<uint64_t> events_about(const std::unordered_set<int64_t>& drawn, size_t most) {
    std::vector<uint64_t> serials;
    uint64_t oldest = history_oldest_serial(), newest = history_newest_serial();
    for (uint64_t s = newest; oldest && s >= oldest && serials.size() < most; --s) {
        const HistoryEvent* e = history_event(s);
        if (e && drawn.count(e->node_id)) serials.push_back(s);
    }
    std::reverse(serials.begin(), serials.end());
    return serials;
}

// Why the page has no slider, in one line.
std::string history_absent_text(size_t listed) {
    if (listed == 0)
        return "No rewind history: events are recorded only while something watches values (a breakpoint, a step, the "
               "viewer's window); stop in a pass with :break or dbg.pause() and step, then export again.";
    return "The rewind history holds " + std::to_string(listed) + " events, none about the nodes drawn here.";
}

}  // namespace

// ============================================================================================
// [SECTION] page

std::string page_data_json(const PageData& page, size_t* events_given) {
    PageTables t;
    std::string nodes = "[";
    std::unordered_set<int64_t> drawn;
    for (size_t i = 0; i < page.drawn.size(); ++i) {
        if (i) nodes += ',';
        node_append(nodes, t, page.drawn[i].get());
        drawn.insert(page.drawn[i]->id);
    }
    nodes += "]";
    std::string events = "[";
    std::vector<uint64_t> serials = page.history ? events_about(drawn, PAGE_EVENTS_MOST) : std::vector<uint64_t>();
    for (size_t i = 0; i < serials.size(); ++i) {
        if (i) events += ',';
        event_append(events, t, *history_event(serials[i]));
    }
    events += "]";
    if (events_given) *events_given = serials.size();
    int side = t.values.size() ? static_cast<int>(std::sqrt(static_cast<double>(PAGE_GRID_CELLS) / static_cast<double>(t.values.size())))
                               : PAGE_GRID_SIDE_MOST;
    side = std::clamp(side, PAGE_GRID_SIDE_LEAST, PAGE_GRID_SIDE_MOST);

    std::string out = "{";
    json_field(out, "title", page.title);
    json_key(out, "notes");
    out += "[";
    for (size_t i = 0; i < page.notes.size(); ++i) out += (i ? "," : "") + json_quote(page.notes[i]);
    out += "]";
    json_field(out, "total_nodes", static_cast<int64_t>(page.total_nodes));
    json_field(out, "focus", page.focus);
    json_field(out, "grid_side", static_cast<int64_t>(side));
    json_key(out, "palette");
    out += palette_json();
    json_key(out, "nodes");
    out += nodes;
    json_key(out, "events");
    out += events;
    size_t listed = history_events_listed();
    if (serials.empty()) json_field(out, "history_note", page.history ? history_absent_text(listed) : std::string("history not asked for"));
    else if (serials.size() == PAGE_EVENTS_MOST)
        json_field(out, "history_note", "the newest " + std::to_string(PAGE_EVENTS_MOST) + " events about these nodes (of " + std::to_string(listed) + " listed)");
    json_key(out, "strings");
    out += t.strings.json();
    json_key(out, "values");
    out += t.values.json(side);
    return out + "}";
}

}  // namespace td
