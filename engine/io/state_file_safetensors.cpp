// state_file_safetensors.cpp: .safetensors files (state_file.h), as safetensors.torch.save_file
// writes them:
//
//   u64       N, the header's length in bytes, little-endian
//   header    N bytes of JSON: {"__metadata__": {"k": "v", ...},
//                               "fc.weight": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]}, ...}
//             (padded with spaces to a multiple of 8 bytes)
//   data      the tensors' bytes, little-endian, row-major; data_offsets are [begin, end) in it
//
// Strings are the "__metadata__" entries. The reader is as strict as the safetensors library: the
// header must be a JSON object of exactly those fields, every tensor's byte count must match its
// shape and dtype, and the tensors must cover the data exactly, without overlap or gap.
//
// [SECTION] write     safetensors_bytes
// [SECTION] read      the header parser, safetensors_load_bytes
#include <algorithm>
#include <cstring>
#include <unordered_set>

#include "json.h"
#include "npy.h"
#include "state_file.h"

namespace td {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "safetensors data is little-endian, written as it is");

namespace {

constexpr uint64_t SAFETENSORS_MAX_HEADER = 100000000;   // the safetensors library's bound on the header

const char* safetensors_dtype(DType d) { return d == DTYPE_F32 ? "F32" : d == DTYPE_F64 ? "F64" : "I64"; }

}  // namespace

// ============================================================================================
// [SECTION] write

std::string safetensors_bytes(const StateEntries& entries, const std::string& name) {
    std::string metadata, tensors, data;
    for (const StateEntry& e : entries) {
        if (e.kind == STATE_STRING) {
            if (!utf8_valid(e.text))
                engine_fail("torch.save: %s: the string at '%s' is not UTF-8 (safetensors metadata is JSON text): use .npz",
                            name.c_str(), e.key.c_str());
            metadata += (metadata.empty() ? "" : ",") + json_quote(e.key) + ":" + json_quote(e.text);
            continue;
        }
        Value elements = value_contiguous(value_to_host(e.value));   // a view's elements in row-major order
        size_t begin = data.size(), n = static_cast<size_t>(e.value.numel()) * dtype_size(e.value.dtype);
        data.append(static_cast<const char*>(elements.raw()), n);
        std::string shape;
        for (int d = 0; d < e.value.shape.ndim; ++d) shape += (d ? "," : "") + std::to_string(e.value.shape.dims[d]);
        tensors += "," + json_quote(e.key) + ":{\"dtype\":\"" + safetensors_dtype(e.value.dtype) + "\",\"shape\":[" + shape +
                   "],\"data_offsets\":[" + std::to_string(begin) + "," + std::to_string(data.size()) + "]}";
    }
    std::string header = "{";
    if (!metadata.empty()) header += "\"__metadata__\":{" + metadata + "}";
    else if (!tensors.empty()) tensors.erase(0, 1);   // no leading comma
    header += tensors + "}";
    header.append((8 - header.size() % 8) % 8, ' ');   // the data starts 8-byte aligned
    if (header.size() > SAFETENSORS_MAX_HEADER)
        engine_fail("torch.save: %s: the safetensors header (keys, shapes and strings) would be %s, over the format's bound of "
                    "100,000,000 bytes (the safetensors library refuses more): use .npz",
                    name.c_str(), bytes_text(header.size()).c_str());
    std::string file(8, '\0');
    uint64_t length = header.size();
    std::memcpy(file.data(), &length, 8);
    return file + header + data;
}

// ============================================================================================
// [SECTION] read

namespace {

// One tensor of the header.
struct TensorRecord {
    std::string key;
    DType dtype = DTYPE_F32;
    Shape shape;
    uint64_t begin = 0, end = 0;
};

// The header as the safetensors library reads it: no key twice, no field unknown or missing.
struct HeaderReader {
    JsonReader json;
    const std::string& name;
    std::vector<TensorRecord> tensors;
    StateEntries strings;

    void read() {
        json.expect('{', "at the start of the header: the header is a JSON object");
        std::unordered_set<std::string> keys;
        while (!json.take('}')) {
            if (!keys.empty()) json.expect(',', "between the header's entries");
            std::string key = json.string("a key of the header");
            if (!keys.insert(key).second) json.bad("the key '" + key + "' is given twice");
            json.expect(':', "after a key of the header");
            if (key == "__metadata__") read_metadata();
            else read_tensor(key);
        }
        if (!json.at_end()) json.bad("something other than spaces follows the header object");
    }
    void read_metadata() {
        json.expect('{', "to open \"__metadata__\" (a map of strings to strings)");
        while (!json.take('}')) {
            if (!strings.empty()) json.expect(',', "between the entries of \"__metadata__\"");
            StateEntry e;
            e.kind = STATE_STRING;
            e.key = json.string("a key of \"__metadata__\"");
            json.expect(':', "after a key of \"__metadata__\"");
            e.text = json.string("a value of \"__metadata__\"");
            strings.push_back(std::move(e));
        }
    }
    void read_tensor(const std::string& key) {
        TensorRecord t;
        t.key = key;
        bool seen_dtype = false, seen_shape = false, seen_offsets = false;
        std::string what = "tensor '" + key + "'";
        json.expect('{', ("to open " + what + " (an object with dtype, shape and data_offsets)").c_str());
        while (!json.take('}')) {
            if (seen_dtype || seen_shape || seen_offsets) json.expect(',', "between the fields of a tensor");
            std::string field = json.string("a field of a tensor");
            json.expect(':', "after a field of a tensor");
            bool* seen = field == "dtype" ? &seen_dtype : field == "shape" ? &seen_shape : field == "data_offsets" ? &seen_offsets : nullptr;
            if (!seen) json.bad(what + " has an unknown field '" + field + "' (dtype, shape and data_offsets are known)");
            if (*seen) json.bad(what + " gives '" + field + "' twice");
            *seen = true;
            if (field == "dtype") t.dtype = dtype_of(json.string("dtype"), what);
            else if (field == "shape") read_shape(t.shape, what);
            else read_offsets(t, what);
        }
        if (!seen_dtype || !seen_shape || !seen_offsets)
            json.bad(what + " lacks '" + (!seen_dtype ? "dtype" : !seen_shape ? "shape" : "data_offsets") + "'");
        tensors.push_back(t);
    }
    DType dtype_of(const std::string& dtype, const std::string& what) {
        if (dtype == "F32") return DTYPE_F32;
        if (dtype == "F64") return DTYPE_F64;
        if (dtype == "I64") return DTYPE_I64;
        engine_fail("torch.load: %s: %s has dtype '%s', which tapedeck does not hold (F32, F64 and I64 load; convert "
                    "with .float(), .double() or .long() before saving)",
                    name.c_str(), what.c_str(), dtype.c_str());
    }
    void read_shape(Shape& shape, const std::string& what) {
        json.expect('[', ("to open the shape of " + what).c_str());
        while (!json.take(']')) {
            if (shape.ndim > 0) json.expect(',', "between the sizes of a shape");
            if (shape.ndim == MAX_DIMS) json.bad(what + " has more than " + std::to_string(MAX_DIMS) + " dims");
            uint64_t size = json.unsigned_integer("a size of a shape");
            if (size > static_cast<uint64_t>(INT64_MAX)) json.bad("a size of the shape of " + what + " is too large");
            shape.dims[shape.ndim++] = static_cast<int64_t>(size);
        }
    }
    void read_offsets(TensorRecord& t, const std::string& what) {
        json.expect('[', ("to open the data_offsets of " + what + " ([begin, end])").c_str());
        t.begin = json.unsigned_integer("data_offsets' begin");
        json.expect(',', "between data_offsets' begin and end");
        t.end = json.unsigned_integer("data_offsets' end");
        json.expect(']', ("to close the data_offsets of " + what + " (two numbers)").c_str());
    }
};

// Each tensor's byte count matches its shape, and the tensors cover the data exactly once.
void check_layout(std::vector<TensorRecord> tensors, uint64_t data_size, const std::string& name) {
    const char* p = name.c_str();
    for (const TensorRecord& t : tensors) {
        int64_t numel = 0;
        if (!shape_numel_fits(t.shape, &numel))
            engine_fail("torch.load: %s: tensor '%s' has shape %s: more elements than a tensor can hold", p, t.key.c_str(), t.shape.str().c_str());
        uint64_t want = static_cast<uint64_t>(numel) * dtype_size(t.dtype);
        if (t.end < t.begin || t.end - t.begin != want)
            engine_fail("torch.load: %s: tensor '%s' (%s, shape %s) needs %llu bytes, but its data_offsets [%llu, %llu] give %s", p,
                        t.key.c_str(), dtype_name(t.dtype), t.shape.str().c_str(), static_cast<unsigned long long>(want),
                        static_cast<unsigned long long>(t.begin), static_cast<unsigned long long>(t.end),
                        t.end < t.begin ? "an end before the begin" : std::to_string(t.end - t.begin).c_str());
        if (t.end > data_size)
            engine_fail("torch.load: %s: tensor '%s' ends at byte %llu of the data, past its end (%llu bytes): the file is truncated "
                        "or the header is wrong",
                        p, t.key.c_str(), static_cast<unsigned long long>(t.end), static_cast<unsigned long long>(data_size));
    }
    std::sort(tensors.begin(), tensors.end(), [](const TensorRecord& a, const TensorRecord& b) {
        return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
    });
    uint64_t covered = 0;
    for (size_t i = 0; i < tensors.size(); ++i) {
        const TensorRecord& t = tensors[i];
        if (t.begin < covered)
            engine_fail("torch.load: %s: the data of tensors '%s' and '%s' overlap", p, tensors[i - 1].key.c_str(), t.key.c_str());
        if (t.begin > covered)
            engine_fail("torch.load: %s: bytes %llu to %llu of the data belong to no tensor", p, static_cast<unsigned long long>(covered),
                        static_cast<unsigned long long>(t.begin));
        covered = t.end;
    }
    if (covered != data_size)
        engine_fail("torch.load: %s: %llu bytes after the last tensor's data belong to no tensor", p,
                    static_cast<unsigned long long>(data_size - covered));
}

}  // namespace

StateEntries safetensors_load_bytes(const std::string& bytes, const std::string& name) {
    const char* p = name.c_str();
    if (bytes.size() < 8) engine_fail("torch.load: %s: not a .safetensors file (%zu bytes, shorter than its header length)", p, bytes.size());
    uint64_t header_length = 0;
    std::memcpy(&header_length, bytes.data(), 8);
    if (header_length > bytes.size() - 8)
        engine_fail("torch.load: %s: the header length (%llu bytes) is larger than the file", p, static_cast<unsigned long long>(header_length));
    if (header_length > SAFETENSORS_MAX_HEADER)
        engine_fail("torch.load: %s: the header length (%llu bytes) is over the bound of 100 MB", p, static_cast<unsigned long long>(header_length));
    std::string header = bytes.substr(8, header_length);
    HeaderReader reader{JsonReader{header, "torch.load: " + name + ": the JSON header"}, name, {}, {}};
    reader.read();
    size_t data_at = 8 + header_length;
    check_layout(reader.tensors, bytes.size() - data_at, name);

    StateEntries entries = std::move(reader.strings);
    std::unordered_set<std::string> keys;
    for (const StateEntry& e : entries) keys.insert(e.key);
    for (const TensorRecord& t : reader.tensors) {
        if (!keys.insert(t.key).second)
            engine_fail("torch.load: %s: '%s' is both a tensor and a \"__metadata__\" string", p, t.key.c_str());
        StateEntry e;
        e.key = t.key;
        e.kind = STATE_TENSOR;
        try {
            e.value = value_new(t.shape, t.dtype);
        } catch (const EngineError& error) {
            engine_fail("torch.load: %s: %s", p, error.what());
        }
        std::memcpy(e.value.raw(), bytes.data() + data_at + t.begin, static_cast<size_t>(t.end - t.begin));
        entries.push_back(std::move(e));
    }
    return entries;
}

}  // namespace td
