// window_tensor.cpp: the Tensor window: the selected node's value and gradient. Shape, dtype,
// statistics with NaN/Inf counts, a histogram, a heatmap with its colour scale (2-D; 1-D as a
// strip; 3-D and 4-D as a grid of per-channel images; more dims as a slice) or a clipped table,
// and buttons to go between a forward node and its backward nodes.
//
// [SECTION] gradient   which tensor is "the gradient" of a node
// [SECTION] heatmap    pixels, one GL texture per tab, the colour bar
// [SECTION] panel      statistics, histogram, heatmap or table of one value
// [SECTION] window     draw_tensor_window
#include <GLFW/glfw3.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "heat_colour.h"
#include "tensor_stats.h"
#include "history.h"
#include "viewer_internal.h"

namespace td {

namespace {

// ============================================================================================
// [SECTION] gradient

// "#24 expand, backward of #11 sum"; "the seed of backward() (#30 ones)".
std::string sender_text(const ViewerState& s, const GradientSender& g) {
    if (g.forward_id == 0) return "the seed of backward() (#" + std::to_string(g.node_id) + " " + g.op + ")";
    const NodeRecord* named = record_find(s.model.records, g.forward_id);
    std::string forward = "#" + std::to_string(g.forward_id) + " " + g.forward_op +
                          (!named || named->name.empty() ? "" : " (" + named->name + ")");
    return "#" + std::to_string(g.node_id) + " " + g.op + ", backward of " + forward;
}

// "#24 expand, backward of #11 sum + #27 mm, backward of #12 mm": the gradients summed.
std::string senders_text(const ViewerState& s, const ArrivedGradient& a) {
    std::string text;
    for (size_t i = 0; i < a.senders.size(); ++i) text += (i ? " + " : "") + sender_text(s, a.senders[i]);
    return text;
}

// Where an arrived gradient came from: "backward pass 2 (from #9): from #24 expand, backward of #11 sum".
std::string arrival_text(const ViewerState& s, const ArrivedGradient& a) {
    return "backward pass " + std::to_string(a.pass) + " (from #" + std::to_string(a.root_id) + "): from " + senders_text(s, a);
}

}  // namespace

// What the Gradient tab shows for output 0 of n (see viewer_internal.h).
GradientShown viewer_gradient_of(const ViewerState& s, const Node* n) {
    GradientShown shown;
    if (n->phase == PHASE_BACKWARD) {
        shown.note = "A backward node: its value (the Value tab) is part of the gradient of #" + std::to_string(n->group) + ".";
        return shown;
    }
    if (n->outputs.size() == 0) return shown;
    const ArrivedGradient* arrived = arrived_gradient(n, 0);
    if (n->outputs[0].grad.defined()) {   // a leaf's or a retained one: summed over the passes
        shown.found = true;
        shown.value = n->outputs[0].grad.value();
        shown.source = ".grad" + (arrived && arrived->complete ? "; last arrived in " + arrival_text(s, *arrived) : std::string());
        return shown;
    }
    if (arrived && arrived->complete) {
        shown.found = true;
        shown.value = arrived->value;
        shown.source = "arrived in " + arrival_text(s, *arrived);
        return shown;
    }
    if (arrived) {   // a stop earlier in the pass: the sum is not complete yet
        shown.note = "Backward pass " + std::to_string(arrived->pass) + " has not reached this node yet: its gradient is " +
                     "being summed, so far from " + senders_text(s, *arrived) + ".";
        return shown;
    }
    if (!n->outputs[0].requires_grad) shown.note = "No gradient: nothing that made this tensor requires grad.";
    else shown.note = "No gradient kept: run backward() while the viewer is open (the gradient that arrives at each node "
                      "is kept while the viewer looks, for the nodes it shows).";
    return shown;
}

namespace {

// ============================================================================================
// [SECTION] heatmap

void texture_upload(HeatTexture& t, const std::vector<uint32_t>& pixels, int width, int height) {
    viewer_texture_upload(&t.id, pixels.data(), width, height);
    t.width = width;
    t.height = height;
}

// How a value is cut into images: `images` of rows x cols elements each, starting at `offset`
// (the slice picked by the sliders), laid out in a grid of `grid_cols` columns.
struct HeatLayout {
    int64_t offset = 0;
    int64_t rows = 1, cols = 1, images = 1;
    int grid_cols = 1;
    int step = 1;   // every step-th element in each direction (big tensors)
};

HeatLayout heat_layout(const Shape& shape, const std::vector<int>& slice) {
    HeatLayout h;
    int nd = shape.ndim;
    if (nd == 0) return h;
    if (nd == 1) {
        h.cols = shape[0];
    } else if (nd == 2) {
        h.rows = shape[0];
        h.cols = shape[1];
    } else if (nd == 3 || nd == 4) {   // [C,H,W] or [N,C,H,W]: one image per channel
        h.images = shape[nd - 3];
        h.rows = shape[nd - 2];
        h.cols = shape[nd - 1];
        if (nd == 4 && !slice.empty()) h.offset = slice[0] * h.images * h.rows * h.cols;
    } else {   // leading dims picked by sliders, the last two as an image
        h.rows = shape[nd - 2];
        h.cols = shape[nd - 1];
        int64_t stride = h.rows * h.cols;
        for (int d = nd - 3; d >= 0; --d) {
            h.offset += (d < static_cast<int>(slice.size()) ? slice[d] : 0) * stride;
            stride *= shape[d];
        }
    }
    h.grid_cols = static_cast<int>(std::ceil(std::sqrt(static_cast<double>(h.images))));
    int64_t longest = std::max(h.rows, h.cols) * (h.images > 1 ? h.grid_cols : 1);
    while (longest / h.step > 1024) ++h.step;
    return h;
}

// Build the pixels (a 1-pixel gap between grid images) and upload them when `key` changed. `v` is
// on the host (draw_value_panel).
void heat_texture_update(HeatTexture& t, const std::string& key, const Value& v, const HeatLayout& h, double lo, double hi) {
    if (t.key == key && t.id) return;
    int img_w = static_cast<int>((h.cols + h.step - 1) / h.step), img_h = static_cast<int>((h.rows + h.step - 1) / h.step);
    int grid_rows = static_cast<int>((h.images + h.grid_cols - 1) / h.grid_cols);
    int gap = h.images > 1 ? 1 : 0;
    int width = h.images > 1 ? h.grid_cols * (img_w + gap) - gap : img_w;
    int height = h.images > 1 ? grid_rows * (img_h + gap) - gap : img_h;
    std::vector<uint32_t> pixels(static_cast<size_t>(width) * height, IM_COL32(40, 40, 40, 255));
    for (int64_t image = 0; image < h.images; ++image) {
        int gx = static_cast<int>(image % h.grid_cols) * (img_w + gap), gy = static_cast<int>(image / h.grid_cols) * (img_h + gap);
        int64_t base = h.offset + image * h.rows * h.cols;
        for (int y = 0; y < img_h; ++y)
            for (int x = 0; x < img_w; ++x) {
                int64_t i = base + static_cast<int64_t>(y) * h.step * h.cols + static_cast<int64_t>(x) * h.step;
                pixels[static_cast<size_t>(gy + y) * width + gx + x] = heat_colour(value_get(v, i), lo, hi);
            }
    }
    texture_upload(t, pixels, width, height);
    t.key = key;
}

void draw_colour_bar(double lo, double hi, const TensorStats& st) {
    ImDrawList* dl = ImGui::GetWindowDrawList();
    ImVec2 p = ImGui::GetCursorScreenPos();
    const int steps = 32;
    const float w = 180, h = 10;
    for (int i = 0; i < steps; ++i) {
        double x0 = lo + (hi - lo) * i / steps;
        dl->AddRectFilled(ImVec2(p.x + w * i / steps, p.y), ImVec2(p.x + w * (i + 1) / steps + 0.5f, p.y + h),
                          heat_colour(x0 + (hi - lo) * 0.5 / steps, lo, hi));
    }
    dl->AddRect(p, ImVec2(p.x + w, p.y + h), IM_COL32(160, 160, 160, 255));
    ImGui::Dummy(ImVec2(w, h));
    ImGui::Text("%-10.4g", lo);
    ImGui::SameLine(w - 50);
    ImGui::Text("%10.4g", hi);
    struct Swatch {
        const char* name;
        uint32_t colour;
        int64_t count;
    };
    const Swatch swatches[] = {{"NaN", HEAT_NAN, st.nan}, {"+Inf", HEAT_POS_INF, st.pos_inf}, {"-Inf", HEAT_NEG_INF, st.neg_inf}};
    for (const Swatch& sw : swatches) {
        if (sw.count == 0) continue;
        ImVec2 q = ImGui::GetCursorScreenPos();
        dl->AddRectFilled(ImVec2(q.x, q.y + 3), ImVec2(q.x + 12, q.y + 13), sw.colour);
        ImGui::Dummy(ImVec2(14, 14));
        ImGui::SameLine();
        ImGui::Text("%s  %lld", sw.name, static_cast<long long>(sw.count));
        ImGui::SameLine();
    }
    ImGui::NewLine();
}

// ============================================================================================
// [SECTION] panel

std::string value_key(const Value& v, int tab) {
    char key[96];
    snprintf(key, sizeof key, "%d:%p:%u:%s", tab, static_cast<void*>(v.storage.get()), v.storage ? v.storage->version : 0,
             v.shape.str().c_str());
    return key;
}

// The values of `v`, on the host (draw_value_panel), as a clipped table.
void draw_table(const Value& v, const HeatLayout& h) {
    const int max_cols = 32;
    int cols = static_cast<int>(std::min<int64_t>(h.cols, max_cols));
    if (h.cols > max_cols) ImGui::TextDisabled("first %d of %lld columns", max_cols, static_cast<long long>(h.cols));
    ImGuiTableFlags flags = ImGuiTableFlags_ScrollX | ImGuiTableFlags_ScrollY | ImGuiTableFlags_RowBg |
                            ImGuiTableFlags_BordersInnerV | ImGuiTableFlags_SizingFixedFit;
    if (!ImGui::BeginTable("values", cols + 1, flags, ImVec2(0, std::max(ImGui::GetContentRegionAvail().y, 80.0f)))) return;
    ImGui::TableSetupScrollFreeze(1, 1);
    ImGui::TableSetupColumn("");
    for (int c = 0; c < cols; ++c) ImGui::TableSetupColumn(std::to_string(c).c_str());
    ImGui::TableHeadersRow();
    int64_t image_rows = h.rows * h.images;   // channel images stacked (table view of 3-D/4-D)
    ImGuiListClipper clipper;
    clipper.Begin(static_cast<int>(std::min<int64_t>(image_rows, 1 << 20)));
    while (clipper.Step()) {
        for (int row = clipper.DisplayStart; row < clipper.DisplayEnd; ++row) {
            ImGui::TableNextRow();
            ImGui::TableSetColumnIndex(0);
            if (h.images > 1) ImGui::TextDisabled("%lld,%lld", static_cast<long long>(row / h.rows), static_cast<long long>(row % h.rows));
            else ImGui::TextDisabled("%d", row);
            for (int c = 0; c < cols; ++c) {
                ImGui::TableSetColumnIndex(c + 1);
                double x = value_get(v, h.offset + static_cast<int64_t>(row) * h.cols + c);
                if (std::isnan(x)) ImGui::TextColored(ImVec4(1, 0.3f, 1, 1), "nan");
                else if (std::isinf(x)) ImGui::TextColored(ImVec4(1, 0.9f, 0.2f, 1), x > 0 ? "inf" : "-inf");
                else ImGui::Text("%.4g", x);
            }
        }
    }
    ImGui::EndTable();
}

// The statistics of `value` for tab `tab` (cached by `key`: made again only when it changes). A
// value on another device is read through a host copy, made when the value changes.
const StatsCache& value_stats(TensorWindowState& w, const Value& value, int tab, const std::string& key) {
    StatsCache& cache = w.caches[tab];
    bool on_cpu = value.device() == DEVICE_CPU;
    if (cache.key != key) {
        cache.host = on_cpu ? Value() : value_to_host(value);
        cache.stats = tensor_stats(on_cpu ? value : cache.host, 48);
        cache.histogram.assign(cache.stats.histogram.begin(), cache.stats.histogram.end());
        cache.key = key;
    }
    return cache;
}

// The value's shape, dtype, statistics and histogram (`v`: it on the host). True when that is all
// there is to show (a single element).
bool draw_value_stats(const Value& value, const Value& v, const StatsCache& cache) {
    const TensorStats& st = cache.stats;
    bool on_cpu = value.device() == DEVICE_CPU;
    std::string device = on_cpu ? "" : std::string(" ") + device_name(value.device());
    ImGui::Text("%s %s%s   %lld element%s", v.shape.str().c_str(), dtype_name(v.dtype), device.c_str(),
                static_cast<long long>(st.count), st.count == 1 ? "" : "s");
    if (st.finite > 0)
        ImGui::Text("min %.4g   max %.4g   mean %.4g   std %.4g", st.min, st.max, st.mean, st.std);   // std: n - 1, as torch.std
    ImVec4 bad(1.0f, 0.45f, 0.35f, 1.0f), fine(0.6f, 0.6f, 0.6f, 1.0f);
    ImGui::TextColored(st.nan ? bad : fine, "NaN %lld", static_cast<long long>(st.nan));
    ImGui::SameLine();
    ImGui::TextColored(st.pos_inf ? bad : fine, "  +Inf %lld", static_cast<long long>(st.pos_inf));
    ImGui::SameLine();
    ImGui::TextColored(st.neg_inf ? bad : fine, "  -Inf %lld", static_cast<long long>(st.neg_inf));
    ImGui::SameLine();
    ImGui::TextDisabled("  zeros %lld", static_cast<long long>(st.zeros));
    if (st.count == 1) {
        ImGui::Text("value: %.6g", value_get(v, 0));
        return true;
    }
    if (!st.histogram.empty()) {
        char overlay[64];
        snprintf(overlay, sizeof overlay, "histogram %.3g .. %.3g", st.min, st.max);
        ImGui::PlotHistogram("##histogram", cache.histogram.data(), static_cast<int>(cache.histogram.size()), 0, overlay, 0.0f,
                             FLT_MAX, ImVec2(ImGui::GetContentRegionAvail().x, 48));
    }
    return false;
}

// Slices: the batch index of a 4-D tensor, the leading indices past 4 dims (sliders, kept in
// `slice`).
void draw_slice_sliders(const Value& v, std::vector<int>& slice) {
    int nd = v.shape.ndim;
    int n_sliders = nd == 4 ? 1 : nd > 4 ? nd - 2 : 0;
    slice.resize(n_sliders, 0);
    for (int d = 0; d < n_sliders; ++d) {
        int top = static_cast<int>(v.shape[d]) - 1;
        slice[d] = std::clamp(slice[d], 0, std::max(top, 0));
        if (top > 0) {
            ImGui::SetNextItemWidth(160);
            ImGui::SliderInt(("dim " + std::to_string(d)).c_str(), &slice[d], 0, top);
        }
    }
}

// The element under the mouse over a heatmap drawn at `at`, `size` pixels, in a tooltip.
void heatmap_tooltip(const HeatTexture& t, const Value& v, const HeatLayout& h, ImVec2 at, ImVec2 size) {
    ImVec2 m = ImGui::GetIO().MousePos;
    int px = static_cast<int>((m.x - at.x) / size.x * t.width), py = static_cast<int>((m.y - at.y) / size.y * t.height);
    int img_w = static_cast<int>((h.cols + h.step - 1) / h.step), img_h = static_cast<int>((h.rows + h.step - 1) / h.step);
    int gap = h.images > 1 ? 1 : 0;
    int gx = px / (img_w + gap), gy = py / (img_h + gap);
    int x = px % (img_w + gap), y = py % (img_h + gap);
    int64_t image = static_cast<int64_t>(gy) * h.grid_cols + gx;
    if (x < img_w && y < img_h && image < h.images) {
        int64_t row = static_cast<int64_t>(y) * h.step, col = static_cast<int64_t>(x) * h.step;
        int64_t i = h.offset + image * h.rows * h.cols + row * h.cols + col;
        ImGui::BeginTooltip();
        if (h.images > 1) ImGui::Text("channel %lld [%lld, %lld] = %.6g", static_cast<long long>(image), static_cast<long long>(row), static_cast<long long>(col), value_get(v, i));
        else ImGui::Text("[%lld, %lld] = %.6g", static_cast<long long>(row), static_cast<long long>(col), value_get(v, i));
        ImGui::EndTooltip();
    }
}

// The heatmap of `v` (its texture, tab `tab`'s, uploaded when `image_key` changes), sized to the
// room left; the element under the mouse; the colour bar.
void draw_heatmap(ViewerState& s, int tab, const std::string& image_key, const Value& v, const HeatLayout& h,
                  const TensorStats& st) {
    double lo = st.finite ? st.min : 0, hi = st.finite ? st.max : 1;
    HeatTexture& t = s.tensor.textures[tab];
    if (t.window_serial != s.app.serial) t = HeatTexture();   // made in a closed window's GL context: gone
    t.window_serial = s.app.serial;
    heat_texture_update(t, image_key, v, h, lo, hi);

    ImVec2 avail = ImGui::GetContentRegionAvail();
    float room_y = std::max(avail.y - 70.0f, 60.0f);
    float scale = std::min(avail.x / static_cast<float>(t.width), room_y / static_cast<float>(t.height));
    scale = std::min(scale, 24.0f);
    if (h.rows == 1 && h.images == 1) scale = std::min(avail.x / static_cast<float>(t.width), 24.0f);   // a strip
    // Thin tensors (a column or a row vector) are stretched across so each element stays visible.
    ImVec2 size(std::max(t.width * scale, std::min(24.0f, avail.x)), std::max(t.height * scale, 24.0f));
    ImVec2 at = ImGui::GetCursorScreenPos();
    ImGui::Image(reinterpret_cast<ImTextureID>(static_cast<intptr_t>(t.id)), size);
    viewer_note_item("heatmap");
    s.tensor.heatmap_drawn = true;
    if (ImGui::IsItemHovered()) heatmap_tooltip(t, v, h, at, size);
    if (h.step > 1) ImGui::TextDisabled("every %d-th element shown", h.step);
    draw_colour_bar(lo, hi, st);
}

// One value: statistics, histogram, and a heatmap or a table. `tab` picks the texture. A value
// on another device is read through a host copy, made when the value changes, not every frame.
void draw_value_panel(ViewerState& s, const Value& value, int tab) {
    TensorWindowState& w = s.tensor;
    if (value_freed(value)) {
        ImGui::TextDisabled("%s %s: %s", value.shape.str().c_str(), dtype_name(value.dtype), VALUE_FREED_TEXT);
        return;
    }
    std::string key = value_key(value, tab);
    const StatsCache& cache = value_stats(w, value, tab, key);
    const Value& v = value.device() == DEVICE_CPU ? value : cache.host;   // what is read below: on the host
    if (draw_value_stats(value, v, cache)) return;
    std::vector<int>& slice = w.slices[tab];
    draw_slice_sliders(v, slice);
    HeatLayout h = heat_layout(v.shape, slice);
    ImGui::RadioButton("heatmap", &w.as_table, 0);
    ImGui::SameLine();
    ImGui::RadioButton("table", &w.as_table, 1);
    int nd = v.shape.ndim;
    if (nd >= 3 && nd <= 4) {
        ImGui::SameLine();
        ImGui::TextDisabled("%lld channel%s of %lldx%lld", static_cast<long long>(h.images), h.images == 1 ? "" : "s",
                            static_cast<long long>(h.rows), static_cast<long long>(h.cols));
    }
    if (w.as_table) {
        draw_table(v, h);
        return;
    }
    std::string image_key = key;
    for (int i : slice) image_key += ":" + std::to_string(i);
    draw_heatmap(s, tab, image_key, v, h, cache.stats);
}

// ============================================================================================
// [SECTION] window

void node_button(const Node* n) {
    std::string label = "#" + std::to_string(n->id) + " " + n->name();
    if (ImGui::SmallButton(label.c_str())) viewer_select(n->id, true);
}

// What an input is to this node: the gradient flowing in, a saved forward value, a plain input.
// (Backward nodes do not hold their producers: the records say which pass made an input.)
const char* input_role(const ViewerState& s, const Node* n, const Edge& e) {
    if (n->phase != PHASE_BACKWARD) return "input";
    const NodeRecord* producer = record_find(s.model.records, e.id);
    if (producer && producer->phase == PHASE_BACKWARD) return "gradient";
    return producer ? "saved forward value" : "input";
}

// The Inputs tab: each input (its values are held by the node even when its producer is gone),
// one shown at a time. Stopped before a node runs, this is what it is about to read.
void draw_inputs_panel(ViewerState& s, Node* n) {
    int& chosen = s.tensor.input_chosen;
    if (s.tensor.input_chosen_for != n->id) {   // a new node: its first gradient input, else its first input
        chosen = 0;
        for (int i = 0; i < n->inputs.size(); ++i)
            if (std::string(input_role(s, n, n->inputs[i])) == "gradient") {
                chosen = i;
                break;
            }
        s.tensor.input_chosen_for = n->id;
    }
    if (n->inputs.size() == 0) {
        ImGui::TextDisabled("no inputs: a leaf made from its arguments");
        return;
    }
    for (int i = 0; i < n->inputs.size(); ++i) {
        const Edge& e = n->inputs[i];
        const NodeRecord* r = record_find(s.model.records, e.id);
        std::string label = "#" + std::to_string(e.id) + " " + (r ? r->op : std::string("(freed)")) + "  " +
                            e.value().shape.str() + "  " + input_role(s, n, e);
        ImGui::PushID(i);
        ImGui::RadioButton(label.c_str(), &chosen, i);
        if (r) {
            ImGui::SameLine();
            if (ImGui::SmallButton("go")) viewer_select(e.id, true);
        }
        ImGui::PopID();
    }
    chosen = std::clamp(chosen, 0, n->inputs.size() - 1);
    ImGui::Separator();
    draw_value_panel(s, n->inputs[chosen].value(), 2);
}

}  // namespace

// The Tensor window at a rewound event (the timeline): output 0 of `values` as it was at the event,
// or why it is not there. False when there is nothing to say (then the live value is shown).
static bool rewound_value(ViewerState& s, const HistoryEvent& e, HistoryValues values, const char* what) {
    ImVec4 colour(0.45f, 0.3f, 0.85f, 1);
    if (!e.values_kept) {
        ImGui::TextColored(colour, "event %llu: its values fell out of the history (budget %s)", static_cast<unsigned long long>(e.serial),
                           history_bytes_text(history_budget()).c_str());
        return true;
    }
    if (values.empty() || !values[0].value.storage) return false;
    Value v = history_value_as_of(values[0].value, e.serial);
    ImGui::TextColored(colour, "the %s as it was at event %llu%s", what, static_cast<unsigned long long>(e.serial),
                       v.storage.get() != values[0].value.storage.get() ? " (changed in place since: the copy kept)" : "");
    draw_value_panel(s, v, what[0] == 'v' ? 0 : 1);
    return true;
}

namespace {

// The node's title, its script name, phase and source line; its forward node or backward nodes,
// one click apart.
void draw_node_header(ViewerState& s, Node* n) {
    std::string title = "#" + std::to_string(n->id) + " " + n->name();
    ImGui::TextUnformatted(title.c_str());
    ImGui::SameLine();
    const NodeRecord* r = record_find(s.model.records, n->id);
    if (r && !r->name.empty()) {
        ImGui::TextColored(ImVec4(0.55f, 0.8f, 1, 1), "%s", r->name.c_str());
        ImGui::SameLine();
    }
    ImGui::TextDisabled("%s  %s", n->phase == PHASE_FORWARD ? (n->is_leaf() ? "leaf" : "forward") : "backward",
                        source_loc_str(n->where).c_str());

    // Forward node <-> its backward nodes, one click apart.
    if (n->phase == PHASE_FORWARD && n->backward_nodes().size() > 0) {
        ImGui::TextDisabled("gradient nodes:");
        for (const Ref<Node>& b : n->backward_nodes()) {
            ImGui::SameLine();
            node_button(b.get());
        }
    } else if (n->phase == PHASE_BACKWARD) {
        Node* forward = viewer_node(s, n->group);
        ImGui::TextDisabled("part of the gradient of:");
        ImGui::SameLine();
        if (forward) node_button(forward);
        else ImGui::Text("#%lld (freed)", static_cast<long long>(n->group));
    }
}

// The tabs: Value, Gradient, Inputs. A new node opens on Inputs when it has not run yet (and leaves
// Inputs for Value when it has); a script may ask for a tab (s.tensor.tab_request). With the
// timeline at this node's event (history.h), its values as they were then.
void draw_tensor_tabs(ViewerState& s, Node* n) {
    TensorWindowState& w = s.tensor;
    bool not_run = s.engine.running.count(n->id) > 0;
    const HistoryEvent* rewound = s.timeline.serial && s.timeline.node == n->id ? history_event(s.timeline.serial) : nullptr;
    if (n->id != w.last_node && w.tab_request < 0) w.tab_request = not_run ? 2 : w.tab == 2 ? 0 : -1;
    w.last_node = n->id;
    if (!ImGui::BeginTabBar("tensor_tabs")) return;
    ImGuiTabItemFlags value_flags = w.tab_request == 0 ? ImGuiTabItemFlags_SetSelected : 0;
    ImGuiTabItemFlags grad_flags = w.tab_request == 1 ? ImGuiTabItemFlags_SetSelected : 0;
    ImGuiTabItemFlags inputs_flags = w.tab_request == 2 ? ImGuiTabItemFlags_SetSelected : 0;
    w.tab_request = -1;
    if (ImGui::BeginTabItem("Value", nullptr, value_flags)) {
        w.tab = 0;
        if (rewound && rewound_value(s, *rewound, rewound->outputs(), "value")) {
        } else if (not_run)
            ImGui::TextColored(ImVec4(0.95f, 0.6f, 0.2f, 1),
                               "not run yet: its output is computed when it runs (its inputs: the Inputs tab)");
        else draw_value_panel(s, n->outputs[0].value, 0);
        ImGui::EndTabItem();
    }
    if (ImGui::BeginTabItem("Gradient", nullptr, grad_flags)) {
        w.tab = 1;
        GradientShown grad = viewer_gradient_of(s, n);
        if (rewound && rewound->group && rewound_value(s, *rewound, rewound->grad_outputs(), "gradient that arrived")) {
        } else if (grad.found) {
            ImGui::PushTextWrapPos(0);
            ImGui::TextDisabled("gradient: %s", grad.source.c_str());
            ImGui::PopTextWrapPos();
            draw_value_panel(s, grad.value, 1);
        } else {
            ImGui::TextWrapped("%s", grad.note.c_str());
        }
        ImGui::EndTabItem();
    }
    if (ImGui::BeginTabItem("Inputs", nullptr, inputs_flags)) {
        w.tab = 2;
        draw_inputs_panel(s, n);
        ImGui::EndTabItem();
    }
    ImGui::EndTabBar();
}

}  // namespace

void draw_tensor_window(ViewerState& s, const Tile& tile) {
    ImGui::SetNextWindowPos(tile.pos);
    ImGui::SetNextWindowSize(tile.size);
    ImGui::Begin("Tensor", nullptr, ImGuiWindowFlags_NoMove | ImGuiWindowFlags_NoResize | ImGuiWindowFlags_NoCollapse);
    s.tensor.heatmap_drawn = false;
    Node* n = s.selection.node ? viewer_node(s, s.selection.node) : nullptr;
    if (s.selection.node == 0) ImGui::TextDisabled("Click a node in the graph to see its tensor.");
    else if (!n) ImGui::Text("#%lld is freed: no tensor reaches it any more.", static_cast<long long>(s.selection.node));
    if (n) draw_node_header(s, n);
    if (n && n->outputs.size() != 0) draw_tensor_tabs(s, n);
    ImGui::End();
}

}  // namespace td

void td::viewer_texture_upload(unsigned int* id, const void* rgba, int width, int height) {
    if (!*id) glGenTextures(1, id);
    glBindTexture(GL_TEXTURE_2D, *id);
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MIN_FILTER, GL_NEAREST);
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MAG_FILTER, GL_NEAREST);
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_WRAP_S, GL_CLAMP_TO_EDGE);
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_WRAP_T, GL_CLAMP_TO_EDGE);
    glPixelStorei(GL_UNPACK_ALIGNMENT, 4);
    glTexImage2D(GL_TEXTURE_2D, 0, GL_RGBA, width, height, 0, GL_RGBA, GL_UNSIGNED_BYTE, rgba);
}
