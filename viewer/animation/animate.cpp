// animate.cpp: backprop as an animation (animate.h). The story (which frames show what, from the
// tape), the writers (a GIF with giflib, a PNG sequence with cairo) and the GIF reader for checks.
// The frames are drawn by animate_render.cpp.
//
// [SECTION] values    [SECTION] story    [SECTION] GIF    [SECTION] write    [SECTION] backward watch
#include "animate.h"
#include "heat_colour.h"

#include <cairo.h>
#include <gif_lib.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <stdexcept>
#include <unordered_set>

#include "animate_internal.h"
#include "file_whole.h"
#include "node_names.h"
#include "source_cache.h"

namespace td {

namespace {

// ============================================================================================
// [SECTION] values

std::string shape_text(const Value& v) {
    std::string s = v.shape.str();
    if (v.dtype != DTYPE_F32) s += std::string(" ") + dtype_name(v.dtype);
    return s;
}

// "every row", "every 6th column": which rows or columns a sampled heatmap shows.
std::string every_nth(int64_t step, const char* what) {
    if (step <= 1) return std::string("every ") + what;
    int64_t last = step % 100 >= 11 && step % 100 <= 13 ? 0 : step % 10;
    const char* suffix = last == 1 ? "st" : last == 2 ? "nd" : last == 3 ? "rd" : "th";
    return "every " + std::to_string(step) + suffix + " " + what;
}

// The panel's numbers for a value: a scalar, or statistics and a heatmap grid (sampled, a tensor
// of more than two dims shown as rows of its last dim). A freed value says so.
void panel_set_value(AnimationPanel& p, const Value* value, const std::string& missing) {
    if (!value || value_freed(*value)) {
        p.note = value ? std::string("value ") + VALUE_FREED_TEXT : missing;
        return;
    }
    Value host = value->device() == DEVICE_CPU ? *value : value_to_host(*value);
    p.stats = tensor_stats(host);
    p.has_value = true;
    if (host.numel() == 1) {
        p.scalar = true;
        p.scalar_value = value_get(host, 0);
        return;
    }
    HeatGrid sampled = heat_grid_sample(host, ANIMATE_GRID_MOST);
    int64_t row_step = sampled.row_step, col_step = sampled.col_step;
    AnimationGrid& g = p.grid;
    g.rows = static_cast<int>(sampled.rows);
    g.cols = static_cast<int>(sampled.cols);
    g.values = std::move(sampled.values);
    g.lo = p.stats.finite ? p.stats.min : 0;
    g.hi = p.stats.finite ? p.stats.max : 0;
    if (row_step > 1 || col_step > 1)
        p.lines.push_back("heatmap: " + every_nth(row_step, "row") + ", " + every_nth(col_step, "column"));
}

// "next_h", "h2h + i2h", "#12": how the debugger names a node.
std::string label_of(const Node* n) { return node_label(n); }

// "d loss / d next_h"; "d loss / d(h2h + i2h)".
std::string d_over_d(const std::string& loss, const std::string& x) {
    auto d = [](const std::string& s) { return s.find(' ') == std::string::npos ? "d " + s : "d(" + s + ")"; };
    return d(loss) + " / " + d(x);
}

std::string op_text(const Node* n) {
    std::string s = "#" + std::to_string(n->id) + " " + n->shown_op();
    std::string attrs = op_describe_attrs(n->op, n->attrs());
    if (!attrs.empty()) s += "(" + attrs + ")";
    return s;
}

// "rnn_cell.lua:17   next_h = (h2h + i2h):tanh()": where the node was recorded.
std::string where_text(const Node* n) {
    if (n->where.file < 0) return "";
    std::string file = source_file_name(n->where.file);
    std::string text = source_line_text(file, n->where.line);
    std::string base = file.substr(file.find_last_of('/') == std::string::npos ? 0 : file.find_last_of('/') + 1);
    return base + ":" + std::to_string(n->where.line) + (text.empty() ? "" : "   " + text);
}

// ============================================================================================
// [SECTION] story

// A forward node the forward frames compute: one made from other tensors (not a leaf made from
// nothing, and not a history start, whose inputs are another history: both known from the start).
bool is_computed_op(const Node* n) { return n->phase == PHASE_FORWARD && n->inputs.size() > 0 && !n->history_start; }

// Add `f`; a frame showing the same box as the one before it (a module call's ops in one
// collapsed box, a group's rule) replaces it: one frame per box that changes.
void frame_add(AnimationStory& story, AnimationFrame f) {
    if (!story.frames.empty()) {
        const AnimationFrame& last = story.frames.back();
        int box = story.view.box_of(f.node);
        if (last.kind == f.kind && box >= 0 && box == story.view.box_of(last.node) &&
            story.view.boxes[static_cast<size_t>(box)].kind == BOX_CLUSTER) {
            story.frames.back() = std::move(f);
            return;
        }
    }
    story.frames.push_back(std::move(f));
}

// The nodes a story shows: the loss's graph, forward and backward, less the backward nodes of
// other passes (the pass from the root starts in the root's group, its seed gradient; older
// backward nodes belong to another pass: a parameter's accumulation from a pass of another loss).
// Throws when the tensor is a gradient or a leaf, or its graph is too big to read. *pass_first:
// the pass's first backward node (0: none ran).
std::vector<const Node*> story_nodes(const Tensor& loss, int64_t* pass_first) {
    const Node* root = loss.node.get();
    if (root->phase != PHASE_FORWARD) throw std::runtime_error("the tensor is a gradient (a backward node, " + op_text(root) + "): animate the loss it came from");
    if (!is_computed_op(root))
        throw std::runtime_error(label_of(root) + " (" + op_text(root) + " " + root->outputs[0].value.shape.str() +
                                 ") is a leaf: it has no graph to animate; give the tensor computed from it (the loss)");
    NodeList nodes = graph_collect(loss);
    if (nodes.size() > static_cast<size_t>(ANIMATE_MOST_NODES))
        throw std::runtime_error("the graph of " + label_of(root) + " has " + std::to_string(nodes.size()) + " nodes (forward and backward), more than " +
                                 std::to_string(ANIMATE_MOST_NODES) + " fit in frames anyone can read: animate a smaller piece (one step, one layer's output)");
    *pass_first = 0;
    for (const Ref<Node>& b : root->backward_nodes()) *pass_first = *pass_first ? std::min(*pass_first, b->id) : b->id;
    std::vector<const Node*> plain;
    for (const Ref<Node>& n : nodes)
        if (n->phase == PHASE_FORWARD || (*pass_first > 0 && n->id >= *pass_first)) plain.push_back(n.get());
    return plain;
}

// The story's steps: the forward ops in record order, the backward groups in the order the pass
// ran them, and the leaves that get a gradient.
struct StorySteps {
    std::vector<const Node*> forward_ops, groups, leaves_with_grad;
};

// Order the steps of `plain` (story_nodes) and note in `story` at which step each node's value and
// gradient are done; a note when no backward pass was recorded.
StorySteps story_steps(AnimationStory& story, const std::vector<const Node*>& plain, const Node* root, int64_t pass_first,
                       const AnimateGradients* watched, std::vector<std::string>& notes) {
    StorySteps st;
    for (const Node* n : plain) {
        if (n->phase == PHASE_BACKWARD) continue;
        if (is_computed_op(n)) st.forward_ops.push_back(n);
        else if (n->outputs.size() > 0 && n->outputs[0].requires_grad) st.leaves_with_grad.push_back(n);
    }
    const ArrivedGradient* arrived_at_root = arrived_gradient(root, 0);
    story.has_backward = watched || pass_first > 0 || (arrived_at_root && arrived_at_root->complete);
    if (watched) {
        std::unordered_map<int64_t, const Node*> by_id;
        for (const Node* n : plain) by_id[n->id] = n;
        for (int64_t id : watched->order) {
            auto it = by_id.find(id);
            if (it != by_id.end() && it->second->phase == PHASE_FORWARD) st.groups.push_back(it->second);
        }
    } else if (story.has_backward) {   // backward visits the nodes that track gradients, newest first
        for (auto it = st.forward_ops.rbegin(); it != st.forward_ops.rend(); ++it)
            if ((*it)->tracks_grad && (*it)->group == 0) st.groups.push_back(*it);
    } else {
        notes.push_back("no backward pass from " + label_of(root) + " was recorded: only the forward pass is animated; call " + label_of(root) +
                        ":backward() first, or add --backward ({backward = true}) to run it now");
    }
    for (size_t i = 0; i < st.forward_ops.size(); ++i) story.forward_step[st.forward_ops[i]->id] = static_cast<int>(i);
    for (size_t i = 0; i < st.groups.size(); ++i) {
        story.group_step[st.groups[i]->id] = static_cast<int>(i);
        story.gradient_done_step[st.groups[i]->id] = static_cast<int>(i);
    }
    for (size_t i = 0; i < st.groups.size(); ++i)   // a leaf's gradient is whole once the last of its users' rules ran
        for (const Edge& e : st.groups[i]->inputs) {
            const Node* in = e.node();
            if (!in || story.group_step.count(in->id) || !(in->outputs.size() > 0 && in->outputs[0].requires_grad)) continue;
            int& step = story.gradient_done_step.emplace(in->id, static_cast<int>(i)).first->second;
            step = std::max(step, static_cast<int>(i));
        }
    return st;
}

// The collapsed group box that shows node n in the story's view, if any.
const ViewBox* story_group_box(const AnimationStory& story, const Node* n) {
    int box = story.view.box_of(n->id);
    return box >= 0 && story.view.boxes[static_cast<size_t>(box)].kind == BOX_CLUSTER ? &story.view.boxes[static_cast<size_t>(box)] : nullptr;
}

// The first frame: the graph's size and its inputs.
AnimationFrame story_start_frame(const AnimationStory& story, const std::vector<const Node*>& plain, const Node* root,
                                 const StorySteps& st) {
    int64_t inputs = 0;
    AnimationFrame start;
    start.kind = FRAME_START;
    start.node = root->id;
    start.panel.heading = "inputs";
    for (const Node* n : plain)
        if (n->phase == PHASE_FORWARD && !is_computed_op(n)) {
            ++inputs;
            if (start.panel.lines.size() < 12)
                start.panel.lines.push_back(label_of(n) + "  " + shape_text(n->outputs[0].value) +
                                            (n->outputs[0].requires_grad ? "  (parameter)" : ""));
        }
    start.title = "the graph of " + label_of(root) + ": " + std::to_string(st.forward_ops.size()) + " ops on " + std::to_string(inputs) + " inputs" +
                  (story.has_backward ? ", then " + std::to_string(st.groups.size()) + " gradient rules" : "");
    start.where = "forward: values fill in, in the order the ops ran" + std::string(story.has_backward ? "; backward: gradients flow back" : "");
    return start;
}

// The frame of forward op i: its value computed.
AnimationFrame story_forward_frame(const AnimationStory& story, const StorySteps& st, size_t i) {
    const Node* n = st.forward_ops[i];
    AnimationFrame f;
    f.kind = FRAME_FORWARD;
    f.node = n->id;
    f.forward_done = static_cast<int>(i) + 1;
    const ViewBox* group = story_group_box(story, n);
    f.title = "forward " + std::to_string(i + 1) + "/" + std::to_string(st.forward_ops.size()) + "   " + (group ? group->title + ":  " : "") + op_text(n) +
              (label_of(n)[0] == '#' ? "" : "   " + label_of(n));
    f.where = where_text(n);
    f.panel.heading = group && label_of(n)[0] == '#' ? "output of " + group->title : label_of(n);
    f.panel.what = op_text(n) + "   " + shape_text(n->outputs[0].value);
    panel_set_value(f.panel, &n->outputs[0].value, "");
    return f;
}

// The frame of backward group i: the gradient that arrived at its forward node, and the rule that
// ran. The gradient: the watched one, else the one that arrived (complete), else .grad.
AnimationFrame story_backward_frame(const AnimationStory& story, const StorySteps& st, size_t i, const std::string& loss_name,
                                    const AnimateGradients* watched) {
    const Node* n = st.groups[i];
    AnimationFrame f;
    f.kind = FRAME_BACKWARD;
    f.node = n->id;
    f.forward_done = static_cast<int>(st.forward_ops.size());
    f.groups_done = static_cast<int>(i) + 1;
    std::string d = d_over_d(loss_name, label_of(n));
    const ViewBox* group = story_group_box(story, n);
    f.title = "backward " + std::to_string(i + 1) + "/" + std::to_string(st.groups.size()) + "   " + (group ? group->title + ":  " : "") + d +
              "   (the rule of " + op_text(n) + ")";
    f.where = where_text(n);
    f.panel.heading = d;
    f.panel.what = "arrived at " + op_text(n) + "   " + shape_text(n->outputs[0].value);
    const Value* grad = nullptr;
    if (watched) {
        auto it = watched->of_node.find(n->id);
        if (it != watched->of_node.end()) grad = &it->second;
    } else if (const ArrivedGradient* a = arrived_gradient(n, 0); a && a->complete) {
        grad = &a->value;
    } else if (n->outputs[0].grad.defined()) {
        grad = &n->outputs[0].grad.value();
    }
    std::string missing = "value not kept by the backward pass (add --backward to run it with the values kept)";
    panel_set_value(f.panel, grad, missing);
    std::string ran;
    for (const Ref<Node>& b : n->backward_nodes()) ran += (ran.empty() ? "" : ", ") + op_text(b.get());
    f.panel.lines.insert(f.panel.lines.begin(), ran.empty() ? "its rule passes it on unchanged" : "its rule ran " + ran);
    return f;
}

// The last frame: the gradients the leaves got (the first one's values, the others' norms).
AnimationFrame story_done_frame(const StorySteps& st, const Node* root, const std::string& loss_name,
                                const AnimateGradients* watched) {
    AnimationFrame done;
    done.kind = FRAME_DONE;
    done.node = root->id;
    done.forward_done = static_cast<int>(st.forward_ops.size());
    done.groups_done = static_cast<int>(st.groups.size());
    done.title = "done: the gradient of " + loss_name + " reached every input that requires it";
    std::string names;
    for (const Node* n : st.leaves_with_grad) names += (names.empty() ? "" : ", ") + label_of(n) + ".grad";
    done.where = names.empty() ? "" : "accumulated into " + names;
    for (const Node* n : st.leaves_with_grad) {
        const Value* grad = nullptr;
        if (watched) {
            auto it = watched->of_node.find(n->id);
            if (it != watched->of_node.end()) grad = &it->second;
        }
        if (!grad && n->outputs[0].grad.defined()) grad = &n->outputs[0].grad.value();
        if (done.panel.heading.empty()) {
            done.panel.heading = d_over_d(loss_name, label_of(n));
            done.panel.what = label_of(n) + ".grad   " + shape_text(n->outputs[0].value);
            panel_set_value(done.panel, grad, "no gradient");
        } else if (grad && !value_freed(*grad)) {
            char norm[48];
            snprintf(norm, sizeof norm, "%.4g", tensor_stats(grad->device() == DEVICE_CPU ? *grad : value_to_host(*grad)).norm);
            done.panel.lines.push_back(label_of(n) + ".grad " + grad->shape.str() + "  norm " + norm);
        }
    }
    if (done.panel.heading.empty()) done.panel.heading = "no input requires a gradient";
    return done;
}

AnimationStory story_build(const Tensor& loss, const AnimateGradients* watched, std::vector<std::string>& notes) {
    AnimationStory story;
    const Node* root = loss.node.get();
    int64_t pass_first = 0;
    std::vector<const Node*> plain = story_nodes(loss, &pass_first);
    story.records = records_of_nodes(plain);
    StorySteps st = story_steps(story, plain, root, pass_first, watched, notes);

    ViewInput in;
    in.records = &story.records;
    in.measure = animation_measure;
    story.view = view_build(in);
    story.layout = layout_compute(layout_input_from_view(story.view, true));
    if (!story.layout.ok) throw std::runtime_error("the layout failed: " + story.layout.error);

    std::string loss_name = label_of(root);
    story.frames.push_back(story_start_frame(story, plain, root, st));
    for (size_t i = 0; i < st.forward_ops.size(); ++i) frame_add(story, story_forward_frame(story, st, i));
    bool freed = false;
    for (size_t i = 0; i < st.groups.size(); ++i) {
        AnimationFrame f = story_backward_frame(story, st, i, loss_name, watched);
        if (!f.panel.has_value) freed = true;
        frame_add(story, std::move(f));
    }
    if (freed)
        notes.push_back("the backward pass did not keep the gradients' values (only their shapes are shown): add --backward "
                        "({backward = true}) to run " + loss_name + ":backward() with them kept (gradients accumulate into .grad)");
    if (story.has_backward) story.frames.push_back(story_done_frame(st, root, loss_name, watched));
    return story;
}

// ============================================================================================
// [SECTION] GIF

// A frame drawn into a new image surface, which the caller owns (Surface).
typedef std::function<cairo_surface_t*(int index)> FrameRenderer;
struct SurfaceDestroy {
    void operator()(cairo_surface_t* s) const { cairo_surface_destroy(s); }
};
typedef std::unique_ptr<cairo_surface_t, SurfaceDestroy> Surface;

// The palette entry that frames after the first use for pixels that did not change: transparent,
// so the previous frame shows through, and long runs of it compress well.
constexpr int GIF_TRANSPARENT = 255;

// One palette for every frame: median cut (GifQuantizeBuffer) over a sample of all frames' pixels,
// then a table from 15-bit colour to its nearest palette entry.
struct Palette {
    std::vector<GifColorType> colours;
    std::vector<uint8_t> nearest;   // 32768 entries: (r >> 3) << 10 | (g >> 3) << 5 | b >> 3
};

uint32_t pixel_at(const unsigned char* data, int stride, int x, int y) {
    return *reinterpret_cast<const uint32_t*>(data + static_cast<size_t>(y) * stride + static_cast<size_t>(x) * 4);   // cairo's native xRGB
}

Palette palette_make(int count, const FrameRenderer& render, int width, int height) {
    std::vector<GifByteType> r, g, b;
    int step = 2;
    while (static_cast<double>(width / step) * (height / step) * count > 4e6) ++step;
    for (int i = 0; i < count; ++i) {
        Surface frame(render(i));
        cairo_surface_t* s = frame.get();
        const unsigned char* data = cairo_image_surface_get_data(s);
        int stride = cairo_image_surface_get_stride(s);
        for (int y = 0; y < height; y += step)
            for (int x = (y / step) % 2; x < width; x += step) {
                uint32_t p = pixel_at(data, stride, x, y);
                r.push_back(static_cast<GifByteType>(p >> 16));
                g.push_back(static_cast<GifByteType>(p >> 8));
                b.push_back(static_cast<GifByteType>(p));
            }
    }
    int size = GIF_TRANSPARENT;   // entries 0..254; 255 stays for "unchanged" (transparent) pixels
    std::vector<GifByteType> out(r.size());
    Palette palette;
    palette.colours.resize(256);
    if (GifQuantizeBuffer(static_cast<unsigned>(r.size()), 1, &size, r.data(), g.data(), b.data(), out.data(), palette.colours.data()) == GIF_ERROR)
        throw std::runtime_error("giflib could not make a palette for the frames");
    palette.colours.resize(256);   // the unused entries stay, black: a GIF's table is a power of two
    // Median cut averages each box of colours: the frame's flat colours (white, the panels, box
    // fills, text) would come out a shade off. The entry nearest each is set to it exactly.
    const GifColorType exact[] = {{255, 255, 255}, {246, 246, 243}, {198, 226, 255}, {226, 232, 240}, {253, 222, 190},
                                  {255, 196, 0},   {220, 50, 20},   {20, 20, 20},    {95, 95, 95}};
    for (const GifColorType& want : exact) {
        int best = -1, best_d = 24 * 24 * 3;
        for (int i = 0; i < size; ++i) {
            int dr = want.Red - palette.colours[i].Red, dg = want.Green - palette.colours[i].Green, db = want.Blue - palette.colours[i].Blue;
            if (dr * dr + dg * dg + db * db < best_d) best_d = dr * dr + dg * dg + db * db, best = i;
        }
        if (best >= 0) palette.colours[static_cast<size_t>(best)] = want;
    }
    palette.nearest.resize(32768);
    for (int c = 0; c < 32768; ++c) {
        int cr = ((c >> 10) & 31) * 8 + 4, cg = ((c >> 5) & 31) * 8 + 4, cb = (c & 31) * 8 + 4;
        int best = 0, best_d = INT32_MAX;
        for (int i = 0; i < size; ++i) {
            int dr = cr - palette.colours[i].Red, dg = cg - palette.colours[i].Green, db = cb - palette.colours[i].Blue;
            int d = 3 * dr * dr + 4 * dg * dg + 2 * db * db;
            if (d < best_d) best_d = d, best = i;
        }
        palette.nearest[static_cast<size_t>(c)] = static_cast<uint8_t>(best);
    }
    return palette;
}

std::vector<uint8_t> frame_indices(cairo_surface_t* s, const Palette& palette, int width, int height) {
    std::vector<uint8_t> out(static_cast<size_t>(width) * height);
    const unsigned char* data = cairo_image_surface_get_data(s);
    int stride = cairo_image_surface_get_stride(s);
    for (int y = 0; y < height; ++y)
        for (int x = 0; x < width; ++x) {
            uint32_t p = pixel_at(data, stride, x, y);
            unsigned key = ((p >> 19) & 31) << 10 | ((p >> 11) & 31) << 5 | ((p >> 3) & 31);
            out[static_cast<size_t>(y) * width + x] = palette.nearest[key];
        }
    return out;
}

struct GifCloser {
    GifFileType* gif;
    ~GifCloser() {
        if (gif) EGifCloseFile(gif, nullptr);
    }
};

// Writes the frames: full first frame, then each frame's rectangle that changed (disposal: keep),
// a Graphics Control Extension with its delay before each, and NETSCAPE2.0 looping forever.
// Frames are drawn twice (for the palette, then to encode them), one at a time: memory stays one
// frame and two index buffers whatever their number.
void gif_write(const std::string& path, int count, const FrameRenderer& render, const std::vector<int>& delays_ms, int width,
               int height) {
    Palette palette = palette_make(count, render, width, height);
    int error = 0;
    std::string bytes;   // the GIF in memory, then written whole or not at all (file_whole.h)
    auto append = [](GifFileType* file, const GifByteType* data, int length) {
        static_cast<std::string*>(file->UserData)->append(reinterpret_cast<const char*>(data), static_cast<size_t>(length));
        return length;
    };
    GifFileType* gif = EGifOpen(&bytes, append, &error);
    if (!gif) throw std::runtime_error("cannot write " + path + ": " + GifErrorString(error));
    GifCloser closer{gif};
    auto check = [&](int rc, const char* what) {
        if (rc == GIF_ERROR) throw std::runtime_error(std::string("writing ") + path + " failed (" + what + "): " + GifErrorString(gif->Error));
    };
    EGifSetGifVersion(gif, true);
    ColorMapObject* map = GifMakeMapObject(256, palette.colours.data());
    int rc = EGifPutScreenDesc(gif, width, height, 8, 0, map);
    GifFreeMapObject(map);
    check(rc, "screen");
    check(EGifPutExtensionLeader(gif, APPLICATION_EXT_FUNC_CODE), "loop");
    check(EGifPutExtensionBlock(gif, 11, "NETSCAPE2.0"), "loop");
    const unsigned char loop[3] = {1, 0, 0};   // sub-block 1: loop count 0, forever
    check(EGifPutExtensionBlock(gif, 3, loop), "loop");
    check(EGifPutExtensionTrailer(gif), "loop");
    std::vector<uint8_t> previous;
    for (int i = 0; i < count; ++i) {
        std::vector<uint8_t> now = frame_indices(Surface(render(i)).get(), palette, width, height);
        int x0 = 0, y0 = 0, x1 = width - 1, y1 = height - 1;
        if (!previous.empty()) {   // the rectangle that changed; one pixel when none did
            x0 = width, y0 = height, x1 = -1, y1 = -1;
            for (int y = 0; y < height; ++y)
                for (int x = 0; x < width; ++x)
                    if (now[static_cast<size_t>(y) * width + x] != previous[static_cast<size_t>(y) * width + x]) {
                        x0 = std::min(x0, x), x1 = std::max(x1, x), y0 = std::min(y0, y), y1 = std::max(y1, y);
                    }
            if (x1 < 0) x0 = y0 = x1 = y1 = 0;
        }
        GraphicsControlBlock gcb;
        gcb.DisposalMode = DISPOSE_DO_NOT;
        gcb.UserInputFlag = false;
        gcb.DelayTime = (delays_ms[static_cast<size_t>(i)] + 5) / 10;
        gcb.TransparentColor = previous.empty() ? NO_TRANSPARENT_COLOR : GIF_TRANSPARENT;
        GifByteType extension[4];
        EGifGCBToExtension(&gcb, extension);
        check(EGifPutExtension(gif, GRAPHICS_EXT_FUNC_CODE, 4, extension), "delay");
        int w = x1 - x0 + 1, h = y1 - y0 + 1;
        check(EGifPutImageDesc(gif, x0, y0, w, h, false, nullptr), "image");
        std::vector<GifPixelType> line(static_cast<size_t>(w));
        for (int y = y0; y <= y1; ++y) {
            const uint8_t* row = now.data() + static_cast<size_t>(y) * width + x0;
            const uint8_t* before = previous.empty() ? nullptr : previous.data() + static_cast<size_t>(y) * width + x0;
            for (int x = 0; x < w; ++x) line[static_cast<size_t>(x)] = before && before[x] == row[x] ? GIF_TRANSPARENT : row[x];
            check(EGifPutLine(gif, line.data(), w), "pixels");
        }
        previous.swap(now);
    }
    closer.gif = nullptr;
    if (EGifCloseFile(gif, &error) == GIF_ERROR) throw std::runtime_error("writing " + path + " failed: " + GifErrorString(error));
    td::file_write_whole(path, bytes, nullptr);
}

// ============================================================================================
// [SECTION] write

bool is_directory(const std::string& path) {
    struct stat st;
    return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool ends_with(const std::string& s, const std::string& tail) {
    return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

}  // namespace

AnimateResult animate_write(const Tensor& loss, const std::string& path, const AnimateOptions& options,
                            const AnimateGradients* watched) {
    if (!loss.defined()) throw std::runtime_error("no tensor given");
    if (options.width < 320 || options.height < 180 || options.width > 3840 || options.height > 2160)
        throw std::runtime_error("size " + std::to_string(options.width) + "x" + std::to_string(options.height) +
                                 " is outside 320x180 .. 3840x2160 (1280x720 and 1920x1080 suit slides)");
    if (options.delay_ms < 20 || options.delay_ms > 60000)
        throw std::runtime_error("delay " + std::to_string(options.delay_ms) + " ms is outside 20 .. 60000");
    bool gif = ends_with(path, ".gif") || ends_with(path, ".GIF");
    if (path.empty()) throw std::runtime_error("no file name (out.gif, or a directory for PNG frames)");
    if (!gif && !is_directory(path) && mkdir(path.c_str(), 0777) != 0)
        throw std::runtime_error("cannot make the directory " + path + " for the PNG frames: " + strerror(errno) +
                                 " (give out.gif for a GIF)");

    AnimateResult result;
    AnimationStory story = story_build(loss, watched, result.notes);
    double label_px = animation_label_px(story, options.width, options.height);
    if (label_px < ANIMATE_LABEL_MIN_PX) {
        char text[240];
        snprintf(text, sizeof text, "the whole graph fits the frame only with labels %.1f px high: the frames zoom in on the node computed, "
                 "the first and the last show the whole graph", label_px * options.height / 720.0);
        result.notes.push_back(text);
    }
    int n = static_cast<int>(story.frames.size());
    FrameRenderer render = [&](int i) {
        cairo_surface_t* s = cairo_image_surface_create(CAIRO_FORMAT_RGB24, options.width, options.height);
        cairo_t* cr = cairo_create(s);
        animation_render(story, i, cr, options.width, options.height);
        cairo_destroy(cr);
        cairo_surface_flush(s);
        return s;
    };
    std::vector<int> delays;
    for (int i = 0; i < n; ++i) delays.push_back(i == 0 || i == n - 1 ? 3 * options.delay_ms : options.delay_ms);
    if (gif) {
        gif_write(path, n, render, delays, options.width, options.height);
    } else {
        for (int i = 0; i < n; ++i) {
            char name[32];
            snprintf(name, sizeof name, "frame_%04d.png", i + 1);
            std::string file = path + (ends_with(path, "/") ? "" : "/") + name;
            std::string bytes;   // in memory, then written whole or not at all (file_whole.h)
            auto append = [](void* out, const unsigned char* data, unsigned int length) {
                static_cast<std::string*>(out)->append(reinterpret_cast<const char*>(data), length);
                return CAIRO_STATUS_SUCCESS;
            };
            cairo_status_t st = cairo_surface_write_to_png_stream(Surface(render(i)).get(), append, &bytes);
            if (st != CAIRO_STATUS_SUCCESS) throw std::runtime_error("cannot write " + file + ": " + cairo_status_to_string(st));
            td::file_write_whole(file, bytes, nullptr);
        }
    }
    result.frames = n;
    const char* const kinds[] = {"start", "forward", "backward", "done"};
    for (const AnimationFrame& f : story.frames) {
        const TensorStats& st = f.panel.stats;
        result.frame_list.push_back({kinds[f.kind], f.node, f.title, f.panel.heading, f.panel.has_value, st.min, st.max, st.mean, st.norm});
    }
    result.width = options.width;
    result.height = options.height;
    for (int d : delays) result.seconds += (d + 5) / 10 * 0.01;
    return result;
}

GifInfo gif_info(const std::string& path) {
    int error = 0;
    GifFileType* gif = DGifOpenFileName(path.c_str(), &error);
    if (!gif) throw std::runtime_error("cannot read " + path + ": " + GifErrorString(error));
    if (DGifSlurp(gif) == GIF_ERROR) {
        std::string message = GifErrorString(gif->Error);
        DGifCloseFile(gif, nullptr);
        throw std::runtime_error(path + " is no readable GIF: " + message);
    }
    GifInfo info;
    info.width = gif->SWidth;
    info.height = gif->SHeight;
    info.frames = gif->ImageCount;
    auto look_for_loop = [&](const ExtensionBlock* blocks, int count) {
        for (int i = 0; i + 1 < count; ++i)
            if (blocks[i].Function == APPLICATION_EXT_FUNC_CODE && blocks[i].ByteCount == 11 &&
                memcmp(blocks[i].Bytes, "NETSCAPE2.0", 11) == 0 && blocks[i + 1].ByteCount >= 3 && blocks[i + 1].Bytes[0] == 1) {
                info.loops = true;
                info.loop_count = blocks[i + 1].Bytes[1] | blocks[i + 1].Bytes[2] << 8;
            }
    };
    look_for_loop(gif->ExtensionBlocks, gif->ExtensionBlockCount);
    for (int i = 0; i < gif->ImageCount; ++i) {
        const SavedImage& image = gif->SavedImages[i];
        look_for_loop(image.ExtensionBlocks, image.ExtensionBlockCount);
        GraphicsControlBlock gcb;
        info.delays_ms.push_back(DGifSavedExtensionToGCB(gif, i, &gcb) == GIF_OK ? gcb.DelayTime * 10 : 0);
        info.changed_pixels.push_back(image.ImageDesc.Width * image.ImageDesc.Height);
    }
    DGifCloseFile(gif, nullptr);
    return info;
}

// ============================================================================================
// [SECTION] backward watch

namespace {

void watch_observer(Node* node, HookEvent event, void* user) {
    if (event != HOOK_GROUP_DONE) return;
    const BackwardPass* pass = engine_backward_pass();
    AnimateGradients* g = static_cast<AnimateGradients*>(user);
    g->order.push_back(node->id);
    if (pass && pass->group.grad_outputs && pass->group.grad_outputs[0].defined())
        g->of_node[node->id] = pass->group.grad_outputs[0].value();
}

}  // namespace

AnimateBackwardWatch::AnimateBackwardWatch() {
    handle_ = engine_observe(watch_observer, &gradients, hook_bit(HOOK_GROUP_DONE), OBSERVER_LOOKS);
}

AnimateBackwardWatch::~AnimateBackwardWatch() {
    if (handle_ >= 0) engine_unobserve(handle_);
}

void AnimateBackwardWatch::finish(const Tensor& loss) {
    // The leaves have no rule: what arrived at them (noted while an observer looks at values).
    for (const Ref<Node>& n : graph_collect(loss)) {
        if (n->phase != PHASE_FORWARD || gradients.of_node.count(n->id)) continue;
        const ArrivedGradient* a = arrived_gradient(n.get(), 0);
        if (a && a->complete && !value_freed(a->value)) gradients.of_node[n->id] = a->value;
    }
    engine_unobserve(handle_);
    handle_ = -1;
}

}  // namespace td
