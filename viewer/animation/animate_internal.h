// animate_internal.h: what animate.cpp (the story: which frames show what) hands to
// animate_render.cpp (one frame drawn with cairo). Plain values: no engine pointers.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "layout.h"
#include "model.h"
#include "tensor_stats.h"

typedef struct _cairo cairo_t;

namespace td {

// A tensor's values, sampled to at most ANIMATE_GRID_MOST cells a side, for a heatmap.
constexpr int ANIMATE_GRID_MOST = 48;
struct AnimationGrid {
    int rows = 0, cols = 0;
    std::vector<double> values;   // row-major
    double lo = 0, hi = 0;        // the colour scale (heat_colour)
};

// The panel at the right of a frame: the value or gradient of the node being computed.
struct AnimationPanel {
    std::string heading;          // "next_h", "d loss / d next_h"
    std::string what;             // "#9 tanh  [20,1]"
    std::string note;             // said instead of the values (freed, none)
    bool has_value = false;       // stats (and a grid or a scalar) are there
    bool scalar = false;
    double scalar_value = 0;
    TensorStats stats;
    AnimationGrid grid;
    std::vector<std::string> lines;   // more text under it (the start's inputs, the end's .grads)
};

enum AnimationFrameKind : uint8_t { FRAME_START, FRAME_FORWARD, FRAME_BACKWARD, FRAME_DONE };

struct AnimationFrame {
    AnimationFrameKind kind = FRAME_START;
    int64_t node = 0;             // the forward node computed, or whose gradient rule ran
    int forward_done = 0;         // forward ops computed, this frame's included
    int groups_done = 0;          // backward groups run, this frame's included
    std::string title;            // "forward 3/6   #9 tanh   next_h"
    std::string where;            // "rnn_cell.lua:17   next_h = (h2h + i2h):tanh()"
    AnimationPanel panel;
};

struct AnimationStory {
    std::vector<NodeRecord> records;
    GraphView view;
    LayoutResult layout;
    std::unordered_map<int64_t, int> forward_step;   // forward op id -> its index in record order
    std::unordered_map<int64_t, int> group_step;     // forward node id -> index of its backward group
    std::unordered_map<int64_t, int> gradient_done_step;   // forward node id -> the group after which its
                                                     // gradient is whole: its own (an op), or its last
                                                     // user's (a leaf, whose .grad is written then)
    bool has_backward = false;
    std::vector<AnimationFrame> frames;
};

// Width and height of a label line at the graph's own text size (layout units), as cairo draws it.
void animation_measure(const std::string& text, float* width, float* height);
// Labels smaller than this (pixels at 720 pixels high) are not legible: frames then follow the
// node computed, zoomed in.
constexpr double ANIMATE_LABEL_MIN_PX = 8.5;
// Draw frame `index` of `story` into `cr` (width x height pixels).
void animation_render(const AnimationStory& story, int index, cairo_t* cr, int width, int height);
// The text height of the graph's labels when the whole graph fits the frame, in pixels at 720
// pixels high (legibility: compare with ANIMATE_LABEL_MIN_PX).
double animation_label_px(const AnimationStory& story, int width, int height);

}  // namespace td
