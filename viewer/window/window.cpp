// window.cpp: the viewer's GLFW window and frame loop, the model kept up to date with the tape,
// screenshots, and the functions of viewer.h.
//
// [SECTION] state        the one ViewerState; selection and groups
// [SECTION] engine       the node hook: started/finished nodes, the retained history
// [SECTION] model        records -> view -> layout request -> placement, once per tape change
// [SECTION] window       GLFW + Dear ImGui + OpenGL 3 setup and teardown
// [SECTION] frame        one frame: four windows, capture, swap
// [SECTION] api          viewer.h
// [SECTION] scripts      what the `viewer` Lua table calls
#include <GLFW/glfw3.h>
#include <backends/imgui_impl_glfw.h>
#include <backends/imgui_impl_opengl3.h>
#include <stb_image_write.h>
#include <unistd.h>

#include <algorithm>
#include <cfloat>
#include <cstdio>
#include <thread>

#include "file_whole.h"
#include "viewer_internal.h"

namespace td {

using Clock = std::chrono::steady_clock;

static double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// ============================================================================================
// [SECTION] state

// Immortal (made on first use, never destroyed): exit() may be called with a frame on the stack,
// and the retained nodes must not be destroyed under it. lua_close shuts the viewer down in order
// (viewer_shutdown): the window, the worker thread and the retained history go there.
ViewerState& viewer_state() {
    static ViewerState* state = new ViewerState;
    return *state;
}

void viewer_select(int64_t node_id, bool scroll) {
    ViewerState& s = viewer_state();
    s.selection.node = node_id;
    s.selection.scroll_to = scroll;
    // Not drawn (the view is capped, or the node is outside the loss's picture): a view that shows it.
    if (node_id != 0 && s.model.view.box_of(node_id) < 0) s.model.view_dirty = true;
    // Outside the tape window: the window moves to it, and stays there until moved again.
    if (node_id != 0 && !s.tape.span.covers(node_id) && !record_find(s.model.records, node_id)) {
        s.tape.centre = node_id;
        s.tape.at_stop = false;
    }
    s.app.force_frames = std::max(s.app.force_frames, 2);
}

Node* viewer_node(ViewerState& s, int64_t id) {
    if (id <= 0 || s.tape.nodes_gone.count(id)) return nullptr;
    auto held = s.tape.nodes_held.find(id);
    if (held != s.tape.nodes_held.end()) {
        if (held->second->refcount > 1) return held->second.get();
        s.tape.nodes_held.erase(held);   // only the viewer held it: it goes, as it would have
        s.tape.nodes_gone.insert(id);
        return nullptr;
    }
    Node* n = tape_find(id);
    if (!n) {
        s.tape.nodes_gone.insert(id);
        return nullptr;
    }
    if (s.tape.nodes_held.size() >= 8) s.tape.nodes_held.clear();
    s.tape.nodes_held.emplace(id, Ref<Node>(n));
    return n;
}

void viewer_set_expanded(const std::string& cluster_key, bool expanded) {
    ViewerState& s = viewer_state();
    s.model.user_expanded[cluster_key] = expanded;
    s.model.view_dirty = true;
}

void viewer_defer(std::function<void()> action) { viewer_state().app.deferred.push_back(std::move(action)); }

void viewer_note_item(const std::string& label) {
    ImVec2 a = ImGui::GetItemRectMin(), b = ImGui::GetItemRectMax();
    viewer_state().input.item_rects[label] = LayoutRect{a.x, a.y, b.x, b.y};
}

void viewer_invalidate() {
    ViewerState& s = viewer_state();
    s.model.view_dirty = true;
    s.app.force_frames = std::max(s.app.force_frames, 2);
}

// An op breakpoint marks the forward nodes of that op (phase forward or both) and, in the
// backward pass, the nodes of their gradient groups (phase backward or both).
bool viewer_breakpoint_on_node(const ViewerState& s, const NodeRecord& r) {
    const NodeRecord* forward = r.phase == PHASE_BACKWARD ? record_find(s.model.records, r.group) : &r;
    for (const ViewerBreakpoint& b : s.stop.breakpoints) {
        if (b.node_id > 0 && b.node_id == r.id) return true;
        if (!b.op.empty() && forward && (b.phase < 0 || b.phase == static_cast<int>(r.phase))) {
            const std::string& op = forward->op;
            size_t paren = op.find('(');
            if (op.compare(0, paren, b.op) == 0 && (paren == std::string::npos ? op.size() : paren) == b.op.size())
                return true;
        }
    }
    return false;
}

bool viewer_breakpoint_on_line(const ViewerState& s, const std::string& file, int line) {
    for (const ViewerBreakpoint& b : s.stop.breakpoints)
        if (!b.file.empty() && b.line == line && b.file == file) return true;
    return false;
}

std::string viewer_stop_text(const ViewerState& s) {
    if (s.stop.node == 0 && s.stop.line > 0) {
        size_t slash = s.stop.file.find_last_of('/');
        return "stopped at line " + s.stop.file.substr(slash == std::string::npos ? 0 : slash + 1) + ":" +
               std::to_string(s.stop.line);
    }
    if (s.stop.node == 0) return "";
    const NodeRecord* r = record_find(s.model.records, s.stop.node);
    std::string text = (s.stop.has_run ? "stopped after #" : "stopped before #") + std::to_string(s.stop.node);
    if (r) {
        text += " " + r->op;
        if (r->phase == PHASE_BACKWARD) text += " (backward of #" + std::to_string(r->group) + ")";
        else if (s.stop.backward) text += " (its gradients, passed on unchanged)";
        text += "  " + source_loc_str(r->where);
    } else {
        text += s.stop.backward ? " (backward)" : " (forward)";
    }
    return text;
}

// ============================================================================================
// [SECTION] engine

static void on_node_event(Node* node, HookEvent event, void*) {
    ViewerState& s = viewer_state();
    if (event == HOOK_BEFORE) {
        if (s.app.window) {
            s.engine.running.insert(node->id);
            s.engine.history.emplace_back(node);
            while (s.engine.history.size() > s.engine.history_cap) s.engine.history.pop_front();
        }
        if (s.engine.node_callback) s.engine.node_callback(node, event);
        return;
    }
    if (s.app.window) s.engine.running.erase(node->id);
    if (s.engine.node_callback) s.engine.node_callback(node, event);
    // While a script runs, show the graph growing: a frame now and then (~30 a second).
    if (s.app.window && !s.app.in_frame && seconds_since(s.app.last_live_frame) > 0.033) {
        s.app.last_live_frame = Clock::now();
        s.engine.live = true;
        viewer_frame();
        s.engine.live = false;
    }
}

// The hook is subscribed while the window is open or a script watches nodes.
static void observer_sync(ViewerState& s) {
    bool wanted = s.app.window || s.engine.node_callback;
    if (wanted && !s.engine.observer) s.engine.observer = engine_observe(on_node_event, nullptr);
    if (!wanted && s.engine.observer) {
        engine_unobserve(s.engine.observer);
        s.engine.observer = 0;
    }
}

// ============================================================================================
// [SECTION] model

static TextMeasure measure_for(const ViewerState& s) {
    if (!s.app.graph_font) return text_measure_estimate;
    ImFont* font = s.app.graph_font;
    return [font](const std::string& text, float* width, float* height) {
        ImVec2 size = font->CalcTextSizeA(GRAPH_FONT_SIZE, FLT_MAX, 0.0f, text.c_str());
        *width = size.x;
        *height = GRAPH_FONT_SIZE + 1.0f;
    };
}

static GraphView build_view(const ViewerState& s, const std::vector<NodeRecord>& records) {
    ViewInput in;
    in.records = &records;
    in.options = s.model.options;
    in.user_expanded = s.model.user_expanded;
    in.stop_node = s.stop.node;
    in.focus_node = s.selection.node;
    in.window_first = s.tape.span.nodes < s.tape.span.live ? s.tape.span.first : 0;
    in.measure = measure_for(s);
    if (s.plan.model) {   // the pass-by-pass mode: the whole recorded graph, no groups (window_plan.cpp)
        in.options.loss_graph = in.options.collapse_loops = in.options.collapse_lines = false;
        in.options.collapse_backward = false;
        in.window_first = 0;
    }
    GraphView view = view_build(in);
    if (s.plan.model) plan_view_decorate(view, *s.plan.model, in.measure);
    return view;
}

// Boxes the layout has not placed yet go below an input that is placed (the graph grows
// downwards), or in a column right of everything.
static void placement_compute(ViewerState& s) {
    const GraphView& v = s.model.view;
    Placement& p = s.layout.placement;
    size_t n = v.boxes.size();
    p.rects.assign(n, LayoutRect{});
    p.provisional.assign(n, true);
    p.paths.assign(v.edges.size(), nullptr);
    bool any = false;
    LayoutRect bounds{};
    auto grow = [&](const LayoutRect& r) {
        if (!any) bounds = r;
        bounds.x0 = std::min(bounds.x0, r.x0);
        bounds.y0 = std::min(bounds.y0, r.y0);
        bounds.x1 = std::max(bounds.x1, r.x1);
        bounds.y1 = std::max(bounds.y1, r.y1);
        any = true;
    };
    for (size_t i = 0; i < n; ++i) {
        auto it = s.layout.result.boxes.find(v.boxes[i].key);
        if (it == s.layout.result.boxes.end()) continue;
        p.rects[i] = it->second;
        p.provisional[i] = false;
        grow(it->second);
    }
    std::vector<int> first_input(n, -1), first_use(n, -1);
    for (const ViewEdge& e : v.edges) {
        if (e.cross) continue;
        if (first_input[e.to] < 0) first_input[e.to] = e.from;
        if (first_use[e.from] < 0) first_use[e.from] = e.to;
    }
    std::unordered_map<int, float> next_x;   // parent box -> x where its next new child goes
    float column_y = any ? bounds.y0 : 0;
    float column_x = any ? bounds.x1 + 40 : 0;
    for (size_t i = 0; i < n; ++i) {
        if (!p.provisional[i]) continue;
        const ViewBox& b = v.boxes[i];
        int parent = first_input[i];
        if (parent >= 0 && static_cast<size_t>(parent) < i) {
            const LayoutRect& pr = p.rects[parent];
            float x = next_x.count(parent) ? next_x[parent] : (pr.x0 + pr.x1) * 0.5f - b.width * 0.5f;
            float y = pr.y1 + 28;
            if (b.phase == PHASE_BACKWARD && s.model.backward_up) y = pr.y0 - 28 - b.height;
            p.rects[i] = {x, y, x + b.width, y + b.height};
            next_x[parent] = x + b.width + 12;
        } else {
            p.rects[i] = {column_x, column_y, column_x + b.width, column_y + b.height};
            column_y += b.height + 14;
        }
        grow(p.rects[i]);
    }
    // Ghosts and inputs placed after their consumers: just above the consumer.
    for (size_t i = 0; i < n; ++i) {
        if (!p.provisional[i] || first_input[i] >= 0) continue;
        int user = first_use[i];
        if (user < 0 || !p.provisional[i]) continue;
        const LayoutRect& ur = p.rects[user];
        const ViewBox& b = v.boxes[i];
        float x = (ur.x0 + ur.x1) * 0.5f - b.width * 0.5f;
        p.rects[i] = {x, ur.y0 - 28 - b.height, x + b.width, ur.y0 - 28};
        grow(p.rects[i]);
    }
    for (size_t i = 0; i < v.edges.size(); ++i) {
        const ViewEdge& e = v.edges[i];
        if (e.cross || p.provisional[e.from] || p.provisional[e.to]) continue;
        auto it = s.layout.result.edges.find(layout_edge_key(v.boxes[e.from].key, v.boxes[e.to].key));
        if (it != s.layout.result.edges.end()) p.paths[i] = &it->second;
    }
    p.bounds = bounds;
}

const double LIVE_UPDATE_INTERVAL = 0.25;   // seconds between model updates while a script runs

// The window's first node for a window of `size` nodes centred on node `centre` (or on the first
// live node after it); null when that window reaches the newest node (it follows the newest then).
// O(nodes newer than `centre`), once per move, never per frame.
static Node* window_anchor_for(int64_t centre, size_t size) {
    Node* n = tape_last();
    size_t newer = 0;
    while (n && n->tape_prev && n->tape_prev->id >= centre) {
        n = n->tape_prev;
        ++newer;
    }
    if (!n || newer < size - size / 2) return nullptr;
    for (size_t older = 0; older < size / 2 && n->tape_prev; ++older) n = n->tape_prev;
    return n;
}

// Move the window where it was asked to go (window_centre).
static void window_apply_move(ViewerState& s) {
    if (!s.tape.centre) return;
    s.tape.anchor = Ref<Node>(window_anchor_for(s.tape.centre, s.tape.size));
    s.tape.centre = 0;
    s.tape.moved = true;
}

// Records: the nodes of the tape window, copied again when the tape changed, the window moved, or
// (once a second) the script's names may have changed. O(window) each time, whatever the tape's
// length (the whole tape while it has at most window_above live nodes).
static bool records_refresh(ViewerState& s) {
    // While a script records nodes, the view follows the tape at most 4 times a second: frames in
    // between only draw (records and view of a 1,000-node window take 2-5 ms, of a 50,000-node
    // tape copied whole, tens of ms).
    if (s.plan.model) return plan_records_refresh(s);
    if (s.engine.live && seconds_since(s.app.last_live_update) < LIVE_UPDATE_INTERVAL) return false;
    if (s.engine.live) s.app.last_live_update = Clock::now();
    window_apply_move(s);
    bool tape_changed = tape_version() != s.model.seen_tape_version;
    bool names_due = s.engine.namer && seconds_since(s.engine.last_naming) > 1.0;
    if (!tape_changed && !names_due && !s.tape.moved) return false;
    TapeWindow window;
    bool whole = !s.tape.anchor && static_cast<size_t>(tape_live_count()) <= s.tape.above;
    window.size = whole ? SIZE_MAX : s.tape.size;
    if (s.engine.namer && (tape_changed || names_due)) {
        s.engine.last_naming = Clock::now();
        s.engine.namer(window.size);
    }
    s.model.seen_tape_version = tape_version();
    s.tape.moved = false;
    window.anchor = s.tape.anchor.get();
    s.tape.span = records_update(s.model.records, s.engine.running, window);
    // Nodes that died unfinished (those running are the newest: tape_find walks from there).
    for (auto it = s.engine.running.begin(); it != s.engine.running.end();)
        it = tape_changed && !tape_find(*it) ? s.engine.running.erase(it) : std::next(it);
    return s.tape.span.changed || tape_changed;
}

// Whether the view's layout may be asked for now. While a script records nodes, a big view (a long
// loop's window: 1,500 boxes take dot a second or more) is laid out at most every few seconds, so
// that dot does not hold one of the machine's cores the whole time the graph grows; new boxes are
// placed provisionally meanwhile, and the layout comes as soon as the script stops or ends.
static bool layout_may_start(const ViewerState& s) {
    const size_t LIVE_LAYOUT_BOXES = 300;          // laid out at once even while a script runs
    const double LIVE_LAYOUT_INTERVAL = 3.0;       // seconds, for bigger views while a script runs
    return !s.engine.live || s.model.view.boxes.size() <= LIVE_LAYOUT_BOXES || !s.layout.requested ||
           seconds_since(s.layout.started) > LIVE_LAYOUT_INTERVAL;
}

// Bring the model up to date: records when the tape changed, names, the view, the layout request,
// a finished layout, the placement. True when something visible changed.
static bool model_update(ViewerState& s) {
    bool changed = false;
    if (records_refresh(s)) {
        s.model.view_dirty = true;
        changed = true;
    } else {
        for (NodeRecord& r : s.model.records) {   // nodes that finished since (no tape change)
            bool executed = s.engine.running.count(r.id) == 0;
            if (r.executed != executed) {
                r.executed = executed;
                s.model.view_dirty = true;
            }
        }
    }
    if (s.model.view_dirty) {
        s.model.view = build_view(s, s.model.records);
        s.model.view_dirty = false;
        ++s.model.view_serial;
        s.layout.placement_dirty = true;
        changed = true;
        s.layout.pending = true;
    }
    if (s.layout.pending && layout_may_start(s)) {
        s.layout.pending = false;
        LayoutInput input = layout_input_from_view(s.model.view, s.model.backward_up);
        if (!s.layout.requested || input.signature != s.layout.requested_signature) {
            s.layout.requested_signature = input.signature;
            s.layout.requested = true;
            s.layout.started = Clock::now();
            s.layout.worker.request(std::move(input));
        }
    }
    LayoutResult result;
    if (s.layout.worker.take_result(&result)) {
        if (result.ok) {
            s.layout.result = std::move(result);
            if (s.graph.camera == CAMERA_FOLLOW) s.graph.follow_request = true;
            if (s.graph.camera == CAMERA_FIT) s.graph.fit_request = true;
            if (s.stop.node) s.stop.scroll_to = true;
        } else {
            s.layout.result.error = result.error;
        }
        s.layout.placement_dirty = true;
        changed = true;
    }
    if (s.layout.placement_dirty) {
        placement_compute(s);
        s.layout.placement_dirty = false;
    }
    return changed;
}

static bool layout_current(ViewerState& s) {
    return !s.model.view_dirty && !s.layout.pending && s.layout.requested && s.layout.result.signature == s.layout.requested_signature &&
           !s.layout.worker.busy();
}

// ============================================================================================
// [SECTION] window

namespace {

void on_glfw_error(int, const char* description) {
    viewer_state().app.glfw_error = description ? description : "unknown error";
}

void on_event_cursor(GLFWwindow*, double, double) { viewer_state().app.had_event = true; }
void on_event_refresh(GLFWwindow*) { viewer_state().app.had_event = true; }
void on_event_size(GLFWwindow*, int, int) { viewer_state().app.had_event = true; }
void on_event_button(GLFWwindow*, int, int, int) { viewer_state().app.had_event = true; }
void on_event_scroll(GLFWwindow*, double, double) { viewer_state().app.had_event = true; }
void on_event_key(GLFWwindow*, int, int, int, int) { viewer_state().app.had_event = true; }
void on_event_char(GLFWwindow*, unsigned int) { viewer_state().app.had_event = true; }

bool file_exists(const char* path) { return access(path, R_OK) == 0; }

// DejaVu (Graphviz's dependency fonts-dejavu-core) when installed, else ImGui's built-in font.
// Besides Latin-1: Greek, arrows, maths and the "ᵀ" of op names like "mm(Bᵀ)".
void fonts_load(ViewerState& s) {
    ImGuiIO& io = ImGui::GetIO();
    ImVector<ImWchar>& ranges = s.app.glyph_ranges;
    if (ranges.empty()) {
        ImFontGlyphRangesBuilder builder;
        builder.AddRanges(io.Fonts->GetGlyphRangesDefault());
        const ImWchar extra[] = {0x0370, 0x03FF, 0x1D00, 0x1DBF, 0x2000, 0x206F, 0x2190, 0x21FF, 0x2200, 0x22FF, 0};
        builder.AddRanges(extra);
        builder.BuildRanges(&ranges);
    }
    const char* sans = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";
    const char* mono = "/usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf";
    bool have_sans = file_exists(sans);
    s.app.ui_font = have_sans ? io.Fonts->AddFontFromFileTTF(sans, 15.0f, nullptr, ranges.Data) : nullptr;
    if (!s.app.ui_font) s.app.ui_font = io.Fonts->AddFontDefault();   // ProggyClean 13 px
    s.app.mono_font = file_exists(mono) ? io.Fonts->AddFontFromFileTTF(mono, 14.0f, nullptr, ranges.Data) : nullptr;
    if (!s.app.mono_font) s.app.mono_font = s.app.ui_font;
    io.Fonts->Build();
    // Node labels are drawn scaled with the zoom: they get an atlas of their own, sampled smoothly.
    s.app.graph_atlas = IM_NEW(ImFontAtlas)();
    s.app.graph_font = have_sans ? s.app.graph_atlas->AddFontFromFileTTF(sans, GRAPH_FONT_SIZE, nullptr, ranges.Data) : nullptr;
    if (!s.app.graph_font) s.app.graph_font = s.app.graph_atlas->AddFontDefault();
    s.app.graph_atlas->Build();
}

// Textures of the two atlases. The UI's is sampled NEAREST: its text is drawn at its own size, and
// on llvmpipe every window background (drawn through the atlas's white pixel) costs about a third
// less than with LINEAR. The labels' atlas is LINEAR, as they are scaled.
void font_textures_create(ViewerState& s) {
    ImGui_ImplOpenGL3_CreateDeviceObjects();
    glBindTexture(GL_TEXTURE_2D, static_cast<GLuint>(reinterpret_cast<intptr_t>(ImGui::GetIO().Fonts->TexID)));
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MIN_FILTER, GL_NEAREST);
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MAG_FILTER, GL_NEAREST);
    unsigned char* pixels = nullptr;
    int width = 0, height = 0;
    s.app.graph_atlas->GetTexDataAsRGBA32(&pixels, &width, &height);
    GLuint texture = 0;
    glGenTextures(1, &texture);
    glBindTexture(GL_TEXTURE_2D, texture);
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MIN_FILTER, GL_LINEAR);
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MAG_FILTER, GL_LINEAR);
    glPixelStorei(GL_UNPACK_ROW_LENGTH, 0);
    glTexImage2D(GL_TEXTURE_2D, 0, GL_RGBA, width, height, 0, GL_RGBA, GL_UNSIGNED_BYTE, pixels);
    s.app.graph_atlas->SetTexID(reinterpret_cast<ImTextureID>(static_cast<intptr_t>(texture)));
    s.app.graph_atlas->ClearTexData();
}

void style_set() {
    ImGui::StyleColorsDark();
    ImGuiStyle& style = ImGui::GetStyle();
    style.WindowRounding = 0;
    style.WindowBorderSize = 1;
    style.FrameRounding = 3;
    style.WindowPadding = ImVec2(6, 6);
    style.ItemSpacing = ImVec2(6, 4);
}

// Create the window and the ImGui context. False with `error` when there is no display or GL.
bool window_create(ViewerState& s, bool hidden, std::string* error) {
    if (display_lost()) {   // GLFW's one X connection is dead, and GLFW 3.3 cannot open another
        *error = "cannot open a window: the connection to the X display was lost earlier (start tapedeck "
                 "again with a display)";
        return false;
    }
    s.app.glfw_error.clear();
    glfwSetErrorCallback(on_glfw_error);
    if (!s.app.glfw_ready) {
        if (!glfwInit()) {
            *error = "cannot open a window: " + (s.app.glfw_error.empty() ? std::string("GLFW failed to start") : s.app.glfw_error);
            if (!getenv("DISPLAY") && !getenv("WAYLAND_DISPLAY"))
                *error += " (no display: run under X11, or `xvfb-run tapedeck ...` for screenshots)";
            return false;
        }
        s.app.glfw_ready = true;
        display_watch_install();   // a dying X server closes the viewer, not the process
    }
    glfwDefaultWindowHints();
    glfwWindowHint(GLFW_CONTEXT_VERSION_MAJOR, 3);
    glfwWindowHint(GLFW_CONTEXT_VERSION_MINOR, 3);
    glfwWindowHint(GLFW_OPENGL_PROFILE, GLFW_OPENGL_CORE_PROFILE);
    glfwWindowHint(GLFW_VISIBLE, hidden ? GLFW_FALSE : GLFW_TRUE);
    GLFWwindow* window = glfwCreateWindow(1280, 800, "tapedeck viewer", nullptr, nullptr);
    if (!window) {
        *error = "cannot create an OpenGL 3.3 window: " + s.app.glfw_error;
        return false;
    }
    glfwMakeContextCurrent(window);
    glfwSwapInterval(0);   // frames are paced by the caller's wait loop, not by vsync
    // Our callbacks first: ImGui's backend chains to them (they only note that something happened).
    glfwSetCursorPosCallback(window, on_event_cursor);
    glfwSetWindowRefreshCallback(window, on_event_refresh);
    glfwSetFramebufferSizeCallback(window, on_event_size);
    glfwSetMouseButtonCallback(window, on_event_button);
    glfwSetScrollCallback(window, on_event_scroll);
    glfwSetKeyCallback(window, on_event_key);
    glfwSetCharCallback(window, on_event_char);

    IMGUI_CHECKVERSION();
    ImGui::CreateContext();
    ImGui::GetIO().IniFilename = nullptr;   // no imgui.ini in the user's directory
    style_set();
    fonts_load(s);
    ImGui_ImplGlfw_InitForOpenGL(window, true);
    ImGui_ImplOpenGL3_Init("#version 330");
    font_textures_create(s);
    s.app.window = window;
    ++s.app.serial;
    s.app.hidden = hidden;
    return true;
}

void window_destroy(ViewerState& s) {
    if (!s.app.window) return;
    glfwMakeContextCurrent(s.app.window);
    GLuint texture = static_cast<GLuint>(reinterpret_cast<intptr_t>(s.app.graph_atlas->TexID));
    glDeleteTextures(1, &texture);
    IM_DELETE(s.app.graph_atlas);
    s.app.graph_atlas = nullptr;
    ImGui_ImplOpenGL3_Shutdown();
    ImGui_ImplGlfw_Shutdown();
    ImGui::DestroyContext();
    glfwDestroyWindow(s.app.window);
    s.app.window = nullptr;
    s.app.ui_font = s.app.mono_font = s.app.graph_font = nullptr;
}

// Everything the open window held goes; options, groups, stop, controls and breakpoints stay.
void window_close(ViewerState& s) {
    s.layout.worker.stop();
    window_destroy(s);
    s.engine.history.clear();   // may free nodes: the tape changes
    s.engine.running.clear();
    s.model.records.clear();
    s.plan.model.reset();
    s.plan.records_fresh = false;
    s.tape.anchor = Ref<Node>();   // may free nodes too
    s.tape.nodes_held.clear();
    s.tape.nodes_gone.clear();
    s.tape.centre = 0;
    s.tape.at_stop = false;
    s.tape.span = TapeWindowSpan();
    s.model.view = GraphView();
    s.layout.result = LayoutResult();
    s.layout.placement = Placement();
    s.layout.requested = false;
    s.layout.pending = false;
    s.model.seen_tape_version = ~0ull;
    s.model.view_dirty = true;
    s.graph.drawn.clear();
    s.capture.pixels.clear();
    s.app.deferred.clear();
    s.graph.camera = CAMERA_FOLLOW;
    s.graph.follow_request = true;
    observer_sync(s);
}

}  // namespace

// ============================================================================================
// [SECTION] frame

namespace {

// Read the back buffer (before the swap) into s.capture.pixels, top row first; write it as a PNG when
// a path was asked for.
void capture_pixels(ViewerState& s) {
    int w = 0, h = 0;
    glfwGetFramebufferSize(s.app.window, &w, &h);
    if (display_lost() || w <= 0 || h <= 0) {
        s.capture.error = "the window has no pixels (the X display was lost)";
        s.capture.path.clear();
        s.capture.request = false;
        return;
    }
    std::vector<unsigned char> bottom_up(static_cast<size_t>(w) * h * 4);
    glPixelStorei(GL_PACK_ALIGNMENT, 1);
    glReadBuffer(GL_BACK);
    glReadPixels(0, 0, w, h, GL_RGBA, GL_UNSIGNED_BYTE, bottom_up.data());
    s.capture.pixels.resize(bottom_up.size());
    size_t row = static_cast<size_t>(w) * 4;
    for (int y = 0; y < h; ++y)
        std::copy_n(bottom_up.data() + static_cast<size_t>(h - 1 - y) * row, row, s.capture.pixels.data() + y * row);
    s.capture.width = w;
    s.capture.height = h;
    s.capture.error.clear();
    if (!s.capture.path.empty()) {   // the PNG in memory, then written whole or not at all (file_whole.h)
        std::string bytes;
        auto append = [](void* out, void* data, int length) { static_cast<std::string*>(out)->append(static_cast<const char*>(data), static_cast<size_t>(length)); };
        try {
            if (!stbi_write_png_to_func(append, &bytes, w, h, 4, s.capture.pixels.data(), w * 4))
                td::engine_fail("cannot write %s: the PNG encoder failed", s.capture.path.c_str());
            td::file_write_whole(s.capture.path, bytes, nullptr);
        } catch (const td::EngineError& e) {
            s.capture.error = e.what();
        }
    }
    s.capture.path.clear();
    s.capture.request = false;
}

// The four windows tile the GLFW window: Controls across the top, Graph (or Training) on the left,
// Tensor and Source on the right while they have something to show (side_panes_shown), else the
// Graph (or Training) window takes the whole width.
// Every GLFW call that asks the X server something can be the one that finds the connection dead:
// then its answer (a window size) is garbage, so the frame stops there (frame_step closes the
// window after it).
void frame_draw(ViewerState& s) {
    Clock::time_point start = Clock::now();
    ImGui_ImplOpenGL3_NewFrame();
    ImGui_ImplGlfw_NewFrame();   // asks X for the window and framebuffer sizes
    if (display_lost()) return;
    if (s.input.mouse) {   // viewer.click: the script's mouse, not the real one
        ImGuiIO& io = ImGui::GetIO();
        io.MousePos = s.input.mouse_pos;
        for (int i = 0; i < 3; ++i) io.MouseDown[i] = s.input.mouse_down[i];
    }
    s.input.item_rects.clear();
    ImGui::NewFrame();
    ImGui::PushFont(s.app.ui_font);

    ImVec2 display = ImGui::GetIO().DisplaySize;
    float top = 88.0f;   // the Controls window: buttons, numbers, the timeline (window_timeline.cpp)
    bool panes = side_panes_shown(s);
    if (panes != s.graph.side_panes) {   // the Graph window's width changes: keep its view
        s.graph.side_panes = panes;
        if (s.graph.camera == CAMERA_FIT) s.graph.fit_request = true;
        if (panes && s.selection.node) s.selection.scroll_to = true;   // not under the Tensor window
        if (panes && s.stop.node) s.stop.scroll_to = true;
    }
    float left = panes ? std::floor(display.x * 0.62f) : display.x;
    float right = display.x - left;
    float rest = std::max(display.y - top, 100.0f);
    float tensor_h = std::floor(rest * 0.58f);
    draw_controls_window(s, {ImVec2(0, 0), ImVec2(display.x, top)});
    if (s.training.shown) draw_training_window(s, {ImVec2(0, top), ImVec2(left, rest)});
    else draw_graph_window(s, {ImVec2(0, top), ImVec2(left, rest)});
    if (right > 0) {
        draw_tensor_window(s, {ImVec2(left, top), ImVec2(right, tensor_h)});
        draw_source_window(s, {ImVec2(left, top + tensor_h), ImVec2(right, rest - tensor_h)});
    }

    ImGui::PopFont();
    ImGui::Render();
    int w = 0, h = 0;
    glfwGetFramebufferSize(s.app.window, &w, &h);
    if (display_lost() || w <= 0 || h <= 0) return;
    glViewport(0, 0, w, h);
    glClearColor(0.12f, 0.12f, 0.13f, 1.0f);
    glClear(GL_COLOR_BUFFER_BIT);
    ImGui_ImplOpenGL3_RenderDrawData(ImGui::GetDrawData());
    if (s.capture.request) capture_pixels(s);
    if (s.frames.sync) glFinish();
    glfwSwapBuffers(s.app.window);

    double ms = seconds_since(start) * 1000.0;
    s.frames.ms.push_back(ms);
    if (s.frames.ms.size() > 240) s.frames.ms.erase(s.frames.ms.begin());
    s.app.last_draw = Clock::now();
    ++s.frames.drawn;
    s.app.had_event = false;
    if (s.app.force_frames > 0) --s.app.force_frames;
}

void run_deferred(ViewerState& s) {
    while (!s.app.deferred.empty()) {
        std::vector<std::function<void()>> actions;
        actions.swap(s.app.deferred);
        for (std::function<void()>& action : actions) action();
    }
}

// The X connection died under the window: close it, say so once, and go on without it.
void window_close_display_lost(ViewerState& s) {
    fprintf(stderr, "viewer: the connection to the X display was lost (the X server stopped, or the ssh -X "
                    "connection dropped); the viewer is closed, tapedeck goes on without it\n");
    window_close(s);
}

// One pass of the frame loop. `force`: draw even when nothing changed.
void frame_step(bool force) {
    ViewerState& s = viewer_state();
    if (!s.app.window || s.app.in_frame) return;
    s.app.in_frame = true;
    glfwMakeContextCurrent(s.app.window);
    glfwPollEvents();
    if (display_lost()) {
        s.app.in_frame = false;
        window_close_display_lost(s);
        return;
    }
    if (glfwWindowShouldClose(s.app.window)) {
        s.app.in_frame = false;
        window_close(s);
        return;
    }
    Clock::time_point update_start = Clock::now();
    bool changed = model_update(s);
    if (changed) s.frames.update_ms = seconds_since(update_start) * 1000.0;
    bool waiting_layout = s.layout.requested && s.layout.worker.busy();
    bool draw = force || changed || s.app.had_event || s.app.force_frames > 0 || s.capture.request || waiting_layout ||
                seconds_since(s.app.last_draw) > 0.5;
    if (draw) {
        frame_draw(s);
        s.frames.total_ms.push_back(seconds_since(update_start) * 1000.0);
        if (s.frames.total_ms.size() > 240) s.frames.total_ms.erase(s.frames.total_ms.begin());
    }
    s.app.in_frame = false;
    if (display_lost()) {   // noticed by the buffer swap
        window_close_display_lost(s);
        return;
    }
    run_deferred(s);
}

}  // namespace

bool side_panes_shown(const ViewerState& s) { return s.selection.node || s.stop.node || s.stop.line > 0; }

// ============================================================================================
// [SECTION] api

}  // namespace td

using namespace td;

bool viewer_open(std::string* error, bool hidden) {
    ViewerState& s = viewer_state();
    if (s.app.window) {
        if (!hidden && s.app.hidden) {
            glfwShowWindow(s.app.window);
            s.app.hidden = false;
        }
        if (!s.app.hidden) glfwFocusWindow(s.app.window);
        s.app.force_frames = std::max(s.app.force_frames, 2);
        return true;
    }
    std::string message;
    if (!window_create(s, hidden, &message)) {
        if (error) *error = message;
        return false;
    }
    observer_sync(s);
    s.app.force_frames = 3;
    s.app.last_live_frame = Clock::now();
    frame_step(true);
    return true;
}

void viewer_close() {
    ViewerState& s = viewer_state();
    if (s.app.window) window_close(s);
}

bool viewer_is_open() { return viewer_state().app.window != nullptr; }

void viewer_frame() { frame_step(false); }

bool viewer_screenshot(const std::string& path, int frames, std::string* error) {
    ViewerState& s = viewer_state();
    if (!s.app.window) {
        if (error) *error = "the viewer window is not open";
        return false;
    }
    viewer_wait_layout(60.0);
    for (int i = 0; i < frames && s.app.window; ++i) frame_step(true);
    if (!s.app.window) {
        if (error) *error = "the viewer window was closed";
        return false;
    }
    s.capture.request = true;
    s.capture.path = path;
    frame_step(true);
    if (!s.capture.error.empty() || s.capture.request) {
        if (error) *error = s.capture.error.empty() ? "no frame was drawn" : s.capture.error;
        s.capture.request = false;
        return false;
    }
    return true;
}

void viewer_set_stop(int64_t node_id, bool backward, bool has_run) {
    ViewerState& s = viewer_state();
    // Whichever hook observer (the debugger's or the viewer's) is told first: the newest node,
    // stopped before it runs, has not run yet (the viewer's hook sees it finish); a node the
    // debugger stopped after has run.
    if (has_run) s.engine.running.erase(node_id);
    else if (s.app.window && node_id > 0 && node_id == tape_next_id() - 1 && tape_find(node_id)) s.engine.running.insert(node_id);
    s.stop.node = node_id;
    s.stop.backward = backward;
    s.stop.has_run = has_run;
    s.stop.file.clear();
    s.stop.line = 0;
    s.selection.node = node_id;
    s.stop.scroll_to = true;
    s.model.view_dirty = true;   // a group hiding the stop opens
    // A stop outside the tape window (a breakpoint on an early step of a long loop): the window
    // moves there while stopped, and follows the newest nodes again once the program runs on.
    if (node_id > 0 && !s.tape.span.covers(node_id) && !record_find(s.model.records, node_id)) {
        s.tape.centre = node_id;
        s.tape.at_stop = true;
    }
    s.app.force_frames = std::max(s.app.force_frames, 3);
}

void viewer_set_stop_line(const std::string& file, int line) {
    viewer_clear_stop();
    ViewerState& s = viewer_state();
    s.stop.file = file;
    s.stop.line = line;
    s.app.force_frames = std::max(s.app.force_frames, 2);
}

void viewer_clear_stop() {
    ViewerState& s = viewer_state();
    s.stop.file.clear();
    s.stop.line = 0;
    if (s.tape.at_stop) {
        s.tape.at_stop = false;
        s.tape.anchor = Ref<Node>();
        s.tape.moved = true;
    }
    if (s.stop.node == 0) return;
    s.stop.node = 0;
    s.stop.backward = false;
    s.model.view_dirty = true;
    s.app.force_frames = std::max(s.app.force_frames, 2);
}

void viewer_select_node(int64_t node_id) { viewer_select(node_id, true); }

void viewer_window_follow() {
    ViewerState& s = viewer_state();
    s.tape.anchor = Ref<Node>();
    s.tape.centre = 0;
    s.tape.at_stop = false;
    s.tape.moved = true;
    s.app.force_frames = std::max(s.app.force_frames, 2);
}

void viewer_window_centre(int64_t node_id) {
    ViewerState& s = viewer_state();
    s.tape.centre = std::max<int64_t>(node_id, 1);
    s.tape.at_stop = false;
    s.app.force_frames = std::max(s.app.force_frames, 2);
}

void viewer_window_page(int direction) {
    const TapeWindowSpan& span = viewer_state().tape.span;
    if (span.nodes == 0) return;
    if (direction > 0 && span.following) return;
    viewer_window_centre(direction < 0 ? span.first : span.last);
}

void viewer_window_resize(size_t nodes) {
    ViewerState& s = viewer_state();
    s.tape.size = std::max<size_t>(nodes, 1);
    if (s.tape.anchor) s.tape.centre = s.tape.span.first + (s.tape.span.last - s.tape.span.first) / 2;
    s.tape.moved = true;
    s.app.force_frames = std::max(s.app.force_frames, 2);
}

ViewerWindowSpan viewer_window_span() {
    ViewerState& s = viewer_state();
    if (s.app.window) model_update(s);
    ViewerWindowSpan span;
    span.first = s.tape.span.first;
    span.last = s.tape.span.last;
    span.nodes = s.tape.span.nodes;
    span.live = s.tape.span.live;
    span.following = s.tape.span.following;
    span.size = s.tape.size;
    return span;
}

bool viewer_expand_named(const std::string& name, bool open, std::string* error) {
    ViewerState& s = viewer_state();
    model_update(s);   // the groups of the tape as it is now
    std::vector<int> found = clusters_named(s.model.view.clusters, name);
    if (found.empty()) {
        std::string names;
        for (const Cluster& c : s.model.view.clusters)
            if (c.kind == CLUSTER_MODULE || c.kind == CLUSTER_UPDATE || c.kind == CLUSTER_LOOP || c.kind == CLUSTER_FUNCTION)
                if (names.find(c.title) == std::string::npos) names += (names.empty() ? "" : ", ") + c.title;
        if (error)
            *error = "no group named '" + name + "' in the graph" +
                     (names.empty() ? std::string(" (it has none)") : " (there are: " + names.substr(0, 300) + ")");
        return false;
    }
    for (int c : found) viewer_set_expanded(cluster_state_key(s.model.view.clusters[c]), open);
    return true;
}

void viewer_set_controls(const ViewerControls* controls) {
    ViewerState& s = viewer_state();
    s.stop.controls = controls ? *controls : ViewerControls();
    s.app.force_frames = std::max(s.app.force_frames, 2);
}

void viewer_set_diff_source(ViewerDiffSource source) { viewer_state().model.diff_source = source; }

// The diff option's marks, asked of the source once per frame (it answers at once when its
// comparison is the one already here).
void td::viewer_diff_refresh(ViewerState& s) {
    if (!s.model.diff || !s.model.diff_source) {
        s.model.diff_marks.clear();
        s.model.diff_version = 0;
        return;
    }
    std::vector<ViewerDiffMark> marks;
    if (!s.model.diff_source(&s.model.diff_version, &marks)) return;
    s.model.diff_marks.clear();
    for (ViewerDiffMark& m : marks) s.model.diff_marks[m.node_id] = std::move(m);
}

void viewer_set_breakpoints(const std::vector<ViewerBreakpoint>& breakpoints) {
    ViewerState& s = viewer_state();
    s.stop.breakpoints = breakpoints;
    s.app.force_frames = std::max(s.app.force_frames, 2);
}

namespace td {

// ============================================================================================
// [SECTION] scripts

void viewer_frame_forced() { frame_step(true); }

bool viewer_wait_layout(double timeout) {
    ViewerState& s = viewer_state();
    Clock::time_point start = Clock::now();
    while (s.app.window) {
        frame_step(false);
        if (s.app.window && layout_current(s)) {
            model_update(s);
            return true;
        }
        if (seconds_since(start) > timeout) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return false;
}

std::vector<double> viewer_bench_frames(int frames) {
    ViewerState& s = viewer_state();
    std::vector<double> ms;
    s.frames.sync = true;
    for (int i = 0; i < frames && s.app.window; ++i) {
        frame_step(true);
        if (!s.frames.ms.empty()) ms.push_back(s.frames.ms.back());
    }
    s.frames.sync = false;
    return ms;
}

bool viewer_capture(std::string* error) {
    ViewerState& s = viewer_state();
    if (!s.app.window) {
        if (error) *error = "the viewer window is not open";
        return false;
    }
    s.capture.request = true;
    s.capture.path.clear();
    frame_step(true);
    return !s.capture.request;
}

LayoutResult viewer_layout_now() {
    ViewerState& s = viewer_state();
    std::vector<NodeRecord> records;
    if (s.app.window) {
        model_update(s);
        records = s.model.records;
    } else {
        TapeWindow window;
        if (static_cast<size_t>(tape_live_count()) > s.tape.above) window.size = s.tape.size;
        records_update(records, {}, window);
    }
    GraphView view = build_view(s, records);
    return layout_compute(layout_input_from_view(view, s.model.backward_up));
}

void viewer_click(float x, float y, int button, bool double_click) {
    ViewerState& s = viewer_state();
    if (!s.app.window) return;
    button = std::clamp(button, 0, 2);
    s.input.mouse = true;
    s.input.mouse_pos = ImVec2(x, y);
    for (bool& down : s.input.mouse_down) down = false;
    frame_step(true);   // hover
    for (int click = 0; click < (double_click ? 2 : 1); ++click) {
        s.input.mouse_down[button] = true;
        frame_step(true);
        s.input.mouse_down[button] = false;
        frame_step(true);
    }
    frame_step(true);
    s.input.mouse = false;
}

void viewer_request_close() {
    ViewerState& s = viewer_state();
    if (s.app.window) glfwSetWindowShouldClose(s.app.window, GLFW_TRUE);
}

void viewer_fit() {
    ViewerState& s = viewer_state();
    s.graph.fit_request = true;
    s.graph.camera = CAMERA_FIT;
    s.app.force_frames = std::max(s.app.force_frames, 2);
}

// Closing the Lua state: the window, the hook, and every callback into Lua go.
// GLFW itself is not terminated: the process is ending, and glfwTerminate closes the X display,
// which unloads Mesa's driver; what the driver allocated once and keeps in its own globals would
// then look leaked to LeakSanitizer, from a module it can no longer name (so no suppression could
// match it). The kernel closes the X connection at exit. After a lost display, GLFW could not be
// terminated safely anyway.
void viewer_shutdown() {
    ViewerState& s = viewer_state();
    viewer_close();
    s.engine.node_callback = nullptr;
    s.engine.namer = nullptr;
    s.stop.controls = ViewerControls();
    observer_sync(s);
}

void viewer_set_node_callback(std::function<void(Node*, HookEvent)> callback) {
    ViewerState& s = viewer_state();
    s.engine.node_callback = std::move(callback);
    observer_sync(s);
}

}  // namespace td
