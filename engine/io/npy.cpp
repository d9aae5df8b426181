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
// [SECTION] save      npy_save
// [SECTION] header    the header parser
// [SECTION] load      npy_load_bytes, npy_load
#include "npy.h"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <vector>

namespace td {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "npy.cpp reads and writes little-endian data as it is");

// ============================================================================================
// [SECTION] save

namespace {

const char* npy_descr(DType d) { return d == DTYPE_F32 ? "<f4" : d == DTYPE_F64 ? "<f8" : "<i8"; }

// The .npy bytes of an array with header dict `descr`/`shape` and `data`: magic, version 1.0, the
// header padded with spaces to a multiple of 64 bytes (as NumPy writes it), then the data.
std::string npy_bytes_with(const char* descr, const Shape& shape, const void* data, size_t data_bytes, const char* function) {
    std::string shape_text = "(";
    for (int i = 0; i < shape.ndim; ++i) {
        shape_text += std::to_string(shape.dims[i]);
        shape_text += shape.ndim == 1 ? "," : i + 1 < shape.ndim ? ", " : "";
    }
    shape_text += ")";
    std::string header = std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': " + shape_text + ", }";
    size_t total = 10 + header.size() + 1;   // magic, version and length, the header, '\n'
    header.append((64 - total % 64) % 64, ' ');
    header += '\n';
    if (header.size() > 65535) engine_fail("%s: the .npy header is too long", function);
    std::string bytes("\x93NUMPY\x01\x00", 8);
    uint16_t length = static_cast<uint16_t>(header.size());
    bytes.append(reinterpret_cast<const char*>(&length), 2);
    bytes += header;
    bytes.append(static_cast<const char*>(data), data_bytes);
    return bytes;
}

// Whether `text` is well-formed UTF-8 (no overlong forms, surrogates or code points past U+10FFFF);
// its code points into `out` when it is.
bool utf8_decode(const std::string& text, std::vector<uint32_t>* out) {
    const unsigned char* s = reinterpret_cast<const unsigned char*>(text.data());
    size_t n = text.size(), i = 0;
    while (i < n) {
        uint32_t c = s[i];
        int more = c < 0x80 ? 0 : (c >> 5) == 6 ? 1 : (c >> 4) == 14 ? 2 : (c >> 3) == 30 ? 3 : -1;
        if (more < 0 || n - i <= static_cast<size_t>(more)) return false;   // the sequence is cut off
        if (more > 0) c &= 0x3F >> more;
        for (int k = 1; k <= more; ++k) {
            if ((s[i + k] & 0xC0) != 0x80) return false;
            c = (c << 6) | (s[i + k] & 0x3F);
        }
        static const uint32_t least[4] = {0, 0x80, 0x800, 0x10000};
        if (c < least[more] || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return false;
        out->push_back(c);
        i += static_cast<size_t>(more) + 1;
    }
    return true;
}

}  // namespace

bool utf8_valid(const std::string& text) {
    std::vector<uint32_t> ignored;
    return utf8_decode(text, &ignored);
}

std::string npy_bytes_of(const Value& value) {
    Value elements = value_contiguous(value_to_host(value));   // a view's elements in row-major order
    return npy_bytes_with(npy_descr(value.dtype), value.shape, elements.raw(), static_cast<size_t>(value.numel()) * dtype_size(value.dtype),
                          "save_npy");
}

std::string npy_bytes_of_string(const std::string& text, const char* function) {
    if (!text.empty() && text.back() == '\0')
        engine_fail("%s: a string that ends with a NUL byte cannot be saved in .npy (NumPy drops trailing NULs)", function);
    std::vector<uint32_t> code_points;
    if (!utf8_decode(text, &code_points))   // not UTF-8: the bytes as they are, a 'S' (bytes) array
        return npy_bytes_with(("|S" + std::to_string(text.size())).c_str(), Shape{}, text.data(), text.size(), function);
    if (code_points.empty()) code_points.push_back(0);   // NumPy writes "" as '<U1' holding one NUL
    return npy_bytes_with(("<U" + std::to_string(code_points.size())).c_str(), Shape{}, code_points.data(), code_points.size() * 4,
                          function);
}

void npy_save(const Value& value, const std::string& path) {
    file_write_whole(path, npy_bytes_of(value), "save_npy");
}

// ============================================================================================
// [SECTION] header

namespace {

// What an element of the file is: kind 'f' (float), 'i' (signed), 'u' (unsigned), 'b' (bool),
// 'U' (a string of `width` / 4 UTF-32 code points) or 'S' (a string of `width` bytes), its width
// in bytes, and whether its bytes are big-endian.
struct NpyElement {
    char kind = 0;
    int64_t width = 0;
    bool big_endian = false;
};

struct NpyHeader {
    NpyElement element;
    DType dtype = DTYPE_F32;
    Shape shape;
    bool fortran_order = false;   // the data is column-major (the first index varies fastest)
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
    const char* function;
    size_t at = 0;

    [[noreturn]] void bad(const std::string& why) const {
        engine_fail("%s: %s: %s (header: %s)", function, name.c_str(), why.c_str(), header_shown(text).c_str());
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
    // A string dtype: '<U5', '>U5' (5 UTF-32 code points), '|S5' (5 bytes); width 0 when not one.
    NpyElement string_descr_of(const std::string& descr) const {
        NpyElement e;
        bool ok = descr.size() >= 3 && descr.size() <= 12 && strchr("<>|=", descr[0]) && (descr[1] == 'U' || descr[1] == 'S');
        for (size_t i = 2; ok && i < descr.size(); ++i) ok = descr[i] >= '0' && descr[i] <= '9';
        if (!ok) return e;
        e.kind = descr[1];
        e.width = std::stoll(descr.substr(2)) * (e.kind == 'U' ? 4 : 1);
        e.big_endian = descr[0] == '>';
        return e;
    }
    NpyElement descr_of(const std::string& descr) const {
        if (descr == "|O" || descr == "O" || descr == "<O" || descr == ">O")
            engine_fail("%s: %s: the array holds Python objects (dtype object, stored as a pickle): tapedeck never runs "
                        "pickles; save numeric arrays or strings",
                        function, name.c_str());
        NpyElement e = string_descr_of(descr);
        if (e.width > 0) return e;
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
            engine_fail("%s: %s: unsupported dtype '%s' (float16/32/64, int8..64, uint8..64, bool and strings are)", function,
                        name.c_str(), descr.c_str());
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
            else if (key == "fortran_order") h.fortran_order = boolean_literal();
            else h.shape = shape_literal();
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
void convert_elements(const unsigned char* src, int64_t n, const NpyElement& e, const Value& v, const std::string& name,
                      const char* function) {
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
                    engine_fail("%s: %s: element %lld (%llu) of the uint64 array does not fit int64", function, name.c_str(),
                                static_cast<long long>(i), static_cast<unsigned long long>(bits));
                v.data<int64_t>()[i] = static_cast<int64_t>(bits);
                break;
            case 'b':
                if (bits > 1)
                    engine_fail("%s: %s: element %lld of the bool array holds %llu (0 or 1 expected)", function, name.c_str(),
                                static_cast<long long>(i), static_cast<unsigned long long>(bits));
                v.data<int64_t>()[i] = static_cast<int64_t>(bits);
                break;
        }
    }
}

// The string a 0-d 'U' or 'S' array holds at `src`, as NumPy reads it: trailing NULs dropped,
// UTF-32 code points written as UTF-8 (an invalid code point is an error).
std::string string_element(const unsigned char* src, const NpyElement& e, const std::string& name, const char* function) {
    std::string text;
    if (e.kind == 'S') {
        text.assign(reinterpret_cast<const char*>(src), static_cast<size_t>(e.width));
    } else {
        for (int64_t i = 0; i < e.width / 4; ++i) {
            NpyElement unit{'u', 4, e.big_endian};
            uint64_t c = read_element_bits(src + 4 * i, unit);
            if (c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF))
                engine_fail("%s: %s: the string holds an invalid code point U+%llX", function, name.c_str(), static_cast<unsigned long long>(c));
            if (c < 0x80) text += static_cast<char>(c);
            else if (c < 0x800) text += {static_cast<char>(0xC0 | (c >> 6)), static_cast<char>(0x80 | (c & 0x3F))};
            else if (c < 0x10000)
                text += {static_cast<char>(0xE0 | (c >> 12)), static_cast<char>(0x80 | ((c >> 6) & 0x3F)), static_cast<char>(0x80 | (c & 0x3F))};
            else
                text += {static_cast<char>(0xF0 | (c >> 18)), static_cast<char>(0x80 | ((c >> 12) & 0x3F)),
                         static_cast<char>(0x80 | ((c >> 6) & 0x3F)), static_cast<char>(0x80 | (c & 0x3F))};
        }
    }
    while (!text.empty() && text.back() == '\0') text.pop_back();
    return text;
}

// The tensor whose column-major elements `v` holds in row-major order (as NumPy reads a file
// with fortran_order True): a transposing view of them, made contiguous.
Value from_fortran_order(const Value& v) {
    if (v.shape.ndim < 2) return v;
    Shape reversed;
    reversed.ndim = v.shape.ndim;
    for (int d = 0; d < v.shape.ndim; ++d) reversed.dims[d] = v.shape.dims[v.shape.ndim - 1 - d];
    int64_t reversed_strides[MAX_DIMS], strides[MAX_DIMS];
    shape_contiguous_strides(reversed, reversed_strides);
    for (int d = 0; d < v.shape.ndim; ++d) strides[d] = reversed_strides[v.shape.ndim - 1 - d];
    Value view = v;
    view_set_layout(view, v.offset, strides);
    return value_contiguous(view);
}

}  // namespace

// ============================================================================================
// [SECTION] load

NpyContent npy_parse_bytes(const std::string& bytes, const std::string& name, const char* function) {
    const char* p = name.c_str();
    if (bytes.size() < 8 || bytes.compare(0, 6, "\x93NUMPY") != 0)
        engine_fail("%s: %s: not a .npy file (it does not start with \\x93NUMPY)", function, p);
    int major = static_cast<unsigned char>(bytes[6]), minor = static_cast<unsigned char>(bytes[7]);
    if (major < 1 || major > 3 || minor != 0)
        engine_fail("%s: %s: .npy format version %d.%d is not supported (1.0, 2.0 and 3.0 are)", function, p, major, minor);
    size_t at = major == 1 ? 10 : 12;
    if (bytes.size() < at) engine_fail("%s: %s: the file ends inside its header length", function, p);
    const unsigned char* u = reinterpret_cast<const unsigned char*>(bytes.data());
    size_t header_length = u[8] | (size_t(u[9]) << 8);
    if (major > 1) header_length |= (size_t(u[10]) << 16) | (size_t(u[11]) << 24);
    if (header_length > bytes.size() - at)
        engine_fail("%s: %s: the file ends inside its header (%zu bytes announced, %zu there)", function, p, header_length,
                    bytes.size() - at);
    std::string header_text = bytes.substr(at, header_length);
    at += header_length;
    NpyHeader h = HeaderParser{header_text, name, function}.parse();
    bool is_string = h.element.kind == 'U' || h.element.kind == 'S';
    if (is_string && h.shape.ndim != 0)
        engine_fail("%s: %s: an array of strings (shape %s) is not supported: a single string (a 0-d array) is", function, p,
                    h.shape.str().c_str());

    int64_t numel = 0;
    if (!shape_numel_fits(h.shape, &numel))
        engine_fail("%s: %s: shape %s has more elements than a tensor can hold", function, p, h.shape.str().c_str());
    size_t data_bytes = static_cast<size_t>(numel) * static_cast<size_t>(h.element.width);   // numel * 8 fits (checked); strings: numel 1
    size_t there = bytes.size() - at;
    if (there < data_bytes)
        engine_fail("%s: %s: the data is truncated (%zu bytes for %lld elements of %lld bytes, shape %s)", function, p, there,
                    static_cast<long long>(numel), static_cast<long long>(h.element.width), h.shape.str().c_str());
    if (there > data_bytes)
        engine_fail("%s: %s: %zu bytes follow the data of shape %s", function, p, there - data_bytes, h.shape.str().c_str());
    NpyContent content;
    if (is_string) {
        content.is_string = true;
        content.text = string_element(u + at, h.element, name, function);
        return content;
    }
    try {
        content.tensor = value_new(h.shape, h.dtype);
    } catch (const EngineError& e) {
        engine_fail("%s: %s: %s", function, p, e.what());
    }
    convert_elements(u + at, numel, h.element, content.tensor, name, function);
    if (h.fortran_order) content.tensor = from_fortran_order(content.tensor);
    return content;
}

Value npy_load_bytes(const std::string& bytes, const std::string& name) {
    NpyContent content = npy_parse_bytes(bytes, name, "load_npy");
    if (content.is_string) engine_fail("load_npy: %s: the file holds a string, not an array of numbers", name.c_str());
    return content.tensor;
}

Value npy_load(const std::string& path) { return npy_load_bytes(file_read_bytes(path, "load_npy", memory_limit_bytes()), path); }

}  // namespace td
