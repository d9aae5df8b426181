// state_file.h: tensors, numbers and strings under dotted keys ("fc.weight") as data-only files
// that Python reads without tapedeck, the format chosen by the file's extension (torch.save,
// torch.load):
//
//   .npz           a zip of .npy files, one per key (numpy.load opens it); entries stored, or
//                  deflated with {compress = true}; deflated entries read as numpy.savez_compressed
//                  writes them (zlib)
//   .safetensors   an 8-byte little-endian header length, a JSON header (dtype, shape and
//                  data_offsets per tensor, strings in "__metadata__"), then the raw bytes
//
// Numbers are 0-d arrays (int64 for a Lua integer, float64 otherwise); the keys that are numbers
// and not 0-d tensors are listed, as a JSON array, in the string entry "__tapedeck_numbers__".
// Strings are 0-d 'U' (or 'S') arrays in .npz and "__metadata__" entries in .safetensors.
// Loading runs no code (no pickles) and checks every size and offset before it allocates: a bad
// file is an EngineError naming the function, the file and what is wrong.
#pragma once

#include <string>
#include <vector>

#include "tensor.h"

namespace td {

enum StateKind : uint8_t {
    STATE_TENSOR,
    STATE_NUMBER,
    STATE_STRING,
    STATE_BOOLEAN,    // value: a 0-d int64 holding 0 or 1
    STATE_TABLE,      // an empty table: its path only (no key, nothing stored but the nesting record)
    STATE_METADATA,   // loaded only: a string of a .safetensors "__metadata__" that tapedeck did not write as an entry
};

// One key of a nested table on the way to an entry: a string, or an integer (kept as its digits).
struct StateKeyPart {
    std::string text;
    bool integer = false;
};

struct StateEntry {
    std::string key;
    StateKind kind = STATE_TENSOR;
    Value value;        // a tensor (any layout); a number: a 0-d int64 (a Lua integer) or float64 value
    std::string text;   // a string
    // The keys of the nested tables the entry sits in, its own last: {"model", "0.weight"} for the key
    // "model.0.weight" of {model = state_dict}. Empty: the entry sits at the top under `key`.
    std::vector<StateKeyPart> path;
};
using StateEntries = std::vector<StateEntry>;

enum StateFormat : uint8_t { STATE_NPZ, STATE_SAFETENSORS };

// The string entries that list which 0-d arrays are numbers and booleans, which .safetensors
// "__metadata__" strings are entries, and how the entries nest (all reserved: a key of the user's
// may not be one of them).
constexpr const char* STATE_NUMBERS_KEY = "__tapedeck_numbers__";
constexpr const char* STATE_BOOLEANS_KEY = "__tapedeck_booleans__";
constexpr const char* STATE_STRINGS_KEY = "__tapedeck_strings__";
constexpr const char* STATE_NESTING_KEY = "__tapedeck_nesting__";

// The format of `path` by its extension; an error naming `function` and the extension otherwise.
StateFormat state_format_of(const std::string& path, const char* function);

// Writes `entries` (keys non-empty UTF-8 without NUL, each once) to `path` in the format of its
// extension, in their order; tensors as their elements in row-major order whatever their layout. `compress`
// deflates the .npz entries (it is an error for .safetensors). When an entry's path is more than
// its key (a nested table, an integer key) or there is an empty table, the nesting is recorded in
// STATE_NESTING_KEY (a JSON array of [key, part, part, ...], integer parts as JSON integers, an
// empty table as ["", part, ...]) and loading gives every entry its path back.
void state_save(const StateEntries& entries, const std::string& path, bool compress);
// The entries of the file at `path`, in the order they are stored, each with its path when the file
// records the nesting. A .safetensors file's "__metadata__" strings are entries when tapedeck wrote
// them as such (listed in STATE_STRINGS_KEY, or an older tapedeck file with STATE_NUMBERS_KEY);
// otherwise (a file PyTorch made: {"format": "pt"}) they are STATE_METADATA.
StateEntries state_load(const std::string& path);
// The same from the file's bytes in memory; `name` stands for the file in messages.
StateEntries state_load_bytes(const std::string& bytes, const std::string& name, StateFormat format);

// The formats themselves (state_file_npz.cpp, state_file_safetensors.cpp): tensors and strings
// only (numbers are tensors by then). Errors start with "torch.save: <name>: " or
// "torch.load: <name>: ".
std::string npz_bytes(const StateEntries& entries, bool compress, const std::string& name);
StateEntries npz_load_bytes(const std::string& bytes, const std::string& name);
std::string safetensors_bytes(const StateEntries& entries, const std::string& name);
StateEntries safetensors_load_bytes(const std::string& bytes, const std::string& name);

}  // namespace td
