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

bool is_reserved(const std::string& key) {
    return key == "__metadata__" || key == STATE_NUMBERS_KEY || key == STATE_BOOLEANS_KEY || key == STATE_STRINGS_KEY ||
           key == STATE_NESTING_KEY;
}

// The key an entry's path makes: its parts joined by dots.
std::string key_of_path(const std::vector<StateKeyPart>& path) {
    std::string key;
    for (const StateKeyPart& part : path) key += (key.empty() ? "" : ".") + part.text;
    return key;
}

// Keys are checked before anything is written: non-empty UTF-8 without NUL, each once, not reserved,
// and the dotted form of the entry's path (when it has one).
void check_keys(const StateEntries& entries, const std::string& path) {
    std::unordered_set<std::string> seen;
    for (const StateEntry& e : entries) {
        const char* k = e.key.c_str();
        if (e.kind == STATE_TABLE || e.kind == STATE_METADATA) {
            if (e.kind == STATE_METADATA || e.path.empty())
                engine_fail("torch.save: %s: an entry of kind %d cannot be saved (an internal error)", path.c_str(), e.kind);
            continue;
        }
        if (e.key.empty()) engine_fail("torch.save: %s: a key is empty", path.c_str());
        if (e.key.find('\0') != std::string::npos || !utf8_valid(e.key))
            engine_fail("torch.save: %s: the key %s is not UTF-8 text without NUL bytes", path.c_str(), json_quote(e.key).c_str());
        if (is_reserved(e.key)) engine_fail("torch.save: %s: the key '%s' is reserved by the file format", path.c_str(), k);
        if (!e.path.empty() && key_of_path(e.path) != e.key)
            engine_fail("torch.save: %s: the key '%s' is not its path joined by dots (an internal error)", path.c_str(), k);
        if (!seen.insert(e.key).second)
            engine_fail("torch.save: %s: the key '%s' is given twice (nested keys flatten to dotted ones)", path.c_str(), k);
    }
}

// Whether loading needs the entry's path to put it back where it was (it is not simply its key).
bool path_matters(const StateEntry& e) {
    return e.kind == STATE_TABLE || e.path.size() > 1 || (e.path.size() == 1 && e.path[0].integer);
}

// One item of the nesting record: [key, part, ...] (an empty table's key is "").
std::string nesting_item(const StateEntry& e) {
    std::string item = "[" + json_quote(e.kind == STATE_TABLE ? "" : e.key);
    for (const StateKeyPart& part : e.path) item += "," + (part.integer ? part.text : json_quote(part.text));
    return item + "]";
}

// The entries as the formats take them: numbers and booleans become 0-d tensors listed in string
// entries, and so are a .safetensors file's strings (its "__metadata__"); the nesting record when
// the nesting is more than the keys say.
StateEntries with_records_listed(const StateEntries& entries, StateFormat format) {
    StateEntries out;
    std::string numbers, booleans, strings, nesting;
    bool nested = false;
    auto add = [](std::string& list, const std::string& item) { list += (list.empty() ? "" : ",") + item; };
    for (const StateEntry& e : entries) {
        nested = nested || path_matters(e);
        add(nesting, nesting_item(e));
        if (e.kind == STATE_TABLE) continue;
        out.push_back(e);
        out.back().path.clear();
        if (e.kind == STATE_NUMBER || e.kind == STATE_BOOLEAN) out.back().kind = STATE_TENSOR;
        if (e.kind == STATE_NUMBER) add(numbers, json_quote(e.key));
        if (e.kind == STATE_BOOLEAN) add(booleans, json_quote(e.key));
        if (e.kind == STATE_STRING && format == STATE_SAFETENSORS) add(strings, json_quote(e.key));
    }
    auto list = [&](const char* key, const std::string& items) {
        if (!items.empty()) out.push_back(StateEntry{key, STATE_STRING, Value(), "[" + items + "]", {}});
    };
    list(STATE_NUMBERS_KEY, numbers);
    list(STATE_BOOLEANS_KEY, booleans);
    list(STATE_STRINGS_KEY, strings);
    if (nested) list(STATE_NESTING_KEY, nesting);
    return out;
}

// The keys a list entry (STATE_NUMBERS_KEY, ...) holds: a JSON array of strings.
std::vector<std::string> listed_keys(const std::string& text, const std::string& name, const char* list_key) {
    JsonReader r{text, "torch.load: " + name + ": the list '" + list_key + "'"};
    std::vector<std::string> keys;
    r.expect('[', "at its start");
    while (!r.take(']')) {
        if (!keys.empty()) r.expect(',', "between its keys");
        keys.push_back(r.string("a key"));
    }
    if (!r.at_end()) r.bad("something follows the list");
    return keys;
}

// The nesting record's items: [key, part, ...], a part a string or an integer.
std::vector<StateEntry> nesting_read(const std::string& text, const std::string& name) {
    JsonReader r{text, "torch.load: " + name + ": the nesting record '" + STATE_NESTING_KEY + "'"};
    std::vector<StateEntry> items;
    r.expect('[', "at its start");
    while (!r.take(']')) {
        if (!items.empty()) r.expect(',', "between its items");
        r.expect('[', "at the start of an item ([key, part, ...])");
        StateEntry item;
        item.key = r.string("an item's key");
        while (r.take(',')) {
            StateKeyPart part;
            r.skip_space();
            if (r.at < r.text.size() && r.text[r.at] == '"') {
                part.text = r.string("a part of a path");
            } else {
                bool negative = r.take('-');
                part.text = (negative ? "-" : "") + std::to_string(r.unsigned_integer("a part of a path"));
                part.integer = true;
            }
            item.path.push_back(std::move(part));
        }
        r.expect(']', "at the end of an item");
        if (item.path.empty() && item.key.empty()) r.bad("an item has neither a key nor a path");
        if (!item.key.empty() && !item.path.empty() && key_of_path(item.path) != item.key)
            r.bad("the path of '" + item.key + "' does not join to its key");
        items.push_back(std::move(item));
    }
    if (!r.at_end()) r.bad("something follows the record");
    return items;
}

struct ReservedEntries {
    std::unordered_map<std::string, size_t> index;   // key -> position of every entry
    std::unordered_map<std::string, size_t> found;   // reserved key -> position
};

// Marks the keys `list_key` lists as `kind`, each a 0-d array of the dtypes `fits` accepts.
void mark_listed(StateEntries& entries, const ReservedEntries& reserved, const char* list_key, StateKind kind, const std::string& name,
                 bool (*fits)(const Value&), const char* what) {
    auto list = reserved.found.find(list_key);
    if (list == reserved.found.end()) return;
    const StateEntry& text = entries[list->second];
    if (text.kind != STATE_STRING) engine_fail("torch.load: %s: '%s' is not a string (it lists the keys that are %s)", name.c_str(), list_key, what);
    for (const std::string& key : listed_keys(text.text, name, list_key)) {
        auto at = reserved.index.find(key);
        StateEntry* e = at == reserved.index.end() ? nullptr : &entries[at->second];
        bool ok = e && (kind == STATE_STRING ? e->kind == STATE_STRING || e->kind == STATE_METADATA : e->kind == STATE_TENSOR && e->value.shape.ndim == 0 && fits(e->value));
        if (!ok) engine_fail("torch.load: %s: '%s' lists '%s' as %s, but it is not one", name.c_str(), list_key, key.c_str(), what);
        e->kind = kind;
    }
}

bool fits_number(const Value& v) { return v.dtype != DTYPE_F32; }
bool fits_boolean(const Value& v) { return v.dtype == DTYPE_I64 && (*v.data<int64_t>() == 0 || *v.data<int64_t>() == 1); }
bool fits_string(const Value&) { return true; }

// Gives the entries their paths from the nesting record, and adds its empty tables.
void apply_nesting(StateEntries& entries, const ReservedEntries& reserved, const std::string& name) {
    auto record = reserved.found.find(STATE_NESTING_KEY);
    if (record == reserved.found.end()) return;
    if (entries[record->second].kind != STATE_STRING) engine_fail("torch.load: %s: '%s' is not a string", name.c_str(), STATE_NESTING_KEY);
    for (StateEntry& item : nesting_read(entries[record->second].text, name)) {
        if (item.key.empty()) {
            item.kind = STATE_TABLE;
            entries.push_back(std::move(item));
            continue;
        }
        auto at = reserved.index.find(item.key);
        if (at == reserved.index.end() || is_reserved(item.key))
            engine_fail("torch.load: %s: the nesting record names '%s', which is not an entry of the file", name.c_str(), item.key.c_str());
        entries[at->second].path = std::move(item.path);
    }
}

// The loaded entries with the listed 0-d arrays as numbers and booleans, a .safetensors file's
// metadata that tapedeck did not write as entries marked as such, the paths of the nesting record,
// and the reserved entries taken out.
StateEntries with_records_read(StateEntries entries, const std::string& name, StateFormat format) {
    ReservedEntries reserved;
    for (size_t i = 0; i < entries.size(); ++i) {
        if (!reserved.index.emplace(entries[i].key, i).second)
            engine_fail("torch.load: %s: the key '%s' is in the file twice", name.c_str(), entries[i].key.c_str());
        if (is_reserved(entries[i].key)) reserved.found.emplace(entries[i].key, i);
    }
    mark_listed(entries, reserved, STATE_NUMBERS_KEY, STATE_NUMBER, name, fits_number, "a number (a 0-d int64 or float64 array)");
    mark_listed(entries, reserved, STATE_BOOLEANS_KEY, STATE_BOOLEAN, name, fits_boolean, "a boolean (a 0-d int64 array of 0 or 1)");
    if (format == STATE_SAFETENSORS) {
        // Strings are "__metadata__" entries: tapedeck's when it listed them (or, in a file of an older
        // tapedeck, when it listed numbers), else the file's own metadata ({"format": "pt"}).
        bool listed = reserved.found.count(STATE_STRINGS_KEY) > 0, older = !listed && reserved.found.count(STATE_NUMBERS_KEY) > 0;
        if (!older)
            for (StateEntry& e : entries)
                if (e.kind == STATE_STRING && !is_reserved(e.key)) e.kind = STATE_METADATA;
        if (listed) mark_listed(entries, reserved, STATE_STRINGS_KEY, STATE_STRING, name, fits_string, "a string");
    }
    apply_nesting(entries, reserved, name);
    StateEntries out;
    for (StateEntry& e : entries)
        if (!is_reserved(e.key) || e.kind == STATE_TABLE) out.push_back(std::move(e));
    return out;
}

}  // namespace

void state_save(const StateEntries& entries, const std::string& path, bool compress) {
    StateFormat format = state_format_of(path, "torch.save");
    if (compress && format != STATE_NPZ)
        engine_fail("torch.save: %s: compress is for .npz files (safetensors stores raw bytes)", path.c_str());
    check_keys(entries, path);
    StateEntries stored = with_records_listed(entries, format);
    // The whole file is made in memory first, then written whole or not at all (file_whole.h).
    file_write_whole(path, format == STATE_NPZ ? npz_bytes(stored, compress, path) : safetensors_bytes(stored, path), "torch.save");
}

StateEntries state_load_bytes(const std::string& bytes, const std::string& name, StateFormat format) {
    StateEntries entries = format == STATE_NPZ ? npz_load_bytes(bytes, name) : safetensors_load_bytes(bytes, name);
    return with_records_read(std::move(entries), name, format);
}

StateEntries state_load(const std::string& path) {
    StateFormat format = state_format_of(path, "torch.load");
    return state_load_bytes(file_read_bytes(path, "torch.load", memory_limit_bytes()), path, format);
}

}  // namespace td
