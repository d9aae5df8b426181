// animate.h: backprop as an animation (`:animate loss out.gif`, viewer.animate). The loss's graph
// is laid out once (the viewer's model and Graphviz layout, model.h / layout.h), then drawn frame
// by frame with cairo, headless: the forward values filling in node by node in record order, then
// the backward pass group by group in the order it ran, the node being computed highlighted with
// its value or gradient. Written as a GIF (giflib: one global palette, a delay per frame, looping)
// or as a PNG sequence (cairo). No window and no display needed: built in every tapedeck.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "model.h"

struct lua_State;

namespace td {

struct AnimateOptions {
    int width = 1280, height = 720;   // pixels of every frame (16:9 for slides)
    int delay_ms = 900;               // per frame; the first and the last frame stay 3x as long
    bool run_backward = false;        // run loss:backward() first (the callers: through Lua), under an
                                      // AnimateBackwardWatch
};

// The gradients of one backward pass, noted while it ran (AnimateBackwardWatch): the groups in the
// order they ran (forward node ids) and d loss / d node for each node reached, leaves included.
struct AnimateGradients {
    std::vector<int64_t> order;
    std::unordered_map<int64_t, Value> of_node;
};

// Watches the backward passes run while it lives: an observer that looks at values, so the pass
// keeps every gradient (engine_values_watched) and its backward graph. Construct it, run
// loss:backward(), call finish(loss), then animate_write(..., &watch.gradients).
class AnimateBackwardWatch {
public:
    AnimateBackwardWatch();
    ~AnimateBackwardWatch();
    AnimateBackwardWatch(const AnimateBackwardWatch&) = delete;
    AnimateBackwardWatch& operator=(const AnimateBackwardWatch&) = delete;
    void finish(const Tensor& loss);   // notes what arrived at the leaves, stops watching
    AnimateGradients gradients;

private:
    int handle_ = -1;
};

struct AnimateResult {
    int frames = 0;
    int width = 0, height = 0;
    double seconds = 0;               // the GIF's playing time (the PNG sequence's at the same delays)
    std::vector<std::string> notes;   // what the user should know (no backward pass, values freed)
    struct Frame {
        const char* kind;             // "start", "forward", "backward", "done"
        int64_t node;                 // the forward node computed, or whose gradient rule ran (start, done: the loss)
        std::string title;
        std::string heading;          // the panel's: "next_h", "d loss / d next_h", "d loss / d W_h"
        bool has_value = false;       // the panel shows the value's numbers (kept, not freed):
        double min = 0, max = 0, mean = 0, norm = 0;   // over its finite elements (tensor_stats)
    };
    std::vector<Frame> frame_list;
};

// Animate the graph of `loss` into `path`: a GIF when it ends in .gif, else a directory that gets
// frame_0001.png, ... (made when missing). Frames: the graph with only its inputs known, one per
// forward op (record order), one per backward group (the forward node whose gradient rule ran,
// in the order the pass ran them), and the end (every gradient done). Throws std::runtime_error
// with a message naming :animate on bad input (a leaf, more than ANIMATE_MOST_NODES nodes, a bad
// size, a path that cannot be written).
// `watched`: the gradients of a pass run under an AnimateBackwardWatch (else the recorded pass is
// animated with the gradient values it kept, if any).
AnimateResult animate_write(const Tensor& loss, const std::string& path, const AnimateOptions& options,
                            const AnimateGradients* watched = nullptr);
constexpr int ANIMATE_MOST_NODES = 400;   // forward + backward nodes of the loss's graph

// What a GIF holds, read back with giflib (DGifSlurp): for tests and for users checking a file.
struct GifInfo {
    int width = 0, height = 0, frames = 0;
    bool loops = false;               // a NETSCAPE2.0 application extension (loop count 0: forever)
    int loop_count = -1;
    std::vector<int> delays_ms;       // per frame (Graphics Control Extension)
    std::vector<int> changed_pixels;  // per frame: the pixels of its image rectangle (the part redrawn)
};
GifInfo gif_info(const std::string& path);   // throws std::runtime_error when it is no readable GIF

// Adds viewer.animate(loss, path [, {size = {w, h}, delay = ms, backward = bool}]) and
// viewer.gif_info(path) to the `viewer` table on top of the stack (viewer_lua.cpp and
// viewer_off.cpp both call it).
void animate_open_lua(lua_State* L);

// The :animate command: `EXPR out.gif [--size WxH] [--delay MS] [--backward]`, or `EXPR dir/`.
// Prints what it wrote, or a one-line error naming :animate.
void animate_command(lua_State* L, const std::string& args);

}  // namespace td
