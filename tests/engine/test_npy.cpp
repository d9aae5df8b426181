// test_npy.cpp: the .npy loader parses the header strictly (a header NumPy would not write is an
// error saying what is wrong, never a tensor of another shape), checks sizes with overflow-safe
// arithmetic, reads every dtype and byte order it supports, and names load_npy and the file in
// every error.
#include <catch2/catch.hpp>

#include <cstring>

#include "npy.h"
#include "test_helpers.h"

using namespace td;
using namespace td_test;

namespace {

// A .npy file: magic, version, header length, the header (padded to 64 as NumPy does), data.
std::string npy_bytes(const std::string& dict, const std::string& data, int major = 1) {
    std::string header = dict;
    size_t prefix = major == 1 ? 10 : 12;
    header.append((64 - (prefix + header.size() + 1) % 64) % 64, ' ');
    header += '\n';
    std::string bytes = "\x93NUMPY";
    bytes += static_cast<char>(major);
    bytes += '\0';
    uint32_t n = static_cast<uint32_t>(header.size());
    bytes.append(reinterpret_cast<const char*>(&n), major == 1 ? 2 : 4);
    return bytes + header + data;
}

template <class T>
std::string raw_of(std::initializer_list<T> values) {
    std::string s;
    for (T v : values) s.append(reinterpret_cast<const char*>(&v), sizeof v);
    return s;
}

std::string npy_error(const std::string& bytes) {
    try {
        Value v = npy_load_bytes(bytes, "bad.npy");
        return "loaded " + v.shape.str();
    } catch (const EngineError& e) {
        return e.what();
    }
}

void check_error(const std::string& bytes, const std::string& want) {
    std::string error = npy_error(bytes);
    INFO(error);
    CHECK(error.rfind("load_npy: bad.npy: ", 0) == 0);
    CHECK(error.find(want) != std::string::npos);
}

}  // namespace

TEST_CASE("npy: a shape whose element count wraps, or that is not a tuple of decimal sizes, is an error") {
    // (2^32, 2^32) wraps to 0 elements in 64 bits: it used to load as an empty tensor of that shape
    check_error(npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }", ""),
                "shape [4294967296,4294967296] has more elements than a tensor can hold");
    // (abc, 2) used to load as [0, 2]
    check_error(npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (abc, 2), }", ""),
                "'shape' is not a tuple of non-negative decimal integers");
    check_error(npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (-1, 2), }", ""),
                "'shape' is not a tuple of non-negative decimal integers");
    check_error(npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }", ""),
                "does not fit in 64 bits");
    check_error(npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (3), }", raw_of<float>({1, 2, 3})),
                "a 1-d shape is (n,)");
    check_error(npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 1, 1, 1, 1, 1), }", raw_of<float>({1})),
                "more than 6 dims");
    check_error(npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (02,), }", raw_of<float>({1, 2})),
                "leading zeros");
    check_error(npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': [2], }", raw_of<float>({1, 2})),
                "expected '(' to open the tuple 'shape'");
}

TEST_CASE("npy: the header dict has exactly descr, fortran_order and shape, and nothing follows it") {
    std::string two = raw_of<float>({1, 2});
    check_error(npy_bytes("{'descr': '<f4', 'shape': (2,), }", two), "the key 'fortran_order' is missing");
    check_error(npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'extra': 1, }", two), "unknown key 'extra'");
    check_error(npy_bytes("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", two),
                "the key 'descr' is given twice");
    check_error(npy_bytes("{'descr': '<f4', 'fortran_order': maybe, 'shape': (2,), }", two), "not True or False");
    check_error(npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), } trailing", two),
                "something follows the header dict");
    check_error(npy_bytes("{'descr': '<c8', 'fortran_order': False, 'shape': (2,), }", two), "unsupported dtype '<c8'");
    check_error(npy_bytes("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }", two), "'descr' is not a quoted string");
    check_error(npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), ", two), "the header dict is not closed with '}'");
}

TEST_CASE("npy: the data must be exactly as long as the shape says") {
    check_error(npy_bytes("{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }", raw_of<double>({1, 2})),
                "the data is truncated (16 bytes for 3 elements of 8 bytes, shape [3])");
    check_error(npy_bytes("{'descr': '<f8', 'fortran_order': False, 'shape': (1,), }", raw_of<double>({1, 2})),
                "8 bytes follow the data of shape [1]");
    check_error(std::string("\x93NUMPY\x01\x00\xff\xff{}", 12), "the file ends inside its header (65535 bytes announced, 2 there)");
    check_error(std::string("\x93NUMPY\x04\x00", 8), "format version 4.0 is not supported");
    check_error("PK\x03\x04 a zip", "not a .npy file");
    check_error(npy_bytes("{'descr': '|b1', 'fortran_order': False, 'shape': (2,), }", std::string("\x01\x02", 2)),
                "element 1 of the bool array holds 2");
    check_error(npy_bytes("{'descr': '<u8', 'fortran_order': False, 'shape': (1,), }", raw_of<uint64_t>({~0ull})),
                "does not fit int64");
}

TEST_CASE("npy: every supported dtype and byte order, versions 1.0 to 3.0, 0-d and empty arrays load") {
    auto load = [](const std::string& bytes) { return npy_load_bytes(bytes, "good.npy"); };
    Value f = load(npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 1), }", raw_of<float>({1.5f, -2})));
    CHECK(f.dtype == DTYPE_F32);
    CHECK(f.shape == Shape{2, 1});
    CHECK(values_of(f) == std::vector<double>{1.5, -2});
    std::string big_i16("\xfe\xd4\x00\x02", 4);   // -300 and 2, big-endian
    Value i = load(npy_bytes("{\"descr\": \">i2\", \"fortran_order\": False, \"shape\": (2,)}", big_i16, 2));
    CHECK(i.dtype == DTYPE_I64);
    CHECK(values_of(i) == std::vector<double>{-300, 2});
    Value h = load(npy_bytes("{'descr': '<f2', 'fortran_order': False, 'shape': (2,), }", raw_of<uint16_t>({0x3800, 0xc000}), 3));
    CHECK(values_of(h) == std::vector<double>{0.5, -2});
    Value b = load(npy_bytes("{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }", std::string("\x01\x00\x01", 3)));
    CHECK(values_of(b) == std::vector<double>{1, 0, 1});
    Value u = load(npy_bytes("{'descr': '|u1', 'fortran_order': False, 'shape': (2,), }", std::string("\xff\x07", 2)));
    CHECK(values_of(u) == std::vector<double>{255, 7});
    Value d = load(npy_bytes("{'descr': '>f8', 'fortran_order': False, 'shape': (), }", std::string("\x3f\xf8\0\0\0\0\0\0", 8)));
    CHECK(d.dtype == DTYPE_F64);
    CHECK(d.shape.ndim == 0);
    CHECK(values_of(d) == std::vector<double>{1.5});
    Value e = load(npy_bytes("{'descr': '<i8', 'fortran_order': False, 'shape': (0, 5), }", ""));
    CHECK(e.shape == Shape{0, 5});
    CHECK(e.numel() == 0);
}

TEST_CASE("npy: npy_save then npy_load give the tensor back; file errors name the function and the file") {
    Tensor t = make_tensor(Shape{2, 3}, {1, 2, 3, 4, 5, 6}, DTYPE_F64);
    npy_save(t.value(), "test_npy_roundtrip.npy");
    Value back = npy_load("test_npy_roundtrip.npy");
    CHECK(back.shape == Shape{2, 3});
    CHECK(values_of(back) == values_of(t));
    std::remove("test_npy_roundtrip.npy");
    try {
        npy_load("no/such/file.npy");
        FAIL("a missing file loaded");
    } catch (const EngineError& e) {
        CHECK(std::string(e.what()) == "load_npy: cannot open no/such/file.npy: No such file or directory");
    }
}

TEST_CASE("npy: a Fortran-order array (numpy.save of a transposed array) loads in row-major order") {
    // A[i][j] = 10 i + j, shape (2, 3), stored column by column: A00 A10 A01 A11 A02 A12
    Value a = npy_load_bytes(npy_bytes("{'descr': '<f8', 'fortran_order': True, 'shape': (2, 3), }", raw_of<double>({0, 10, 1, 11, 2, 12})),
                             "fortran.npy");
    REQUIRE(a.shape == Shape{2, 3});
    for (int64_t k = 0; k < 6; ++k) CHECK(a.data<double>()[k] == 10 * (k / 3) + k % 3);
    // 3-d, int16 widened to int64: B[i][j][k] = 100 i + 10 j + k, shape (2, 2, 2), the first index fastest
    Value b = npy_load_bytes(npy_bytes("{'descr': '<i2', 'fortran_order': True, 'shape': (2, 2, 2), }",
                                       raw_of<int16_t>({0, 100, 10, 110, 1, 101, 11, 111})), "fortran3.npy");
    REQUIRE(b.shape == Shape{2, 2, 2});
    for (int64_t k = 0; k < 8; ++k) CHECK(b.data<int64_t>()[k] == 100 * (k / 4) + 10 * (k / 2 % 2) + k % 2);
    // 1-d and 0-d arrays are the same in both orders
    Value c = npy_load_bytes(npy_bytes("{'descr': '<f4', 'fortran_order': True, 'shape': (2,), }", raw_of<float>({1, 2})), "f1.npy");
    CHECK(c.data<float>()[1] == 2);
}
