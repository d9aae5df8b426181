// png_write.cpp: PNG files through libpng's simplified write API (no setjmp/longjmp in our code:
// libpng reports errors in png_image.message and returns 0).
#include "png_write.h"

#include "file_whole.h"

#include <png.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

namespace td {

namespace {

png_uint_32 png_format_of(int channels) {
    switch (channels) {
        case 1: return PNG_FORMAT_GRAY;
        case 3: return PNG_FORMAT_RGB;
        case 4: return PNG_FORMAT_RGBA;
        default: engine_fail("png: %d channels (expected 1, 3 or 4)", channels);
    }
}

// How an image tensor's elements map to pixels: the pixel grid and where channel c of pixel
// (y, x) sits among the row-major elements.
struct ImageLayout {
    int64_t height = 0, width = 0, channels = 0;
    bool channels_first = false;
    int64_t element(int64_t y, int64_t x, int64_t c) const {
        return channels_first ? (c * height + y) * width + x : (y * width + x) * channels + c;
    }
};

bool is_channel_count(int64_t n) { return n == 1 || n == 3 || n == 4; }

ImageLayout image_layout(const Shape& shape, PngLayout hint) {
    ImageLayout layout;
    std::string shown = shape.str();
    bool first = shape.ndim == 3 && is_channel_count(shape[0]), last = shape.ndim == 3 && is_channel_count(shape[2]);
    if (shape.ndim == 3 && hint == PNG_LAYOUT_AUTO && first && last)
        engine_fail("save_png: shape %s could be [C, H, W] or [H, W, C]: say which with {layout = \"CHW\"} or {layout = \"HWC\"}",
                    shown.c_str());
    if (shape.ndim == 2) {
        layout = {shape[0], shape[1], 1, true};
    } else if (first && hint != PNG_LAYOUT_HWC) {
        layout = {shape[1], shape[2], shape[0], true};
    } else if (last && hint != PNG_LAYOUT_CHW) {
        layout = {shape[0], shape[1], shape[2], false};
    } else {
        engine_fail("save_png: the image must be [H, W] (gray), [C, H, W] or [H, W, C] with C = 1, 3 or 4 channels, got shape %s%s",
                    shown.c_str(), hint == PNG_LAYOUT_CHW ? " (layout CHW)" : hint == PNG_LAYOUT_HWC ? " (layout HWC)" : "");
    }
    if (layout.height < 1 || layout.width < 1 || layout.height > PNG_MAX_SIDE || layout.width > PNG_MAX_SIDE)
        engine_fail("save_png: the image is %lld x %lld pixels (shape %s); each side must be 1..%lld", static_cast<long long>(layout.height),
                    static_cast<long long>(layout.width), shown.c_str(), static_cast<long long>(PNG_MAX_SIDE));
    return layout;
}

}  // namespace

void png_write_pixels(const std::string& path, const uint8_t* pixels, int width, int height, int channels, const char* function) {
    png_image image;
    std::memset(&image, 0, sizeof image);
    image.version = PNG_IMAGE_VERSION;
    image.width = static_cast<png_uint_32>(width);
    image.height = static_cast<png_uint_32>(height);
    image.format = png_format_of(channels);
    // Into memory (a first guess at the size, then the size libpng says it needs), then whole to the file.
    png_alloc_size_t size = static_cast<png_alloc_size_t>(width) * static_cast<png_alloc_size_t>(height) * static_cast<png_alloc_size_t>(channels) / 4 + 4096;
    std::string bytes;
    int ok = 0;
    for (int attempt = 0; attempt < 2 && !ok; ++attempt) {
        bytes.resize(size);
        png_alloc_size_t written = size;
        ok = png_image_write_to_memory(&image, bytes.data(), &written, 0, pixels, 0, nullptr);
        if (ok) bytes.resize(written);
        else if (written > size) size = written;   // too small: written is the size it needs
        else break;
    }
    std::string message = image.message;
    png_image_free(&image);
    if (!ok) engine_fail("%s: cannot write %s: %s", function, path.c_str(), message.empty() ? "libpng failed" : message.c_str());
    file_write_whole(path, bytes, function);
}

void png_save(const Value& value, const std::string& path, PngLayout hint) {
    Value image = value_to_host(value);   // read on the host: one copy for a device value
    ImageLayout layout = image_layout(image.shape, hint);
    std::vector<uint8_t> pixels(static_cast<size_t>(layout.height * layout.width * layout.channels));
    size_t at = 0;
    for (int64_t y = 0; y < layout.height; ++y)
        for (int64_t x = 0; x < layout.width; ++x)
            for (int64_t c = 0; c < layout.channels; ++c) {
                double v = value_get(image, layout.element(y, x, c));
                if (!(v >= -0.5 && v < 255.5))   // also NaN
                    engine_fail("save_png: values must be 0..255 (floats are rounded), got %g at row %lld, column %lld, channel %lld "
                                "(1-based) of an image of shape %s", v, static_cast<long long>(y + 1), static_cast<long long>(x + 1),
                                static_cast<long long>(c + 1), image.shape.str().c_str());
                pixels[at++] = static_cast<uint8_t>(std::lround(v));
            }
    png_write_pixels(path, pixels.data(), static_cast<int>(layout.width), static_cast<int>(layout.height),
                     static_cast<int>(layout.channels), "save_png");
}

}  // namespace td
