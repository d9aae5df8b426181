// npy.cpp: NumPy .npy files (npy.h), and reading whole files for the loaders.
//
//   magic    "\x93NUMPY", u8 major, u8 minor (1.0, 2.0 or 3.0)
//   length   of the header: u16 (1.0) or u32 (2.0, 3.0), little-endian
//   header   a Python dict literal, padded with spaces and ended by '\n':
//            {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
//   data     numel elements of the descr's type, C order
//
// The header is parsed by a small strict grammar, not searched for keys: a header NumPy would not
// have written is an error that says what is wrong, never a tensor of some other shape.
//
// [SECTION] files     file_read_bytes, bytes_text
// [SECTION] save      npy_save
// [SECTION] header    the header parser
// [SECTION] load      npy_load_bytes, npy_load
#include "npy.h"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace td {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "npy.cpp reads and writes little-endian data as it is");

// ============================================================================================
// [SECTION] files

std::string bytes_text(size_t bytes) {
    char buffer[64];
    if (bytes >= (size_t(1) << 30)) snprintf(buffer, sizeof buffer, "%.2f GB", static_cast<double>(bytes) / (1u << 30));
    else if (bytes >= (size_t(1) << 20)) snprintf(buffer, sizeof buffer, "%.1f MB", static_cast<double>(bytes) / (1u << 20));
    else snprintf(buffer, sizeof buffer, "%zu bytes", bytes);
    return buffer;
}

std::string file_read_bytes(const std::string& path, const char* function, size_t max_bytes) {
    std::error_code error;
    if (std::filesystem::is_directory(path, error))
        engine_fail("%s: %s is a directory, not a file", function, path.c_str());
    std::ifstream in(path, std::ios::binary);
    if (!in) engine_fail("%s: cannot open %s: %s", function, path.c_str(), std::strerror(errno));
    std::string bytes;
    std::streamoff size = in.seekg(0, std::ios::end) ? static_cast<std::streamoff>(in.tellg()) : -1;
    in.clear();
    in.seekg(0, std::ios::beg);
    if (size > 0 && static_cast<uint64_t>(size) <= max_bytes) bytes.reserve(static_cast<size_t>(size));
    char chunk[1 << 16];
    while (in.read(chunk, sizeof chunk) || in.gcount() > 0) {
        bytes.append(chunk, static_cast<size_t>(in.gcount()));
        if (bytes.size() > max_bytes)
            engine_fail("%s: %s: the file is larger than the bound of %s", function, path.c_str(), bytes_text(max_bytes).c_str());
    }
    if (in.bad()) engine_fail("%s: cannot read %s: %s", function, path.c_str(), std::strerror(errno));
    return bytes;
}

// ============================================================================================
// [SECTION] save

namespace {

const char* npy_descr(DType d) { return d == DTYPE_F32 ? "<f4" : d == DTYPE_F64 ? "<f8" : "<i8"; }

}  // namespace

void npy_save(const Value& value, const std::string& path) {
    std::string shape = "(";
    for (int i = 0; i < value.shape.ndim; ++i) {
        shape += std::to_string(value.shape.dims[i]);
        shape += value.shape.ndim == 1 ? "," : i + 1 < value.shape.ndim ? ", " : "";
    }
    shape += ")";
    std::string header = std::string("{'descr': '") + npy_descr(value.dtype) + "', 'fortran_order': False, 'shape': " + shape + ", }";
    size_t total = 10 + header.size() + 1;   // magic, version and length, the header, '\n'
    header.append((64 - total % 64) % 64, ' ');
    header += '\n';
    if (header.size() > 65535) engine_fail("save_npy: %s: the header is too long", path.c_str());
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    if (!out) engine_fail("save_npy: cannot write %s: %s", path.c_str(), std::strerror(errno));
    out.write("\x93NUMPY\x01\x00", 8);
    uint16_t length = static_cast<uint16_t>(header.size());
    out.write(reinterpret_cast<const char*>(&length), 2);
    out.write(header.data(), static_cast<std::streamsize>(header.size()));
    Value elements = value_contiguous(value);   // a view's elements in row-major order
    out.write(static_cast<const char*>(elements.raw()), static_cast<std::streamsize>(value.numel() * dtype_size(value.dtype)));
    if (!out) engine_fail("save_npy: cannot write %s", path.c_str());
}

// ============================================================================================
// [SECTION] header

namespace {

// What an element of the file is: kind 'f' (float), 'i' (signed), 'u' (unsigned) or 'b' (bool),
// its width in bytes, and whether its bytes are big-endian.
struct NpyElement {
    char kind = 0;
    int width = 0;
    bool big_endian = false;
};

struct NpyHeader {
    NpyElement element;
    DType dtype = DTYPE_F32;
    Shape shape;
};

// The header text for a message: printable ASCII, the rest escaped, at most 120 characters.
std::string header_shown(const std::string& text) {
    std::string shown;
    for (unsigned char ch : text) {
        if (shown.size() >= 120) return shown + "...";
        if (ch >= 32 && ch < 127) {
            shown += static_cast<char>(ch);
        } else {
            char escaped[8];
            snprintf(escaped, sizeof escaped, ch == '\n' ? "\\n" : "\\x%02x", ch);
            shown += escaped;
        }
    }
    return shown;
}

// The header dict, by a grammar that accepts what Python's literal syntax accepts for it (either
// quote, any spacing and newlines, an optional trailing comma) and nothing else.
struct HeaderParser {
    const std::string& text;
    const std::string& name;
    size_t at = 0;

    [[noreturn]] void bad(const std::string& why) const {
        engine_fail("load_npy: %s: %s (header: %s)", name.c_str(), why.c_str(), header_shown(text).c_str());
    }
    void skip_space() {
        while (at < text.size() && (text[at] == ' ' || text[at] == '\t' || text[at] == '\n' || text[at] == '\r')) ++at;
    }
    bool take(char c) {
        skip_space();
        if (at < text.size() && text[at] == c) {
            ++at;
            return true;
        }
        return false;
    }
    void expect(char c, const std::string& where) {
        if (!take(c)) bad(std::string("expected '") + c + "' " + where);
    }
    std::string string_literal(const char* what) {
        skip_space();
        if (at >= text.size() || (text[at] != '\'' && text[at] != '"')) bad(std::string(what) + " is not a quoted string");
        char quote = text[at++];
        size_t start = at;
        while (at < text.size() && text[at] != quote) {
            unsigned char ch = static_cast<unsigned char>(text[at]);
            if (ch < 32 || ch >= 127 || ch == '\\') bad(std::string(what) + " holds a character NumPy does not write");
            ++at;
        }
        if (at >= text.size()) bad(std::string(what) + " is not closed");
        return text.substr(start, at++ - start);
    }
    bool boolean_literal() {
        skip_space();
        for (const char* word : {"True", "False"}) {
            size_t n = strlen(word);
            if (text.compare(at, n, word) == 0) {
                at += n;
                return word[0] == 'T';
            }
        }
        bad("'fortran_order' is not True or False");
    }
    // A non-negative decimal integer, as Python writes it (no sign, no leading zeros, no '_').
    int64_t size_literal() {
        skip_space();
        size_t start = at;
        int64_t value = 0;
        while (at < text.size() && text[at] >= '0' && text[at] <= '9') {
            if (__builtin_mul_overflow(value, int64_t(10), &value) || __builtin_add_overflow(value, int64_t(text[at] - '0'), &value))
                bad("a size in 'shape' does not fit in 64 bits");
            ++at;
        }
        if (at == start) bad("'shape' is not a tuple of non-negative decimal integers");
        if (text[start] == '0' && at - start > 1) bad("a size in 'shape' has leading zeros");
        return value;
    }
    Shape shape_literal() {
        expect('(', "to open the tuple 'shape'");
        Shape shape;
        bool comma_after_last = false;
        while (!take(')')) {
            if (shape.ndim == MAX_DIMS) bad("'shape' has more than " + std::to_string(MAX_DIMS) + " dims");
            shape.dims[shape.ndim++] = size_literal();
            comma_after_last = take(',');
            if (!comma_after_last) {
                expect(')', "after the last size of 'shape'");
                break;
            }
        }
        if (shape.ndim == 1 && !comma_after_last) bad("'shape' (n) is a number, not a tuple: a 1-d shape is (n,)");
        return shape;
    }
    NpyElement descr_of(const std::string& descr) const {
        NpyElement e;
        bool ok = descr.size() >= 3 && strchr("<>|=", descr[0]) && strchr("fiub", descr[1]);
        for (size_t i = 2; ok && i < descr.size(); ++i) ok = descr[i] >= '0' && descr[i] <= '9';
        if (ok) {
            e.kind = descr[1];
            e.width = descr.size() == 3 ? descr[2] - '0' : -1;
            e.big_endian = descr[0] == '>';
        }
        bool supported = (e.kind == 'f' && (e.width == 2 || e.width == 4 || e.width == 8)) ||
                         ((e.kind == 'i' || e.kind == 'u') && (e.width == 1 || e.width == 2 || e.width == 4 || e.width == 8)) ||
                         (e.kind == 'b' && e.width == 1);
        if (!ok || !supported)
            engine_fail("load_npy: %s: unsupported dtype '%s' (float16/32/64, int8..64, uint8..64 and bool are)", name.c_str(),
                        descr.c_str());
        return e;
    }

    NpyHeader parse() {
        NpyHeader h;
        bool seen_descr = false, seen_fortran = false, seen_shape = false;
        expect('{', "at the start of the header dict");
        while (!take('}')) {
            if (at >= text.size()) bad("the header dict is not closed with '}'");
            std::string key = string_literal("a key of the header dict");
            expect(':', "after the key '" + key + "'");
            bool* seen = key == "descr" ? &seen_descr : key == "fortran_order" ? &seen_fortran : key == "shape" ? &seen_shape : nullptr;
            if (!seen) bad("unknown key '" + key + "' (a .npy header has 'descr', 'fortran_order' and 'shape')");
            if (*seen) bad("the key '" + key + "' is given twice");
            *seen = true;
            if (key == "descr") h.element = descr_of(string_literal("'descr'"));
            else if (key == "fortran_order") {
                if (boolean_literal())
                    engine_fail("load_npy: %s: Fortran-order arrays are not supported (save with order='C')", name.c_str());
            } else h.shape = shape_literal();
            if (!take(',')) {
                expect('}', "after the last entry of the header dict");
                break;
            }
        }
        skip_space();
        if (at != text.size()) bad("something follows the header dict");
        if (!seen_descr || !seen_fortran || !seen_shape)
            bad(std::string("the key '") + (!seen_descr ? "descr" : !seen_fortran ? "fortran_order" : "shape") + "' is missing");
        const NpyElement& e = h.element;
        h.dtype = e.kind == 'f' ? (e.width == 8 ? DTYPE_F64 : DTYPE_F32) : DTYPE_I64;
        return h;
    }
};

uint64_t read_element_bits(const unsigned char* at, const NpyElement& e) {
    uint64_t bits = 0;
    for (int b = 0; b < e.width; ++b) {
        uint64_t byte = at[e.big_endian ? e.width - 1 - b : b];
        bits |= byte << (8 * b);
    }
    return bits;
}

float half_to_float(uint64_t bits) {
    int sign = static_cast<int>(bits >> 15) & 1, exponent = static_cast<int>(bits >> 10) & 31;
    int mantissa = static_cast<int>(bits & 1023);
    double x;
    if (exponent == 0) x = std::ldexp(mantissa, -24);
    else if (exponent == 31) x = mantissa ? NAN : INFINITY;
    else x = std::ldexp(mantissa + 1024, exponent - 25);
    return static_cast<float>(sign ? -x : x);
}

// Converts n elements of the file at `src` into v (of the header's dtype).
void convert_elements(const unsigned char* src, int64_t n, const NpyElement& e, const Value& v, const std::string& name) {
    bool as_is = !e.big_endian && ((e.kind == 'f' && e.width >= 4) || (e.kind == 'i' && e.width == 8));
    if (as_is) {
        std::memcpy(v.raw(), src, static_cast<size_t>(n) * static_cast<size_t>(e.width));
        return;
    }
    for (int64_t i = 0; i < n; ++i) {
        uint64_t bits = read_element_bits(src + i * e.width, e);
        switch (e.kind) {
            case 'f':
                if (e.width == 2) v.data<float>()[i] = half_to_float(bits);
                else if (e.width == 4) std::memcpy(v.data<float>() + i, &bits, 4);
                else std::memcpy(v.data<double>() + i, &bits, 8);
                break;
            case 'i': {
                int shift = 64 - 8 * e.width;   // sign-extend
                v.data<int64_t>()[i] = static_cast<int64_t>(bits << shift) >> shift;
                break;
            }
            case 'u':
                if (bits > static_cast<uint64_t>(INT64_MAX))
                    engine_fail("load_npy: %s: element %lld (%llu) of the uint64 array does not fit int64", name.c_str(),
                                static_cast<long long>(i), static_cast<unsigned long long>(bits));
                v.data<int64_t>()[i] = static_cast<int64_t>(bits);
                break;
            case 'b':
                if (bits > 1)
                    engine_fail("load_npy: %s: element %lld of the bool array holds %llu (0 or 1 expected)", name.c_str(),
                                static_cast<long long>(i), static_cast<unsigned long long>(bits));
                v.data<int64_t>()[i] = static_cast<int64_t>(bits);
                break;
        }
    }
}

}  // namespace

// ============================================================================================
// [SECTION] load

Value npy_load_bytes(const std::string& bytes, const std::string& name) {
    const char* p = name.c_str();
    if (bytes.size() < 8 || bytes.compare(0, 6, "\x93NUMPY") != 0)
        engine_fail("load_npy: %s: not a .npy file (it does not start with \\x93NUMPY)", p);
    int major = static_cast<unsigned char>(bytes[6]), minor = static_cast<unsigned char>(bytes[7]);
    if (major < 1 || major > 3 || minor != 0)
        engine_fail("load_npy: %s: .npy format version %d.%d is not supported (1.0, 2.0 and 3.0 are)", p, major, minor);
    size_t at = major == 1 ? 10 : 12;
    if (bytes.size() < at) engine_fail("load_npy: %s: the file ends inside its header length", p);
    const unsigned char* u = reinterpret_cast<const unsigned char*>(bytes.data());
    size_t header_length = u[8] | (size_t(u[9]) << 8);
    if (major > 1) header_length |= (size_t(u[10]) << 16) | (size_t(u[11]) << 24);
    if (header_length > bytes.size() - at)
        engine_fail("load_npy: %s: the file ends inside its header (%zu bytes announced, %zu there)", p, header_length,
                    bytes.size() - at);
    std::string header_text = bytes.substr(at, header_length);
    at += header_length;
    NpyHeader h = HeaderParser{header_text, name}.parse();

    int64_t numel = 0;
    if (!shape_numel_fits(h.shape, &numel))
        engine_fail("load_npy: %s: shape %s has more elements than a tensor can hold", p, h.shape.str().c_str());
    size_t data_bytes = static_cast<size_t>(numel) * static_cast<size_t>(h.element.width);   // numel * 8 fits (checked)
    size_t there = bytes.size() - at;
    if (there < data_bytes)
        engine_fail("load_npy: %s: the data is truncated (%zu bytes for %lld elements of %d bytes, shape %s)", p, there,
                    static_cast<long long>(numel), h.element.width, h.shape.str().c_str());
    if (there > data_bytes)
        engine_fail("load_npy: %s: %zu bytes follow the data of shape %s", p, there - data_bytes, h.shape.str().c_str());
    Value v;
    try {
        v = value_new(h.shape, h.dtype);
    } catch (const EngineError& e) {
        engine_fail("load_npy: %s: %s", p, e.what());
    }
    convert_elements(u + at, numel, h.element, v, name);
    return v;
}

Value npy_load(const std::string& path) { return npy_load_bytes(file_read_bytes(path, "load_npy", memory_limit_bytes()), path); }

}  // namespace td
