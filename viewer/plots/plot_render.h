// plot_render.h: the training log's pictures, drawn with cairo: the same pixels go into
// a PNG (`:plot NAME out.png`, viewer.plot) and, as a texture, into the Training window. No GL, no
// display: a script in CI writes its plots headless.
//
// What a plot name shows:
//   a scalar series ("loss", "grad_norm/fc1.weight")  its points over the steps (log y when every
//                                                      value is positive and they span > 2 decades)
//   a prefix of series ("grad_norm", "update_ratio")  one line per series (per parameter), log y;
//                                                      update_ratio with its 1e-3 guide line
//   "hist NAME"                                        a histogram series as an image: steps on x,
//                                                      value on y, each step's counts as brightness
//   "flow"                                             gradient flow: per parameter, bars of the
//                                                      latest gradient norm and update ratio (log x)
#pragma once

#include <string>
#include <vector>

namespace td {

constexpr int PLOT_DEFAULT_WIDTH = 800;
constexpr int PLOT_DEFAULT_HEIGHT = 450;

// Whether `what` names something to plot (as above); when not, *error says what there is:
// "plot: no series 'x' (there are: loss, grad_norm (4 series), hist h)".
bool plot_known(const std::string& what, std::string* error);
// Render `what` at width x height pixels as RGBA bytes, rows top first (the Training window's
// textures). False with *error when `what` names nothing or the size is out of 16..8192.
bool plot_render_rgba(const std::string& what, int width, int height, std::vector<unsigned char>* rgba,
                      std::string* error);
// Render `what` and write it as a PNG file. False with *error as above, or when the file cannot be
// written ("plot: cannot write 'x/out.png' (No such file or directory)").
bool plot_write_png(const std::string& what, const std::string& path, int width, int height, std::string* error);

// Read a PNG file back: its size and the number of distinct colours (tests check that a plot is
// not blank). False with *error when it cannot be read.
bool png_stats(const std::string& path, int* width, int* height, size_t* colours, std::string* error);

}  // namespace td
