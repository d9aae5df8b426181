// layout.h: box positions and edge curves from Graphviz's dot (libgvc), off the drawing path.
//
// The Lua thread turns a GraphView into a LayoutInput (plain values: keys, sizes, edges) and hands
// it to the LayoutWorker; the worker thread runs dot on it and hands back a LayoutResult keyed by
// box key, so a result made for an older view still places the boxes the new view shares with it.
// Forward and backward boxes are laid out as two graphs (edges joining them never reach dot: they
// make it explode, docs/performance.md) and placed side by side: forward ranks top to bottom, the
// backward pass to the right, its ranks bottom to top (the gradient of each node at about its
// height) or top to bottom.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "model.h"

namespace td {

struct LayoutInput {
    struct Box {
        std::string key;
        float width = 0, height = 0;
        Phase phase = PHASE_FORWARD;
        int frame = -1;   // index into frames, or -1
        bool in_scope = false;   // GraphView::in_scope: the model's scope of the loss's picture
    };
    struct Edge {
        int from = 0, to = 0;
    };
    struct Frame {   // an expanded group: a dot cluster with a title
        std::string key, title;
        int parent = -1;   // the frame it is drawn inside (an open module inside an open model), or -1
    };
    std::vector<Box> boxes;
    std::vector<Edge> edges;   // same-phase edges only
    std::vector<Frame> frames;
    bool backward_up = true;
    uint64_t signature = 0;    // equal signatures: the same layout
};

struct LayoutPoint {
    float x = 0, y = 0;
};

struct LayoutRect {   // layout units, y grows downwards
    float x0 = 0, y0 = 0, x1 = 0, y1 = 0;
};

struct LayoutEdgePath {
    std::vector<LayoutPoint> bezier;   // cubic: p0, (c1, c2, p)...; 3k+1 points
    LayoutPoint tip;                   // where the arrow head points (the head box's border)
    LayoutRect bounds;
};

struct LayoutResult {
    bool ok = false;
    std::string error;
    uint64_t signature = 0;
    double seconds = 0;                // time dot took (both graphs)
    int box_count = 0, edge_count = 0;
    std::unordered_map<std::string, LayoutRect> boxes;          // box key -> its rectangle
    std::unordered_map<std::string, LayoutEdgePath> edges;      // "from key>to key" -> curve
    std::unordered_map<std::string, LayoutRect> frames;         // cluster key -> its frame
    LayoutRect bounds;
};

// The layout input of a view (sizes, same-phase edges, expanded groups as frames).
LayoutInput layout_input_from_view(const GraphView& view, bool backward_up);
std::string layout_edge_key(const std::string& from, const std::string& to);

// Run dot now, on this thread. Holds graphviz_mutex() while Graphviz runs. Left to right: the
// forward boxes outside the model's scope (data preparation, the optimizer's step, an evaluation
// after training), the forward boxes of the scope (with their direct inputs and the ops drawn in
// a frame with them), the backward pass: the scope's forward and backward parts lie next to each
// other. An edge from one part to another is drawn straight, not by dot. With no scope, the
// forward pass and the backward pass.
LayoutResult layout_compute(const LayoutInput& input);

// One worker thread that lays out the latest request; older pending requests are dropped.
class LayoutWorker {
public:
    LayoutWorker() = default;
    ~LayoutWorker();
    LayoutWorker(const LayoutWorker&) = delete;
    LayoutWorker& operator=(const LayoutWorker&) = delete;

    void request(LayoutInput input);      // starts the thread on first use
    bool take_result(LayoutResult* out);  // true once per finished layout
    bool busy();                          // a request is pending or running
    void stop();                          // waits for the running layout, ends the thread

private:
    void run();

    std::thread thread_;
    std::mutex mutex_;
    std::condition_variable wake_;
    bool has_request_ = false, running_ = false, has_result_ = false, stopping_ = false;
    LayoutInput request_;
    LayoutResult result_;
};

}  // namespace td
