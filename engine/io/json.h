// json.h: the little JSON the state files need (the safetensors header, the list of keys that are
// numbers): a strict reader the caller drives by its own grammar, and quoting for the writer.
//
//   JsonReader r{text, "torch.load: m.safetensors: the header"};
//   r.expect('{', "at the start");  std::string key = r.string();  uint64_t n = r.unsigned_integer();
#pragma once

#include <cstdint>
#include <string>

namespace td {

struct JsonReader {
    const std::string& text;
    std::string context;   // what errors start with: "torch.load: m.safetensors: the header"
    size_t at = 0;

    // An EngineError "<context>: <why> (at byte N)".
    [[noreturn]] void bad(const std::string& why) const;
    void skip_space();
    // Whether the next character (after spaces) is c; takes it when it is.
    bool take(char c);
    void expect(char c, const char* where);
    // Whether only spaces are left.
    bool at_end();
    // A string literal, escapes decoded (\uXXXX surrogate pairs included), as UTF-8; raw control
    // characters, lone surrogates and malformed UTF-8 are errors.
    std::string string(const char* what);
    // A non-negative integer literal that fits in 64 bits (no sign, fraction or exponent).
    uint64_t unsigned_integer(const char* what);
};

// `text` (UTF-8) as a JSON string literal, quotes included.
std::string json_quote(const std::string& text);

}  // namespace td
