// state_file.cpp: torch.save / torch.load's files (state_file.h): the format by extension, the
// checks of keys, numbers as 0-d arrays listed under STATE_NUMBERS_KEY, and the file itself.
// The formats: state_file_npz.cpp and state_file_safetensors.cpp.
#include "state_file.h"

#include <cerrno>
#include <cstring>
#include <unordered_map>
#include <unordered_set>

#include "json.h"
#include "npy.h"

namespace td {

StateFormat state_format_of(const std::string& path, const char* function) {
    auto ends_with = [&](const char* suffix) {
        size_t n = strlen(suffix);
        return path.size() >= n && path.compare(path.size() - n, n, suffix) == 0;
    };
    if (ends_with(".npz")) return STATE_NPZ;
    if (ends_with(".safetensors")) return STATE_SAFETENSORS;
    size_t slash = path.find_last_of('/'), dot = path.find_last_of('.');
    std::string extension = dot == std::string::npos || (slash != std::string::npos && dot < slash) ? "" : path.substr(dot);
    std::string why = extension.empty() ? "it has no extension" : "the extension '" + extension + "' is not one of them";
    if (extension == ".pt" || extension == ".pth" || extension == ".pkl" || extension == ".bin")
        why += " (PyTorch's own files are pickles, which can run code: export with numpy.savez or "
               "safetensors.torch.save_file)";
    engine_fail("%s: %s: the format is chosen by the extension, .npz or .safetensors: %s", function, path.c_str(), why.c_str());
}

namespace {

// Keys are checked before anything is written: non-empty UTF-8 without NUL, each once, not reserved.
void check_keys(const StateEntries& entries, const std::string& path) {
    std::unordered_set<std::string> seen;
    for (const StateEntry& e : entries) {
        const char* k = e.key.c_str();
        if (e.key.empty()) engine_fail("torch.save: %s: a key is empty", path.c_str());
        if (e.key.find('\0') != std::string::npos || !utf8_valid(e.key))
            engine_fail("torch.save: %s: the key %s is not UTF-8 text without NUL bytes", path.c_str(), json_quote(e.key).c_str());
        if (e.key == STATE_NUMBERS_KEY || e.key == "__metadata__")
            engine_fail("torch.save: %s: the key '%s' is reserved by the file format", path.c_str(), k);
        if (!seen.insert(e.key).second)
            engine_fail("torch.save: %s: the key '%s' is given twice (nested keys flatten to dotted ones)", path.c_str(), k);
    }
}

// The entries as the formats take them: numbers become 0-d tensors, listed in a string entry.
StateEntries with_numbers_listed(const StateEntries& entries) {
    StateEntries out;
    std::string list;
    for (const StateEntry& e : entries) {
        out.push_back(e);
        if (e.kind != STATE_NUMBER) continue;
        out.back().kind = STATE_TENSOR;
        list += (list.empty() ? "" : ",") + json_quote(e.key);
    }
    if (!list.empty()) out.push_back(StateEntry{STATE_NUMBERS_KEY, STATE_STRING, Value(), "[" + list + "]"});
    return out;
}

// The keys a STATE_NUMBERS_KEY entry lists (a JSON array of strings).
std::vector<std::string> listed_numbers(const std::string& text, const std::string& name) {
    JsonReader r{text, "torch.load: " + name + ": the list of numbers '" + STATE_NUMBERS_KEY + "'"};
    std::vector<std::string> keys;
    r.expect('[', "at its start");
    while (!r.take(']')) {
        if (!keys.empty()) r.expect(',', "between its keys");
        keys.push_back(r.string("a key"));
    }
    if (!r.at_end()) r.bad("something follows the list");
    return keys;
}

// The loaded entries with the listed 0-d arrays as numbers, and the list itself taken out.
StateEntries with_numbers_read(StateEntries entries, const std::string& name) {
    std::unordered_map<std::string, size_t> index;
    size_t list_at = entries.size();
    for (size_t i = 0; i < entries.size(); ++i) {
        if (!index.emplace(entries[i].key, i).second)
            engine_fail("torch.load: %s: the key '%s' is in the file twice", name.c_str(), entries[i].key.c_str());
        if (entries[i].key == STATE_NUMBERS_KEY) list_at = i;
    }
    if (list_at == entries.size()) return entries;
    if (entries[list_at].kind != STATE_STRING)
        engine_fail("torch.load: %s: '%s' is not a string (it lists the keys that are numbers)", name.c_str(), STATE_NUMBERS_KEY);
    for (const std::string& key : listed_numbers(entries[list_at].text, name)) {
        auto found = index.find(key);
        StateEntry* e = found == index.end() ? nullptr : &entries[found->second];
        if (!e || e->kind != STATE_TENSOR || e->value.shape.ndim != 0 || e->value.dtype == DTYPE_F32)
            engine_fail("torch.load: %s: '%s' lists '%s' as a number, but it is not a 0-d int64 or float64 array", name.c_str(),
                        STATE_NUMBERS_KEY, key.c_str());
        e->kind = STATE_NUMBER;
    }
    entries.erase(entries.begin() + static_cast<std::ptrdiff_t>(list_at));
    return entries;
}

}  // namespace

void state_save(const StateEntries& entries, const std::string& path, bool compress) {
    StateFormat format = state_format_of(path, "torch.save");
    if (compress && format != STATE_NPZ)
        engine_fail("torch.save: %s: compress is for .npz files (safetensors stores raw bytes)", path.c_str());
    check_keys(entries, path);
    StateEntries stored = with_numbers_listed(entries);
    // The whole file is made in memory first, then written whole or not at all (file_whole.h).
    file_write_whole(path, format == STATE_NPZ ? npz_bytes(stored, compress, path) : safetensors_bytes(stored, path), "torch.save");
}

StateEntries state_load_bytes(const std::string& bytes, const std::string& name, StateFormat format) {
    StateEntries entries = format == STATE_NPZ ? npz_load_bytes(bytes, name) : safetensors_load_bytes(bytes, name);
    return with_numbers_read(std::move(entries), name);
}

StateEntries state_load(const std::string& path) {
    StateFormat format = state_format_of(path, "torch.load");
    return state_load_bytes(file_read_bytes(path, "torch.load", memory_limit_bytes()), path, format);
}

}  // namespace td
