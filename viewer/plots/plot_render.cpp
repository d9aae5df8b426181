// plot_render.cpp: line plots, the histogram image and the gradient-flow bars of the training log,
// drawn with cairo (plot_render.h).
//
// [SECTION] axes: ticks and labels      [SECTION] line plots
// [SECTION] the histogram image         [SECTION] gradient flow
// [SECTION] entry points
#include "plot_render.h"

#include <cairo.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "file_whole.h"
#include "heat_colour.h"
#include "training_log.h"

namespace td {

namespace {

constexpr const char* FONT = "DejaVu Sans";

struct Rgb {
    double r, g, b;
};
// Matplotlib's tab10: lines of different parameters stay apart.
const Rgb PALETTE[] = {{0.12, 0.47, 0.71}, {1.00, 0.50, 0.05}, {0.17, 0.63, 0.17}, {0.84, 0.15, 0.16},
                       {0.58, 0.40, 0.74}, {0.55, 0.34, 0.29}, {0.89, 0.47, 0.76}, {0.50, 0.50, 0.50},
                       {0.74, 0.74, 0.13}, {0.09, 0.75, 0.81}};

struct Box {   // the plotting area, pixels
    double x0, y0, x1, y1;
    double w() const { return x1 - x0; }
    double h() const { return y1 - y0; }
};

// An axis: a data range mapped onto pixels, linear or log10.
struct Axis {
    double lo = 0, hi = 1;
    bool log = false;
    double p0 = 0, p1 = 1;   // pixels of lo and hi
    double t(double v) const {
        double a = log ? std::log10(lo) : lo, b = log ? std::log10(hi) : hi;
        double x = log ? std::log10(v) : v;
        return b > a ? (x - a) / (b - a) : 0.5;
    }
    double px(double v) const { return p0 + (p1 - p0) * t(v); }
};

void set_colour(cairo_t* cr, Rgb c, double alpha = 1) { cairo_set_source_rgba(cr, c.r, c.g, c.b, alpha); }

void text_at(cairo_t* cr, const std::string& text, double x, double y, double size, double align_x = 0,
             double align_y = 0, bool bold = false) {
    cairo_select_font_face(cr, FONT, CAIRO_FONT_SLANT_NORMAL, bold ? CAIRO_FONT_WEIGHT_BOLD : CAIRO_FONT_WEIGHT_NORMAL);
    cairo_set_font_size(cr, size);
    cairo_text_extents_t e;
    cairo_text_extents(cr, text.c_str(), &e);
    cairo_move_to(cr, x - align_x * e.x_advance, y + align_y * size * 0.72);
    cairo_show_text(cr, text.c_str());
}

double text_width(cairo_t* cr, const std::string& text, double size) {
    cairo_select_font_face(cr, FONT, CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
    cairo_set_font_size(cr, size);
    cairo_text_extents_t e;
    cairo_text_extents(cr, text.c_str(), &e);
    return e.x_advance;
}

// "0.25", "1e-05", "3000": short tick labels.
std::string number_text(double v) {
    char buf[32];
    if (v == 0) return "0";
    double a = std::fabs(v);
    if (a >= 1e5 || a < 1e-3) snprintf(buf, sizeof buf, "%.0e", v);
    else snprintf(buf, sizeof buf, "%.4g", v);
    return buf;
}

// The dotted prefix all `names` share ("model." of model.fc1.weight, model.fc2.bias), which the
// legends and bar labels leave out (the title says it); empty for fewer than two names.
std::string shared_prefix(const std::vector<std::string>& names) {
    if (names.size() < 2) return "";
    std::string prefix = names[0];
    for (const std::string& n : names) {
        size_t k = 0;
        while (k < prefix.size() && k < n.size() && prefix[k] == n[k]) ++k;
        prefix.resize(k);
    }
    size_t dot = prefix.rfind('.');
    return dot == std::string::npos ? "" : prefix.substr(0, dot + 1);
}

// `text` cut from the left with "..." to fit `width` pixels at `size`.
std::string fit_left(cairo_t* cr, const std::string& text, double width, double size) {
    if (text_width(cr, text, size) <= width) return text;
    for (size_t cut = 1; cut < text.size(); ++cut) {
        std::string t = "..." + text.substr(cut);
        if (text_width(cr, t, size) <= width) return t;
    }
    return text;
}

// ============================================================================================
// [SECTION] axes: ticks and labels

// Ticks at 1, 2 or 5 times a power of ten, about `count` of them over [lo, hi].
std::vector<double> linear_ticks(double lo, double hi, int count) {
    std::vector<double> ticks;
    double span = hi - lo;
    if (!(span > 0)) return {lo};
    double raw = span / std::max(count, 1);
    double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
    double step = magnitude;
    for (double m : {1.0, 2.0, 5.0, 10.0})
        if (m * magnitude >= raw) {
            step = m * magnitude;
            break;
        }
    for (double v = std::ceil(lo / step - 1e-9) * step; v <= hi + step * 1e-9; v += step)
        ticks.push_back(std::fabs(v) < step * 1e-9 ? 0 : v);
    return ticks;
}

// A range for data [lo, hi] with a little room; never empty.
void pad_range(Axis& a) {
    if (a.log) {
        if (!(a.hi > a.lo)) {
            a.lo /= 2;
            a.hi *= 2;
        }
        double l = std::log10(a.lo), h = std::log10(a.hi), pad = (h - l) * 0.05;
        a.lo = std::pow(10.0, l - pad);
        a.hi = std::pow(10.0, h + pad);
        return;
    }
    if (!(a.hi > a.lo)) {
        double d = a.lo == 0 ? 1 : std::fabs(a.lo) * 0.1;
        a.lo -= d;
        a.hi += d;
        return;
    }
    double pad = (a.hi - a.lo) * 0.05;
    a.lo -= pad;
    a.hi += pad;
}

void draw_frame_and_grid(cairo_t* cr, const Box& box, const Axis& x, const Axis& y, const std::string& x_label,
                         const std::string& y_label) {
    cairo_set_source_rgb(cr, 1, 1, 1);
    cairo_rectangle(cr, box.x0, box.y0, box.w(), box.h());
    cairo_fill(cr);
    cairo_set_line_width(cr, 1);
    // y grid and labels
    std::vector<double> yt;
    if (y.log) {
        int a = static_cast<int>(std::floor(std::log10(y.lo))), b = static_cast<int>(std::ceil(std::log10(y.hi)));
        int stride = std::max(1, (b - a) / 8);
        for (int e = a; e <= b; ++e) {
            for (int m = 2; m < 10 && b - a < 6; ++m) {   // minor lines
                double v = m * std::pow(10.0, e);
                if (v < y.lo || v > y.hi) continue;
                cairo_set_source_rgb(cr, 0.94, 0.94, 0.94);
                cairo_move_to(cr, box.x0, std::round(y.px(v)) + 0.5);
                cairo_line_to(cr, box.x1, std::round(y.px(v)) + 0.5);
                cairo_stroke(cr);
            }
            double v = std::pow(10.0, e);
            if (v >= y.lo && v <= y.hi && (e - a) % stride == 0) yt.push_back(v);
        }
    } else {
        yt = linear_ticks(y.lo, y.hi, std::max(2, static_cast<int>(box.h() / 50)));
    }
    for (double v : yt) {
        if (v < y.lo || v > y.hi) continue;
        double py = std::round(y.px(v)) + 0.5;
        cairo_set_source_rgb(cr, 0.85, 0.85, 0.85);
        cairo_move_to(cr, box.x0, py);
        cairo_line_to(cr, box.x1, py);
        cairo_stroke(cr);
        cairo_set_source_rgb(cr, 0.2, 0.2, 0.2);
        text_at(cr, number_text(v), box.x0 - 6, py, 11, 1, 0.5);
    }
    for (double v : linear_ticks(x.lo, x.hi, std::max(2, static_cast<int>(box.w() / 90)))) {
        if (v < x.lo || v > x.hi) continue;
        double px = std::round(x.px(v)) + 0.5;
        cairo_set_source_rgb(cr, 0.85, 0.85, 0.85);
        cairo_move_to(cr, px, box.y0);
        cairo_line_to(cr, px, box.y1);
        cairo_stroke(cr);
        cairo_set_source_rgb(cr, 0.2, 0.2, 0.2);
        text_at(cr, number_text(v), px, box.y1 + 14, 11, 0.5);
    }
    cairo_set_source_rgb(cr, 0.35, 0.35, 0.35);
    cairo_rectangle(cr, box.x0 + 0.5, box.y0 + 0.5, box.w() - 1, box.h() - 1);
    cairo_stroke(cr);
    cairo_set_source_rgb(cr, 0.15, 0.15, 0.15);
    text_at(cr, x_label, (box.x0 + box.x1) / 2, box.y1 + 32, 12, 0.5);
    if (!y_label.empty()) {
        cairo_save(cr);
        cairo_translate(cr, 14, (box.y0 + box.y1) / 2);
        cairo_rotate(cr, -M_PI / 2);
        text_at(cr, y_label, 0, 0, 12, 0.5, 0.5);
        cairo_restore(cr);
    }
}

void draw_title(cairo_t* cr, const std::string& title, int width) {
    cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
    text_at(cr, title, width / 2.0, 16, 14, 0.5, 0.5, true);
}

void draw_message(cairo_t* cr, const Box& box, const std::string& message) {
    cairo_set_source_rgb(cr, 0.45, 0.45, 0.45);
    text_at(cr, message, (box.x0 + box.x1) / 2, (box.y0 + box.y1) / 2, 13, 0.5, 0.5);
}

// ============================================================================================
// [SECTION] line plots

// The short label of series `name` in a family's legend: what follows "prefix/".
std::string legend_label(const std::string& name, const std::string& prefix) {
    return prefix.empty() ? name : name.substr(prefix.size() + 1);
}

// The axes' ranges over the series' finite points (step, value); the value axis logarithmic when
// forced, or when every value is positive and they span more than 100x. `guide` (> 0) stays in
// range on a log axis. False when there is no finite point.
bool lines_axes(const std::vector<const ScalarSeries*>& series, bool force_log, double guide, Axis& x, Axis& y) {
    bool any = false, all_positive = true;
    double xlo = 0, xhi = 0, ylo = 0, yhi = 0, pos_lo = 0;
    for (const ScalarSeries* s : series)
        for (size_t i = 0; i < s->values.size(); ++i) {
            double v = s->values[i], st = s->steps[i];
            if (!std::isfinite(v)) continue;
            if (!any) xlo = xhi = st, ylo = yhi = v;
            xlo = std::min(xlo, st), xhi = std::max(xhi, st);
            ylo = std::min(ylo, v), yhi = std::max(yhi, v);
            if (v > 0) pos_lo = pos_lo == 0 ? v : std::min(pos_lo, v);
            else all_positive = false;
            any = true;
        }
    y.log = force_log || (any && all_positive && ylo > 0 && yhi / ylo > 100);
    if (y.log) {
        ylo = pos_lo > 0 ? pos_lo : 1e-8;
        if (guide > 0) ylo = std::min(ylo, guide), yhi = std::max(yhi, guide);
        if (!(yhi > 0)) yhi = ylo * 10;
    }
    x.lo = xlo, x.hi = xhi, y.lo = ylo, y.hi = yhi;
    if (!(x.hi > x.lo)) x.lo -= 0.5, x.hi += 0.5;
    pad_range(y);
    return any;
}

// The rule of thumb's line at `guide`: dashed across the box, with its value.
void draw_guide(cairo_t* cr, const Box& box, const Axis& y, double guide) {
    double py = y.px(guide);
    cairo_set_source_rgb(cr, 0.35, 0.35, 0.35);
    double dash[] = {6, 4};
    cairo_set_dash(cr, dash, 2, 0);
    cairo_set_line_width(cr, 1.2);
    cairo_move_to(cr, box.x0, py);
    cairo_line_to(cr, box.x1, py);
    cairo_stroke(cr);
    cairo_set_dash(cr, nullptr, 0, 0);
    text_at(cr, number_text(guide), box.x0 + 4, py - 4, 10);
}

// One series as a line in the current colour, broken at values it cannot show (not finite, or not
// positive on a log axis); one or two points as dots, since a line of one point is invisible.
void draw_series_line(cairo_t* cr, const ScalarSeries& s, const Axis& x, const Axis& y) {
    bool down = false;
    size_t shown = 0;
    for (size_t i = 0; i < s.values.size(); ++i) {
        double v = s.values[i];
        if (!std::isfinite(v) || (y.log && v <= 0)) {
            down = false;
            continue;
        }
        double px = x.px(s.steps[i]), py = y.px(v);
        if (down) cairo_line_to(cr, px, py);
        else cairo_move_to(cr, px, py);
        down = true;
        ++shown;
    }
    cairo_stroke(cr);
    if (shown <= 2)
        for (size_t i = 0; i < s.values.size(); ++i)
            if (std::isfinite(s.values[i]) && !(y.log && s.values[i] <= 0)) {
                cairo_arc(cr, x.px(s.steps[i]), y.px(s.values[i]), 3, 0, 2 * M_PI);
                cairo_fill(cr);
            }
}

// The legend right of the box: a swatch and label per series, as many as fit ("... N more").
void draw_lines_legend(cairo_t* cr, const Box& box, int width, const std::vector<std::string>& labels) {
    double lx = box.x1 + 10, ly = box.y0 + 6;
    size_t max_rows = static_cast<size_t>(std::max(1.0, (box.h() - 10) / 15));
    for (size_t k = 0; k < labels.size() && ly < box.y1; ++k, ly += 15) {
        if (k + 1 == max_rows && labels.size() > max_rows) {
            cairo_set_source_rgb(cr, 0.3, 0.3, 0.3);
            text_at(cr, "... " + std::to_string(labels.size() - k) + " more", lx, ly, 11, 0, 0.5);
            break;
        }
        set_colour(cr, PALETTE[k % 10]);
        cairo_set_line_width(cr, 2.5);
        cairo_move_to(cr, lx, ly);
        cairo_line_to(cr, lx + 18, ly);
        cairo_stroke(cr);
        cairo_set_source_rgb(cr, 0.15, 0.15, 0.15);
        text_at(cr, fit_left(cr, labels[k], width - lx - 28, 11), lx + 24, ly, 11, 0, 0.5);
    }
}

// One line per series; `prefix` non-empty for a family (legend labels drop it).
void draw_lines(cairo_t* cr, int width, int height, const std::vector<std::string>& names, const std::string& prefix,
                const std::string& title, bool force_log, double guide) {
    const TrainingLog& log = training_log();
    std::vector<const ScalarSeries*> series;
    for (const std::string& n : names) series.push_back(&log.scalars.at(n));
    Axis x, y;
    bool any = lines_axes(series, force_log, guide, x, y);

    bool legend = names.size() > 1;
    std::vector<std::string> labels;
    for (const std::string& n : names) labels.push_back(legend_label(n, prefix));
    std::string common = shared_prefix(labels);
    for (std::string& l : labels) l = l.substr(common.size());
    double legend_w = 0;
    if (legend) {
        for (const std::string& l : labels) legend_w = std::max(legend_w, text_width(cr, l, 11));
        legend_w = std::min(legend_w + 34, width * 0.3);
    }
    std::string full_title = common.empty() ? title : title + "  (" + common + "*)";
    Box box{64, 30, width - 14 - legend_w, height - 44.0};
    x.p0 = box.x0, x.p1 = box.x1, y.p0 = box.y1, y.p1 = box.y0;
    draw_title(cr, full_title, width);
    draw_frame_and_grid(cr, box, x, y, "step", prefix.empty() ? names[0] : prefix);
    if (!any) {
        draw_message(cr, box, "no finite values yet");
        return;
    }
    cairo_save(cr);
    cairo_rectangle(cr, box.x0, box.y0, box.w(), box.h());
    cairo_clip(cr);
    if (guide > 0) draw_guide(cr, box, y, guide);
    cairo_set_line_join(cr, CAIRO_LINE_JOIN_ROUND);
    cairo_set_line_width(cr, names.size() > 1 ? 1.5 : 2.0);
    for (size_t k = 0; k < series.size(); ++k) {
        set_colour(cr, PALETTE[k % 10]);
        draw_series_line(cr, *series[k], x, y);
    }
    cairo_restore(cr);
    if (legend) draw_lines_legend(cr, box, width, labels);
}

// ============================================================================================
// [SECTION] the histogram image

void draw_histogram(cairo_t* cr, int width, int height, const std::string& name) {
    const HistogramSeries& h = training_log().histograms.at(name);
    Axis x, y;
    bool any = false;
    for (const HistogramStep& e : h.steps) {
        if (e.counts.empty()) continue;
        if (!any) x.lo = x.hi = e.step, y.lo = e.lo, y.hi = e.hi;
        x.lo = std::min(x.lo, e.step), x.hi = std::max(x.hi, e.step);
        y.lo = std::min(y.lo, e.lo), y.hi = std::max(y.hi, e.hi);
        any = true;
    }
    if (!(y.hi > y.lo)) y.lo -= 0.5, y.hi += 0.5;
    double half = h.steps.size() > 1 ? (x.hi - x.lo) / (h.steps.size() - 1) / 2 : 0.5;
    x.lo -= half, x.hi += half;
    Box box{64, 30, width - 60.0, height - 44.0};
    x.p0 = box.x0, x.p1 = box.x1, y.p0 = box.y1, y.p1 = box.y0;
    draw_title(cr, "histogram of " + name + " over the steps", width);
    draw_frame_and_grid(cr, box, x, y, "step", "value");
    if (!any) {
        draw_message(cr, box, "no histograms yet");
        return;
    }
    // Pixels: each column shows the logged histogram nearest its step; each row the density of the
    // bin holding its value, scaled so that the column's densest bin is brightest.
    int iw = std::max(1, static_cast<int>(box.w()) - 2), ih = std::max(1, static_cast<int>(box.h()) - 2);
    cairo_surface_t* img = cairo_image_surface_create(CAIRO_FORMAT_RGB24, iw, ih);
    cairo_surface_flush(img);
    unsigned char* data = cairo_image_surface_get_data(img);
    int stride = cairo_image_surface_get_stride(img);
    size_t entry = 0;
    for (int c = 0; c < iw; ++c) {
        double step = x.lo + (x.hi - x.lo) * (c + 0.5) / iw;
        while (entry + 1 < h.steps.size() && std::fabs(h.steps[entry + 1].step - step) <= std::fabs(h.steps[entry].step - step))
            ++entry;
        const HistogramStep& e = h.steps[entry];
        double bin_w = (e.hi - e.lo) / TRAINING_BINS;
        float peak = *std::max_element(e.counts.begin(), e.counts.end());
        for (int r = 0; r < ih; ++r) {
            double v = y.hi - (y.hi - y.lo) * (r + 0.5) / ih;
            double density = 0;
            if (bin_w > 0 && v >= e.lo && v <= e.hi) {
                int b = std::clamp(static_cast<int>((v - e.lo) / bin_w), 0, TRAINING_BINS - 1);
                density = peak > 0 ? e.counts[b] / peak : 0;
            } else if (bin_w == 0 && std::fabs(v - e.lo) <= (y.hi - y.lo) / ih) {
                density = 1;   // every value equal: one line
            }
            uint32_t rgba = density > 0 ? heat_colour(std::sqrt(density), 0, 1) : 0xFF201810u;
            uint32_t* px = reinterpret_cast<uint32_t*>(data + r * stride) + c;
            *px = 0xFF000000u | ((rgba & 0xFF) << 16) | (rgba & 0xFF00) | ((rgba >> 16) & 0xFF);   // ABGR -> xRGB
        }
    }
    cairo_surface_mark_dirty(img);
    cairo_set_source_surface(cr, img, box.x0 + 1, box.y0 + 1);
    cairo_paint(cr);
    cairo_surface_destroy(img);
    // The colour bar: share of the column's densest bin.
    double bx = box.x1 + 12, bw = 12;
    for (int r = 0; r < static_cast<int>(box.h()); ++r) {
        double t = 1 - r / box.h();
        uint32_t rgba = heat_colour(std::sqrt(t), 0, 1);
        cairo_set_source_rgb(cr, (rgba & 0xFF) / 255.0, ((rgba >> 8) & 0xFF) / 255.0, ((rgba >> 16) & 0xFF) / 255.0);
        cairo_rectangle(cr, bx, box.y0 + r, bw, 1);
        cairo_fill(cr);
    }
    cairo_set_source_rgb(cr, 0.2, 0.2, 0.2);
    text_at(cr, "max", bx + bw + 3, box.y0 + 4, 10, 0, 0.5);
    text_at(cr, "0", bx + bw + 3, box.y1 - 4, 10, 0, 0.5);
}

// ============================================================================================
// [SECTION] gradient flow

// The latest value of `prefix/param` per parameter, NaN when there is none.
std::vector<double> latest_values(const std::string& prefix, const std::vector<std::string>& params) {
    std::vector<double> out;
    for (const std::string& p : params) {
        auto it = training_log().scalars.find(prefix + "/" + p);
        out.push_back(it == training_log().scalars.end() ? std::nan("") : it->second.last);
    }
    return out;
}

// One panel: a horizontal bar per parameter on a log axis.
void draw_bars(cairo_t* cr, const Box& box, const std::vector<double>& values, const std::string& label,
               double guide, Rgb colour, bool with_names, const std::vector<std::string>& names) {
    Axis x;
    bool any = false;
    for (double v : values)
        if (std::isfinite(v) && v > 0) {
            if (!any) x.lo = x.hi = v;
            x.lo = std::min(x.lo, v), x.hi = std::max(x.hi, v);
            any = true;
        }
    if (!any) x.lo = 1e-4, x.hi = 1;
    if (guide > 0) x.lo = std::min(x.lo, guide), x.hi = std::max(x.hi, guide);
    x.log = true;
    x.lo = std::pow(10.0, std::floor(std::log10(x.lo))), x.hi = std::pow(10.0, std::ceil(std::log10(x.hi)));
    if (!(x.hi > x.lo)) x.hi = x.lo * 10;
    x.p0 = box.x0, x.p1 = box.x1;
    cairo_set_source_rgb(cr, 1, 1, 1);
    cairo_rectangle(cr, box.x0, box.y0, box.w(), box.h());
    cairo_fill(cr);
    cairo_set_line_width(cr, 1);
    int a = static_cast<int>(std::round(std::log10(x.lo))), b = static_cast<int>(std::round(std::log10(x.hi)));
    int stride = std::max(1, (b - a) / std::max(1, static_cast<int>(box.w() / 45)));
    for (int e = a; e <= b; e += stride) {
        double px = std::round(x.px(std::pow(10.0, e))) + 0.5;
        cairo_set_source_rgb(cr, 0.85, 0.85, 0.85);
        cairo_move_to(cr, px, box.y0);
        cairo_line_to(cr, px, box.y1);
        cairo_stroke(cr);
        cairo_set_source_rgb(cr, 0.2, 0.2, 0.2);   // the end labels inside the panel, apart from the next one's
        text_at(cr, number_text(std::pow(10.0, e)), px, box.y1 + 14, 11, e == a ? 0 : e + stride > b ? 1 : 0.5);
    }
    double row = box.h() / std::max<size_t>(values.size(), 1);
    double font = std::clamp(row * 0.6, 8.0, 12.0);
    for (size_t i = 0; i < values.size(); ++i) {
        double y0 = box.y0 + i * row, v = values[i];
        if (with_names) {
            cairo_set_source_rgb(cr, 0.15, 0.15, 0.15);
            text_at(cr, fit_left(cr, names[i], box.x0 - 10, font), box.x0 - 6, y0 + row / 2, font, 1, 0.5);
        }
        if (!std::isfinite(v) || v <= 0) {
            cairo_set_source_rgb(cr, 0.8, 0.1, 0.1);
            text_at(cr, std::isnan(v) ? "none" : std::isinf(v) ? "inf" : "0", box.x0 + 4, y0 + row / 2, font, 0, 0.5);
            continue;
        }
        set_colour(cr, colour);
        double px = std::max(box.x0 + 2, x.px(std::clamp(v, x.lo, x.hi)));
        cairo_rectangle(cr, box.x0, y0 + row * 0.15, px - box.x0, row * 0.7);
        cairo_fill(cr);
    }
    if (guide > 0) {
        double px = x.px(guide);
        cairo_set_source_rgb(cr, 0.3, 0.3, 0.3);
        double dash[] = {5, 3};
        cairo_set_dash(cr, dash, 2, 0);
        cairo_move_to(cr, px, box.y0);
        cairo_line_to(cr, px, box.y1);
        cairo_stroke(cr);
        cairo_set_dash(cr, nullptr, 0, 0);
    }
    cairo_set_source_rgb(cr, 0.35, 0.35, 0.35);
    cairo_rectangle(cr, box.x0 + 0.5, box.y0 + 0.5, box.w() - 1, box.h() - 1);
    cairo_stroke(cr);
    cairo_set_source_rgb(cr, 0.15, 0.15, 0.15);
    text_at(cr, label, (box.x0 + box.x1) / 2, box.y0 - 8, 12, 0.5);
}

void draw_flow(cairo_t* cr, int width, int height) {
    const std::vector<std::string>& params = training_log().parameters;
    std::string common = shared_prefix(params);
    std::vector<std::string> labels;
    for (const std::string& p : params) labels.push_back(p.substr(common.size()));
    double names_w = 40;
    for (const std::string& l : labels) names_w = std::max(names_w, text_width(cr, l, 12) + 12);
    names_w = std::min(names_w, width * 0.3);
    double panel = (width - names_w - 40) / 2;
    char title[160];
    snprintf(title, sizeof title, "gradient flow at step %lld%s", static_cast<long long>(training_log().optimizer_steps - 1),
             common.empty() ? "" : ("  (" + common + "*)").c_str());
    draw_title(cr, params.empty() ? std::string("gradient flow (no optimizer step yet)") : std::string(title), width);
    Box left{names_w, 46, names_w + panel, height - 26.0};
    Box right{names_w + panel + 26, 46, names_w + 2 * panel + 26, height - 26.0};
    bool narrow = panel < 220;
    draw_bars(cr, left, latest_values("grad_norm", params), narrow ? "|grad|" : "gradient norm  |grad|", 0, PALETTE[0],
              true, labels);
    draw_bars(cr, right, latest_values("update_ratio", params), narrow ? "|dw| / |w|" : "update / weight  |dw| / |w|",
              1e-3, PALETTE[2], false, labels);
}

// ============================================================================================
// [SECTION] entry points

enum PlotKind { PLOT_NONE, PLOT_SCALAR, PLOT_FAMILY, PLOT_HISTOGRAM, PLOT_FLOW };

PlotKind plot_kind(const std::string& what, std::string* subject) {
    if (what.rfind("hist ", 0) == 0) {
        *subject = what.substr(5);
        size_t a = subject->find_first_not_of(' ');
        *subject = a == std::string::npos ? "" : subject->substr(a);
        return training_is_histogram(*subject) ? PLOT_HISTOGRAM : PLOT_NONE;
    }
    *subject = what;
    if (what == "flow") return PLOT_FLOW;
    if (training_is_scalar(what)) return PLOT_SCALAR;
    if (!training_family(what).empty()) return PLOT_FAMILY;
    return PLOT_NONE;
}

// Draw `what` on a fresh surface, or nullptr with *error.
cairo_surface_t* plot_surface(const std::string& what, int width, int height, std::string* error) {
    if (width < 16 || height < 16 || width > 8192 || height > 8192) {
        *error = "plot: the size must be 16..8192 pixels a side, got " + std::to_string(width) + "x" + std::to_string(height);
        return nullptr;
    }
    std::string subject;
    PlotKind kind = plot_kind(what, &subject);
    if (kind == PLOT_NONE) {
        plot_known(what, error);
        return nullptr;
    }
    cairo_surface_t* surface = cairo_image_surface_create(CAIRO_FORMAT_ARGB32, width, height);
    cairo_t* cr = cairo_create(surface);
    cairo_set_source_rgb(cr, 0.97, 0.97, 0.96);
    cairo_paint(cr);
    switch (kind) {
    case PLOT_SCALAR: draw_lines(cr, width, height, {subject}, "", subject, false, 0); break;
    case PLOT_FAMILY: {
        bool ratio = subject == "update_ratio";
        bool narrow = width < 600;
        std::string title = subject == "grad_norm" ? (narrow ? "|grad|" : "gradient norm per parameter  |grad|")
                            : ratio                ? (narrow ? "|dw| / |w|" : "update / weight per parameter  |dw| / |w|")
                                                   : subject;
        draw_lines(cr, width, height, training_family(subject), subject, title,
                   subject == "grad_norm" || ratio, ratio ? 1e-3 : 0);
        break;
    }
    case PLOT_HISTOGRAM: draw_histogram(cr, width, height, subject); break;
    case PLOT_FLOW: draw_flow(cr, width, height); break;
    case PLOT_NONE: break;
    }
    cairo_destroy(cr);
    cairo_surface_flush(surface);
    return surface;
}

}  // namespace

bool plot_known(const std::string& what, std::string* error) {
    std::string subject;
    if (plot_kind(what, &subject) != PLOT_NONE) return true;
    std::string listing = training_series_listing();
    if (what.rfind("hist ", 0) == 0)
        *error = "plot: no histogram series '" + subject + "' (log one with viewer.log(name, tensor))";
    else
        *error = "plot: no series '" + what + "'";
    *error += listing.empty() ? "; nothing was logged yet (viewer.log(name, value); an optimizer's step() logs by itself at the prompt, with -i, the viewer or a breakpoint, or after viewer.log_options{automatic = true})"
                              : " (there are: " + listing + ", flow)";
    return false;
}

bool plot_render_rgba(const std::string& what, int width, int height, std::vector<unsigned char>* rgba,
                      std::string* error) {
    cairo_surface_t* surface = plot_surface(what, width, height, error);
    if (!surface) return false;
    const unsigned char* data = cairo_image_surface_get_data(surface);
    int stride = cairo_image_surface_get_stride(surface);
    rgba->resize(static_cast<size_t>(width) * height * 4);
    for (int y = 0; y < height; ++y)
        for (int x = 0; x < width; ++x) {   // cairo: premultiplied native-endian ARGB; opaque here
            uint32_t p = *reinterpret_cast<const uint32_t*>(data + y * stride + x * 4);
            unsigned char* out = rgba->data() + (static_cast<size_t>(y) * width + x) * 4;
            out[0] = (p >> 16) & 0xFF, out[1] = (p >> 8) & 0xFF, out[2] = p & 0xFF, out[3] = 0xFF;
        }
    cairo_surface_destroy(surface);
    return true;
}

bool plot_write_png(const std::string& what, const std::string& path, int width, int height, std::string* error) {
    cairo_surface_t* surface = plot_surface(what, width, height, error);
    if (!surface) return false;
    std::string bytes;   // the PNG in memory, then written whole or not at all (file_whole.h)
    auto append = [](void* out, const unsigned char* data, unsigned int length) {
        static_cast<std::string*>(out)->append(reinterpret_cast<const char*>(data), length);
        return CAIRO_STATUS_SUCCESS;
    };
    cairo_status_t status = cairo_surface_write_to_png_stream(surface, append, &bytes);
    cairo_surface_destroy(surface);
    try {
        if (status != CAIRO_STATUS_SUCCESS) td::engine_fail("plot: cannot write %s: %s", path.c_str(), cairo_status_to_string(status));
        td::file_write_whole(path, bytes, "plot");
    } catch (const td::EngineError& e) {
        *error = e.what();
        return false;
    }
    return true;
}

bool png_stats(const std::string& path, int* width, int* height, size_t* colours, std::string* error) {
    cairo_surface_t* surface = cairo_image_surface_create_from_png(path.c_str());
    if (cairo_surface_status(surface) != CAIRO_STATUS_SUCCESS) {
        *error = "cannot read '" + path + "' (" + cairo_status_to_string(cairo_surface_status(surface)) + ")";
        cairo_surface_destroy(surface);
        return false;
    }
    *width = cairo_image_surface_get_width(surface);
    *height = cairo_image_surface_get_height(surface);
    const unsigned char* data = cairo_image_surface_get_data(surface);
    int stride = cairo_image_surface_get_stride(surface);
    std::vector<uint32_t> pixels;
    for (int y = 0; y < *height; ++y)
        for (int x = 0; x < *width; ++x) pixels.push_back(*reinterpret_cast<const uint32_t*>(data + y * stride + x * 4));
    std::sort(pixels.begin(), pixels.end());
    *colours = static_cast<size_t>(std::unique(pixels.begin(), pixels.end()) - pixels.begin());
    cairo_surface_destroy(surface);
    return true;
}

}  // namespace td
