// json.cpp: the strict JSON reader and the quoting of json.h.
#include "json.h"

#include <cstdio>

#include "npy.h"   // utf8_valid
#include "tensor.h"

namespace td {

void JsonReader::bad(const std::string& why) const { engine_fail("%s: %s (at byte %zu)", context.c_str(), why.c_str(), at); }

void JsonReader::skip_space() {
    while (at < text.size() && (text[at] == ' ' || text[at] == '\t' || text[at] == '\n' || text[at] == '\r')) ++at;
}

bool JsonReader::take(char c) {
    skip_space();
    if (at < text.size() && text[at] == c) {
        ++at;
        return true;
    }
    return false;
}

void JsonReader::expect(char c, const char* where) {
    if (!take(c)) bad(std::string("expected '") + c + "' " + where);
}

bool JsonReader::at_end() {
    skip_space();
    return at == text.size();
}

namespace {

int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

void append_utf8(std::string& out, uint32_t c) {
    if (c < 0x80) {
        out += static_cast<char>(c);
    } else if (c < 0x800) {
        out += static_cast<char>(0xC0 | (c >> 6));
        out += static_cast<char>(0x80 | (c & 0x3F));
    } else if (c < 0x10000) {
        out += static_cast<char>(0xE0 | (c >> 12));
        out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (c & 0x3F));
    } else {
        out += static_cast<char>(0xF0 | (c >> 18));
        out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
        out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (c & 0x3F));
    }
}

}  // namespace

std::string JsonReader::string(const char* what) {
    skip_space();
    if (at >= text.size() || text[at] != '"') bad(std::string(what) + " is not a string");
    ++at;
    std::string out;
    // The four hex digits of a \u escape at `at`, taken.
    auto hex4 = [&]() -> uint32_t {
        uint32_t value = 0;
        for (int k = 0; k < 4; ++k) {
            int digit = at < text.size() ? hex_digit(text[at]) : -1;
            if (digit < 0) bad(std::string("a \\u escape in ") + what + " is not four hex digits");
            value = value * 16 + static_cast<uint32_t>(digit);
            ++at;
        }
        return value;
    };
    while (true) {
        if (at >= text.size()) bad(std::string(what) + " is not closed");
        unsigned char ch = static_cast<unsigned char>(text[at++]);
        if (ch == '"') break;
        if (ch < 0x20) bad(std::string(what) + " holds a raw control character");
        if (ch != '\\') {
            out += static_cast<char>(ch);
            continue;
        }
        if (at >= text.size()) bad(std::string(what) + " is not closed");
        char e = text[at++];
        switch (e) {
            case '"': out += '"'; break;
            case '\\': out += '\\'; break;
            case '/': out += '/'; break;
            case 'b': out += '\b'; break;
            case 'f': out += '\f'; break;
            case 'n': out += '\n'; break;
            case 'r': out += '\r'; break;
            case 't': out += '\t'; break;
            case 'u': {
                uint32_t c = hex4();
                if (c >= 0xDC00 && c <= 0xDFFF) bad(std::string(what) + " holds a lone low surrogate");
                if (c >= 0xD800 && c <= 0xDBFF) {
                    if (text.compare(at, 2, "\\u") != 0) bad(std::string(what) + " holds a lone high surrogate");
                    at += 2;
                    uint32_t low = hex4();
                    if (low < 0xDC00 || low > 0xDFFF) bad(std::string(what) + " holds a lone high surrogate");
                    c = 0x10000 + ((c - 0xD800) << 10) + (low - 0xDC00);
                }
                append_utf8(out, c);
                break;
            }
            default: bad(std::string(what) + " holds an unknown escape \\" + e);
        }
    }
    if (!utf8_valid(out)) bad(std::string(what) + " is not valid UTF-8");
    return out;
}

uint64_t JsonReader::unsigned_integer(const char* what) {
    skip_space();
    size_t start = at;
    uint64_t value = 0;
    while (at < text.size() && text[at] >= '0' && text[at] <= '9') {
        if (__builtin_mul_overflow(value, uint64_t(10), &value) || __builtin_add_overflow(value, uint64_t(text[at] - '0'), &value))
            bad(std::string(what) + " does not fit in 64 bits");
        ++at;
    }
    if (at == start) bad(std::string(what) + " is not a non-negative integer");
    if (text[start] == '0' && at - start > 1) bad(std::string(what) + " has leading zeros");
    if (at < text.size() && (text[at] == '.' || text[at] == 'e' || text[at] == 'E')) bad(std::string(what) + " is not an integer");
    return value;
}

std::string json_quote(const std::string& text) {
    std::string out = "\"";
    for (unsigned char ch : text) {
        if (ch == '"' || ch == '\\') {
            out += '\\';
            out += static_cast<char>(ch);
        } else if (ch < 0x20) {
            char escaped[8];
            snprintf(escaped, sizeof escaped, "\\u%04x", ch);
            out += escaped;
        } else {
            out += static_cast<char>(ch);
        }
    }
    return out + "\"";
}

}  // namespace td
