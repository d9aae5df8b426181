// chunk_lines.cpp: code lines of a Lua file, read from its compiled form.
//
// Lua's API gives the active lines of a function value (lua_getinfo "L"), but the functions defined
// inside a chunk exist as values only once the chunk has run. So the file is compiled (not run),
// dumped with lua_dump, and the line information of every function prototype in the dump is read.
// The reader follows ldump.c of Lua 5.4; when the dump is not in that format it falls back to every
// line that is not blank and not only a comment.
#include "chunk_lines.h"

#include <cstring>
#include <fstream>
#include <lua.hpp>
#include <set>
#include <stdexcept>

namespace {

// Reads the fields of a Lua 5.4 binary chunk in order (ldump.c / lundump.c).
class DumpReader {
public:
    explicit DumpReader(const std::string& bytes) : bytes_(bytes) {}

    // Every line of every prototype that an instruction is on, into `lines`.
    void read_chunk(std::set<int>& lines) {
        const char signature[] = "\x1bLua";
        if (bytes_.compare(0, 4, signature, 4) != 0) fail();
        pos_ = 4;
        if (byte() != 0x54 || byte() != 0) fail();   // version 5.4, official format
        if (bytes_.compare(pos_, 6, "\x19\x93\r\n\x1a\n", 6) != 0) fail();
        pos_ += 6;
        int instruction_size = byte();
        integer_size_ = byte();
        number_size_ = byte();
        if (instruction_size != 4) fail();
        skip(static_cast<size_t>(integer_size_) + static_cast<size_t>(number_size_));   // LUAC_INT, LUAC_NUM
        byte();                                                                       // upvalues of the main function
        read_function(lines);
    }

private:
    [[noreturn]] static void fail() { throw std::runtime_error("not a Lua 5.4 dump"); }

    int byte() {
        if (pos_ >= bytes_.size()) fail();
        return static_cast<unsigned char>(bytes_[pos_++]);
    }
    void skip(size_t n) {
        if (pos_ + n > bytes_.size()) fail();
        pos_ += n;
    }
    // dumpSize: 7 bits a byte, most significant first; the last byte has bit 0x80 set.
    size_t size() {
        size_t x = 0;
        int b;
        do {
            b = byte();
            x = (x << 7) | static_cast<size_t>(b & 0x7f);
        } while ((b & 0x80) == 0);
        return x;
    }
    void skip_string() {
        size_t n = size();   // 0: no string; else length + 1
        if (n > 0) skip(n - 1);
    }

    void read_function(std::set<int>& lines) {
        skip_string();                       // source
        int line_defined = static_cast<int>(size());
        size();                              // lastlinedefined
        byte();                              // numparams
        bool is_vararg = byte() != 0;
        byte();                              // maxstacksize
        skip(size() * 4);                    // code
        size_t n_constants = size();
        for (size_t i = 0; i < n_constants; ++i) {
            int tag = byte();
            if (tag == 3) skip(static_cast<size_t>(integer_size_));        // integer
            else if (tag == 19) skip(static_cast<size_t>(number_size_));   // float
            else if (tag == 4 || tag == 20) skip_string();                 // short, long string
            else if (tag != 0 && tag != 1 && tag != 17) fail();            // nil, false, true
        }
        skip(size() * 3);                    // upvalues: instack, idx, kind
        size_t n_protos = size();
        for (size_t i = 0; i < n_protos; ++i) read_function(lines);
        // Debug information: per instruction a signed line delta, or ABSLINEINFO (-0x80) where
        // an absolute (pc, line) pair in abslineinfo gives the line.
        std::vector<int> deltas(size());
        for (int& d : deltas) d = static_cast<signed char>(byte());
        size_t n_abs = size();
        std::vector<std::pair<int, int>> absolute;
        for (size_t i = 0; i < n_abs; ++i) {
            int pc = static_cast<int>(size());
            int line = static_cast<int>(size());
            absolute.emplace_back(pc, line);
        }
        // As ldebug.c's collectvalidlines: a vararg function's first instruction (VARARGPREP)
        // counts for the line it is on but is not itself a line a hook stops at.
        int line = line_defined;
        for (size_t pc = 0; pc < deltas.size(); ++pc) {
            if (deltas[pc] != -0x80) {
                line += deltas[pc];
            } else {
                for (const auto& a : absolute)
                    if (a.first == static_cast<int>(pc)) line = a.second;
            }
            if (pc > 0 || !is_vararg) lines.insert(line);
        }
        size_t n_locals = size();
        for (size_t i = 0; i < n_locals; ++i) {
            skip_string();
            size();
            size();
        }
        size_t n_upvalue_names = size();
        for (size_t i = 0; i < n_upvalue_names; ++i) skip_string();
    }

    const std::string& bytes_;
    size_t pos_ = 0;
    int integer_size_ = 8;
    int number_size_ = 8;
};

int append_bytes(lua_State*, const void* p, size_t size, void* user) {
    static_cast<std::string*>(user)->append(static_cast<const char*>(p), size);
    return 0;
}

// The fallback: lines with something other than blanks or a "--" comment.
void lines_by_text(const std::string& path, std::set<int>& lines) {
    std::ifstream in(path);
    std::string text;
    for (int n = 1; std::getline(in, text); ++n) {
        size_t first = text.find_first_not_of(" \t\r");
        if (first != std::string::npos && text.compare(first, 2, "--") != 0) lines.insert(n);
    }
}

}  // namespace

bool chunk_code_lines(lua_State* L, const std::string& path, std::vector<int>& lines, std::string& error) {
    if (luaL_loadfile(L, path.c_str()) != LUA_OK) {
        error = lua_tostring(L, -1) ? lua_tostring(L, -1) : "cannot load " + path;
        lua_pop(L, 1);
        return false;
    }
    std::string bytes;
    lua_dump(L, append_bytes, &bytes, 0);
    lua_pop(L, 1);
    std::set<int> found;
    try {
        DumpReader(bytes).read_chunk(found);
    } catch (const std::runtime_error&) {
        found.clear();
        lines_by_text(path, found);
    }
    lines.assign(found.begin(), found.end());
    return true;
}
