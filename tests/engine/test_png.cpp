// test_png.cpp: png_save writes the pixels it is given (read back with libpng's own reader), in
// each image layout it accepts, and refuses what is not an image with an error naming save_png.
#include <catch2/catch.hpp>

#include <png.h>

#include <cstdio>
#include <cstring>
#include <vector>

#include "png_write.h"
#include "test_helpers.h"

using namespace td;
using namespace td_test;

namespace {

struct PngPixels {
    int width = 0, height = 0, channels = 0;
    std::vector<uint8_t> data;   // row-major, channels interleaved
};

// The file read back with libpng's simplified reader, in the format it was written in.
PngPixels png_read(const std::string& path) {
    png_image image;
    std::memset(&image, 0, sizeof image);
    image.version = PNG_IMAGE_VERSION;
    REQUIRE(png_image_begin_read_from_file(&image, path.c_str()) != 0);
    PngPixels out;
    out.width = static_cast<int>(image.width);
    out.height = static_cast<int>(image.height);
    out.channels = static_cast<int>(PNG_IMAGE_SAMPLE_CHANNELS(image.format));
    out.data.resize(PNG_IMAGE_SIZE(image));
    REQUIRE(png_image_finish_read(&image, nullptr, out.data.data(), 0, nullptr) != 0);
    return out;
}

std::string temp_png(const char* name) { return std::string(P_tmpdir) + "/tapedeck_test_" + name + ".png"; }

std::string save_error(const Value& v, const std::string& path) {
    try {
        png_save(v, path);
    } catch (const std::exception& e) {
        return e.what();
    }
    return "(no error)";
}

}  // namespace

TEST_CASE("png_save writes [H, W, 3] pixels that libpng reads back") {
    // 2 rows x 3 columns, RGB, values rounded from floats
    std::vector<double> values = {255, 0, 0,   0, 255, 0,   0, 0, 255,
                                  10.4, 20.6, 30, 0, 0, 0, 128, 64, 254.5};
    Tensor t = make_tensor(Shape{2, 3, 3}, values, DTYPE_F32);
    std::string path = temp_png("hwc");
    png_save(t.value(), path);
    PngPixels png = png_read(path);
    CHECK(png.width == 3);
    CHECK(png.height == 2);
    CHECK(png.channels == 3);
    std::vector<uint8_t> expected = {255, 0, 0, 0, 255, 0, 0, 0, 255, 10, 21, 30, 0, 0, 0, 128, 64, 255};
    CHECK(png.data == expected);
    std::remove(path.c_str());
}

TEST_CASE("png_save reads [3, H, W] channels-first and [H, W] gray") {
    // channel-first: R plane, G plane, B plane of a 1 x 2 image
    Tensor chw = make_tensor(Shape{3, 1, 2}, {1, 2, 3, 4, 5, 6}, DTYPE_I64);
    std::string path = temp_png("chw");
    png_save(chw.value(), path);
    PngPixels png = png_read(path);
    CHECK(png.width == 2);
    CHECK(png.height == 1);
    CHECK(png.data == std::vector<uint8_t>{1, 3, 5, 2, 4, 6});

    Tensor gray = make_tensor(Shape{2, 2}, {0, 50, 100, 200}, DTYPE_F64);
    png_save(gray.value(), path);
    png = png_read(path);
    CHECK(png.channels == 1);
    CHECK(png.data == std::vector<uint8_t>{0, 50, 100, 200});
    std::remove(path.c_str());
}

TEST_CASE("png_save refuses what is not an image, naming save_png") {
    std::string path = temp_png("bad");
    CHECK_THAT(save_error(make_tensor(Shape{4}, {1, 2, 3, 4}).value(), path), Catch::Contains("save_png: the image must be [H, W]"));
    CHECK_THAT(save_error(make_tensor(Shape{2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8}).value(), path), Catch::Contains("got shape [2,2,2]"));
    CHECK_THAT(save_error(make_tensor(Shape{0, 3}, {}).value(), path), Catch::Contains("each side must be 1..16384"));
    CHECK_THAT(save_error(make_tensor(Shape{1, 2}, {3, 256}).value(), path),
               Catch::Contains("save_png: values must be 0..255 (floats are rounded), got 256 at row 1, column 2"));
    CHECK_THAT(save_error(make_tensor(Shape{1, 1}, {std::nan("")}).value(), path), Catch::Contains("got nan"));
    CHECK_THAT(save_error(make_tensor(Shape{1, 1}, {-1}).value(), path), Catch::Contains("got -1"));
    CHECK_THAT(save_error(make_tensor(Shape{1, 1}, {1}).value(), "/nonexistent/dir/x.png"),
               Catch::Contains("save_png: cannot write /nonexistent/dir/x.png: No such file or directory"));
}

TEST_CASE("png_save asks which layout a [3, H, 3] image has, and follows the hint") {
    std::vector<double> values(18);
    for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<double>(i);
    Tensor t = make_tensor(Shape{3, 2, 3}, values, DTYPE_F64);
    std::string path = temp_png("ambiguous");
    CHECK_THAT(save_error(t.value(), path), Catch::Contains("could be [C, H, W] or [H, W, C]"));
    png_save(t.value(), path, PNG_LAYOUT_HWC);   // 3 rows, 2 columns
    PngPixels png = png_read(path);
    CHECK(png.height == 3);
    CHECK(png.width == 2);
    CHECK(png.data[3] == 3);
    png_save(t.value(), path, PNG_LAYOUT_CHW);   // 2 rows, 3 columns; pixel 1 = (0, 6, 12)
    png = png_read(path);
    CHECK(png.height == 2);
    CHECK(png.width == 3);
    CHECK(png.data[1] == 6);
    CHECK(png.data[2] == 12);
    std::remove(path.c_str());
}
