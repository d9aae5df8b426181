// png_write.h: images as PNG files (libpng), for pictures a script makes (torch.save_png).
#pragma once

#include <cstdint>
#include <string>

#include "tensor.h"

namespace td {

// The largest width or height png_save accepts (libpng's own default limit is 1,000,000).
constexpr int64_t PNG_MAX_SIDE = 16384;

// Writes `height` x `width` pixels of `channels` 8-bit samples each (1 gray, 3 RGB, 4 RGBA),
// row-major from the top-left, to `path` as a PNG file. An error naming `function` and the
// file when it cannot be written.
void png_write_pixels(const std::string& path, const uint8_t* pixels, int width, int height, int channels,
                      const char* function);

// Which 3-d layout an image tensor has; AUTO tells them apart by which dim is 1, 3 or 4 and is an
// error when both are (a [3, 5, 3] image).
enum PngLayout { PNG_LAYOUT_AUTO, PNG_LAYOUT_CHW, PNG_LAYOUT_HWC };

// Writes an image tensor as a PNG: [H, W] gray, [C, H, W] (C = 1, 3 or 4, as torchvision's
// write_png) or [H, W, C]. Values are 0..255 in any dtype; floats are rounded to the nearest
// integer. Errors (naming save_png) for another shape, a side of 0 or over PNG_MAX_SIDE, a value
// outside [0, 255] or NaN (naming its pixel), an unwritable path. An image on another device is
// read through one host copy (value_to_host).
void png_save(const Value& image, const std::string& path, PngLayout hint = PNG_LAYOUT_AUTO);

}  // namespace td
