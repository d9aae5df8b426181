// state_file_npz.cpp: .npz files (state_file.h): a zip archive of .npy files, one per key
// ("fc.weight.npy"), as numpy.savez and numpy.savez_compressed write them.
//
//   local header + name + data      for each entry (data stored, or raw deflate)
//   central directory               one record per entry: sizes, CRC-32, where its local header is
//   end of central directory        where the central directory is (ZIP64 records when NumPy
//                                   wrote them: it always puts ZIP64 sizes in local headers)
//
// The reader trusts nothing: every offset and size is checked against the file before it is
// used, an entry's data must end before the central directory, a deflated entry must inflate to
// exactly the size its record declares (no more than deflate can produce from its bytes) with
// the right CRC-32, and its .npy is read by the .npy reader (npy_parse_bytes).
//
// [SECTION] bytes     little-endian fields
// [SECTION] write     npz_bytes
// [SECTION] read      the zip directory, inflating, npz_load_bytes
#include <zlib.h>

#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <unordered_set>

#include "npy.h"
#include "state_file.h"

namespace td {

// ============================================================================================
// [SECTION] bytes

namespace {

void put16(std::string& out, uint32_t v) {
    out += static_cast<char>(v & 0xFF);
    out += static_cast<char>((v >> 8) & 0xFF);
}
void put32(std::string& out, uint32_t v) {
    put16(out, v & 0xFFFF);
    put16(out, v >> 16);
}

// Little-endian reads at an offset the caller has checked.
uint64_t get_le(const std::string& bytes, size_t at, int width) {
    uint64_t v = 0;
    for (int b = 0; b < width; ++b) v |= uint64_t(static_cast<unsigned char>(bytes[at + static_cast<size_t>(b)])) << (8 * b);
    return v;
}

constexpr uint32_t LOCAL_SIGNATURE = 0x04034b50, CENTRAL_SIGNATURE = 0x02014b50, END_SIGNATURE = 0x06054b50;
constexpr uint32_t ZIP64_END_SIGNATURE = 0x06064b50, ZIP64_LOCATOR_SIGNATURE = 0x07064b50;
constexpr size_t LOCAL_SIZE = 30, CENTRAL_SIZE = 46, END_SIZE = 22, ZIP64_END_SIZE = 56, ZIP64_LOCATOR_SIZE = 20;
constexpr uint16_t METHOD_STORED = 0, METHOD_DEFLATED = 8;
constexpr uint16_t FLAG_ENCRYPTED = 1, FLAG_UTF8 = 1 << 11;
constexpr uint16_t DOS_DATE_1980 = (1 << 5) | 1;   // 1980-01-01: files do not depend on when they were saved

uint32_t crc_of(const std::string& data) {
    uLong crc = crc32(0L, Z_NULL, 0);
    for (size_t at = 0; at < data.size();) {   // crc32 takes at most 4 GB at once
        uInt n = static_cast<uInt>(std::min<size_t>(data.size() - at, 1u << 30));
        crc = crc32(crc, reinterpret_cast<const Bytef*>(data.data() + at), n);
        at += n;
    }
    return static_cast<uint32_t>(crc);
}

}  // namespace

// ============================================================================================
// [SECTION] write

namespace {

// `data` as raw deflate (no zlib header), as zip's method 8 holds it.
std::string deflate_raw(const std::string& data, const std::string& name) {
    z_stream zs{};
    if (deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        engine_fail("torch.save: %s: zlib could not start deflating", name.c_str());
    std::string out(deflateBound(&zs, data.size()), '\0');
    zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
    zs.avail_in = static_cast<uInt>(data.size());
    zs.next_out = reinterpret_cast<Bytef*>(out.data());
    zs.avail_out = static_cast<uInt>(out.size());
    int status = deflate(&zs, Z_FINISH);
    size_t produced = zs.total_out;
    deflateEnd(&zs);
    if (status != Z_STREAM_END) engine_fail("torch.save: %s: zlib failed to deflate an entry", name.c_str());
    out.resize(produced);
    return out;
}

}  // namespace

namespace {

// The zip format's limits, checked before anything is made: an entry's name ("<key>.npy") is at
// most 65,535 bytes (a 16-bit field) and an archive without ZIP64 holds at most 65,535 entries.
void check_zip_limits(const StateEntries& entries, const std::string& name) {
    constexpr size_t MAX_NAME = 0xFFFF, MAX_ENTRIES = 0xFFFF;
    if (entries.size() > MAX_ENTRIES)
        engine_fail("torch.save: %s: %zu entries are more than a .npz file written here holds (%zu, no ZIP64): use .safetensors",
                    name.c_str(), entries.size(), MAX_ENTRIES);
    for (const StateEntry& e : entries)
        if (e.key.size() + 4 > MAX_NAME)
            engine_fail("torch.save: %s: the key '%.40s...' is %zu bytes long: a .npz entry's name (the key and \".npy\") is at most "
                        "%zu bytes, so a key at most %zu",
                        name.c_str(), e.key.c_str(), e.key.size(), MAX_NAME, MAX_NAME - 4);
}

}  // namespace

std::string npz_bytes(const StateEntries& entries, bool compress, const std::string& name) {
    check_zip_limits(entries, name);
    std::string file, directory;
    for (const StateEntry& e : entries) {
        std::string npy = e.kind == STATE_STRING ? npy_bytes_of_string(e.text, "torch.save") : npy_bytes_of(e.value);
        if (npy.size() >= 0xFFFFFFFFu || file.size() >= 0xFFFFFFFFu)
            engine_fail("torch.save: %s: at the key '%s' the file passes 4 GB, the most a .npz file written here holds (no ZIP64): "
                        "use .safetensors",
                        name.c_str(), e.key.c_str());
        std::string data = compress ? deflate_raw(npy, name) : npy;
        std::string entry_name = e.key + ".npy";
        bool ascii = true;
        for (unsigned char ch : entry_name) ascii = ascii && ch < 0x80;
        uint16_t flags = ascii ? 0 : FLAG_UTF8;
        uint32_t crc = crc_of(npy), offset = static_cast<uint32_t>(file.size());
        auto common = [&](std::string& out) {   // the fields the local header and the directory share
            put16(out, 20);                     // version needed: 2.0
            put16(out, flags);
            put16(out, compress ? METHOD_DEFLATED : METHOD_STORED);
            put16(out, 0);                      // time 00:00
            put16(out, DOS_DATE_1980);
            put32(out, crc);
            put32(out, static_cast<uint32_t>(data.size()));
            put32(out, static_cast<uint32_t>(npy.size()));
            put16(out, static_cast<uint32_t>(entry_name.size()));
            put16(out, 0);                      // no extra field
        };
        put32(file, LOCAL_SIGNATURE);
        common(file);
        file += entry_name;
        file += data;
        put32(directory, CENTRAL_SIGNATURE);
        put16(directory, 20);                   // made by: MS-DOS attributes, zip 2.0
        common(directory);
        put16(directory, 0);                    // no comment
        put16(directory, 0);                    // disk 0
        put16(directory, 0);                    // internal attributes
        put32(directory, 0);                    // external attributes
        put32(directory, offset);
        directory += entry_name;
    }
    if (entries.size() > 0xFFFF || file.size() + directory.size() >= 0xFFFFFFFFu)
        engine_fail("torch.save: %s: too many entries or bytes for a .npz file written here (no ZIP64): use .safetensors",
                    name.c_str());
    uint32_t directory_offset = static_cast<uint32_t>(file.size());
    file += directory;
    put32(file, END_SIGNATURE);
    put16(file, 0);                             // this disk
    put16(file, 0);                             // the directory's disk
    put16(file, static_cast<uint32_t>(entries.size()));
    put16(file, static_cast<uint32_t>(entries.size()));
    put32(file, static_cast<uint32_t>(directory.size()));
    put32(file, directory_offset);
    put16(file, 0);                             // no comment
    return file;
}

// ============================================================================================
// [SECTION] read

namespace {

struct ZipEntry {
    std::string name;
    uint16_t flags = 0, method = 0;
    uint32_t crc = 0;
    uint64_t compressed = 0, uncompressed = 0, local_offset = 0;
};

struct ZipReader {
    const std::string& bytes;
    const std::string& name;

    [[noreturn]] __attribute__((format(printf, 2, 3))) void bad(const char* format, ...) const {
        char why[512];
        va_list args;
        va_start(args, format);
        vsnprintf(why, sizeof why, format, args);
        va_end(args);
        engine_fail("torch.load: %s: %s", name.c_str(), why);
    }
    // Whether [at, at + n) lies inside the file.
    bool inside(uint64_t at, uint64_t n) const { return at <= bytes.size() && n <= bytes.size() - at; }

    // The end-of-central-directory record: the last one whose comment reaches the file's end.
    size_t find_end_record() const {
        if (bytes.size() < END_SIZE) bad("not a .npz file (too short for a zip archive: %zu bytes)", bytes.size());
        size_t lowest = bytes.size() > END_SIZE + 0xFFFF ? bytes.size() - END_SIZE - 0xFFFF : 0;
        for (size_t at = bytes.size() - END_SIZE + 1; at-- > lowest;)
            if (get_le(bytes, at, 4) == END_SIGNATURE && at + END_SIZE + get_le(bytes, at + 20, 2) == bytes.size()) return at;
        bad("not a .npz file (no zip end-of-central-directory record)");
    }

    // The central directory's offset, size and entry count (from the ZIP64 record when there is one).
    void directory_of(size_t end, uint64_t* offset, uint64_t* size, uint64_t* count) const {
        if (get_le(bytes, end + 4, 2) != 0 || get_le(bytes, end + 6, 2) != 0) bad("a zip archive split over several disks is not supported");
        *count = get_le(bytes, end + 10, 2);
        *size = get_le(bytes, end + 12, 4);
        *offset = get_le(bytes, end + 16, 4);
        if (*count != 0xFFFF && *size != 0xFFFFFFFF && *offset != 0xFFFFFFFF) return;
        if (end < ZIP64_LOCATOR_SIZE || get_le(bytes, end - ZIP64_LOCATOR_SIZE, 4) != ZIP64_LOCATOR_SIGNATURE)
            bad("the zip end record says ZIP64, but there is no ZIP64 locator before it");
        uint64_t at = get_le(bytes, end - ZIP64_LOCATOR_SIZE + 8, 8);
        if (!inside(at, ZIP64_END_SIZE) || at + ZIP64_END_SIZE > end - ZIP64_LOCATOR_SIZE || get_le(bytes, at, 4) != ZIP64_END_SIGNATURE)
            bad("the ZIP64 end record is not where its locator says (offset %llu)", static_cast<unsigned long long>(at));
        *count = get_le(bytes, at + 32, 8);
        *size = get_le(bytes, at + 40, 8);
        *offset = get_le(bytes, at + 48, 8);
    }

    // The ZIP64 extra field of a directory record: the 64-bit values of the fields set to all ones.
    void read_zip64_extra(size_t at, size_t length, ZipEntry& e, bool wide_uncompressed, bool wide_compressed, bool wide_offset) const {
        for (size_t end = at + length; at + 4 <= end;) {
            uint64_t id = get_le(bytes, at, 2), size = get_le(bytes, at + 2, 2);
            at += 4;
            if (size > end - at) bad("an extra field of entry '%s' runs past its record", e.name.c_str());
            if (id == 1) {
                size_t field = at;
                for (auto [wide, target] : {std::pair{wide_uncompressed, &e.uncompressed}, std::pair{wide_compressed, &e.compressed},
                                            std::pair{wide_offset, &e.local_offset}}) {
                    if (!wide) continue;
                    if (field + 8 > at + size) bad("the ZIP64 field of entry '%s' is too short", e.name.c_str());
                    *target = get_le(bytes, field, 8);
                    field += 8;
                }
                return;
            }
            at += size;
        }
        if (wide_uncompressed || wide_compressed || wide_offset) bad("entry '%s' lacks the ZIP64 field its sizes call for", e.name.c_str());
    }

    // The entries of the central directory, and where it starts.
    std::vector<ZipEntry> directory(uint64_t* directory_offset) const {
        size_t end = find_end_record();
        uint64_t offset = 0, size = 0, count = 0;
        directory_of(end, &offset, &size, &count);
        *directory_offset = offset;
        if (!inside(offset, size) || offset + size > end)
            bad("the central directory (offset %llu, %llu bytes) lies outside the file", static_cast<unsigned long long>(offset),
                static_cast<unsigned long long>(size));
        if (count > size / CENTRAL_SIZE) bad("the zip end record declares %llu entries, more than its directory holds", static_cast<unsigned long long>(count));
        std::vector<ZipEntry> entries;
        size_t at = offset, stop = offset + size;
        for (uint64_t k = 0; k < count; ++k) {
            if (at + CENTRAL_SIZE > stop || get_le(bytes, at, 4) != CENTRAL_SIGNATURE) bad("central directory record %llu is damaged", static_cast<unsigned long long>(k + 1));
            ZipEntry e;
            e.flags = static_cast<uint16_t>(get_le(bytes, at + 8, 2));
            e.method = static_cast<uint16_t>(get_le(bytes, at + 10, 2));
            e.crc = static_cast<uint32_t>(get_le(bytes, at + 16, 4));
            e.compressed = get_le(bytes, at + 20, 4);
            e.uncompressed = get_le(bytes, at + 24, 4);
            size_t name_length = get_le(bytes, at + 28, 2), extra_length = get_le(bytes, at + 30, 2), comment_length = get_le(bytes, at + 32, 2);
            e.local_offset = get_le(bytes, at + 42, 4);
            if (at + CENTRAL_SIZE + name_length + extra_length + comment_length > stop)
                bad("central directory record %llu runs past the directory", static_cast<unsigned long long>(k + 1));
            e.name = bytes.substr(at + CENTRAL_SIZE, name_length);
            read_zip64_extra(at + CENTRAL_SIZE + name_length, extra_length, e, e.uncompressed == 0xFFFFFFFF, e.compressed == 0xFFFFFFFF,
                             e.local_offset == 0xFFFFFFFF);
            entries.push_back(e);
            at += CENTRAL_SIZE + name_length + extra_length + comment_length;
        }
        return entries;
    }

    // Where entry e's data starts, after its local header (checked against the directory record).
    size_t data_start(const ZipEntry& e, uint64_t directory_offset) const {
        uint64_t at = e.local_offset;
        if (!inside(at, LOCAL_SIZE) || get_le(bytes, at, 4) != LOCAL_SIGNATURE)
            bad("entry '%s': no local header at offset %llu", e.name.c_str(), static_cast<unsigned long long>(at));
        size_t name_length = get_le(bytes, at + 26, 2), extra_length = get_le(bytes, at + 28, 2);
        if (!inside(at + LOCAL_SIZE, name_length + extra_length) || bytes.compare(at + LOCAL_SIZE, name_length, e.name) != 0)
            bad("entry '%s': its local header names another entry", e.name.c_str());
        uint64_t local_compressed = get_le(bytes, at + 18, 4), local_uncompressed = get_le(bytes, at + 22, 4);
        bool sizes_later = (e.flags & 8) != 0 || local_compressed == 0xFFFFFFFF;   // in a data descriptor or ZIP64 field
        if (!sizes_later && (local_compressed != e.compressed || local_uncompressed != e.uncompressed))
            bad("entry '%s': its local header and the directory disagree on its sizes", e.name.c_str());
        uint64_t start = at + LOCAL_SIZE + name_length + extra_length;
        if (start > directory_offset || e.compressed > directory_offset - start)
            bad("entry '%s': its %llu bytes of data run past the start of the central directory", e.name.c_str(),
                static_cast<unsigned long long>(e.compressed));
        return static_cast<size_t>(start);
    }

    // The entry's uncompressed bytes, checked against its declared size and CRC-32.
    std::string entry_bytes(const ZipEntry& e, uint64_t directory_offset) const {
        if (e.flags & FLAG_ENCRYPTED) bad("entry '%s' is encrypted", e.name.c_str());
        size_t start = data_start(e, directory_offset);
        std::string data;
        if (e.method == METHOD_STORED) {
            if (e.compressed != e.uncompressed) bad("entry '%s' is stored, but declares %llu bytes and holds %llu", e.name.c_str(),
                                                    static_cast<unsigned long long>(e.uncompressed), static_cast<unsigned long long>(e.compressed));
            data = bytes.substr(start, e.compressed);
        } else if (e.method == METHOD_DEFLATED) {
            data = inflate_raw(e, start);
        } else {
            bad("entry '%s' uses zip compression method %u (stored and deflated are supported)", e.name.c_str(), e.method);
        }
        if (crc_of(data) != e.crc) bad("entry '%s' is corrupt (its CRC-32 does not match)", e.name.c_str());
        return data;
    }

    // Deflate turns at most 1032 bytes out of one: a declared size beyond that is a lie, and is
    // refused before anything of that size is allocated.
    std::string inflate_raw(const ZipEntry& e, size_t start) const {
        if (e.uncompressed / 1032 > e.compressed + 1 || e.uncompressed > memory_limit_bytes())
            bad("entry '%s' declares %llu bytes uncompressed from %llu compressed: more than deflate can produce", e.name.c_str(),
                static_cast<unsigned long long>(e.uncompressed), static_cast<unsigned long long>(e.compressed));
        std::string out(static_cast<size_t>(e.uncompressed) + 1, '\0');   // one more: to notice a stream that is longer
        z_stream zs{};
        if (inflateInit2(&zs, -MAX_WBITS) != Z_OK) bad("zlib could not start inflating entry '%s'", e.name.c_str());
        const unsigned char* in = reinterpret_cast<const unsigned char*>(bytes.data()) + start;
        size_t in_left = e.compressed, out_at = 0;
        int status = Z_OK;
        while (status == Z_OK) {   // in pieces: zlib counts in 32 bits
            zs.next_in = const_cast<Bytef*>(in);
            zs.avail_in = static_cast<uInt>(std::min<size_t>(in_left, 1u << 30));
            zs.next_out = reinterpret_cast<Bytef*>(out.data() + out_at);
            zs.avail_out = static_cast<uInt>(std::min<size_t>(out.size() - out_at, 1u << 30));
            uInt in_given = zs.avail_in, out_given = zs.avail_out;
            status = inflate(&zs, Z_NO_FLUSH);
            in += in_given - zs.avail_in;
            in_left -= in_given - zs.avail_in;
            out_at += out_given - zs.avail_out;
            if (status == Z_OK && in_given == zs.avail_in && out_given == zs.avail_out) status = Z_BUF_ERROR;   // no progress
        }
        inflateEnd(&zs);
        if (status != Z_STREAM_END) {
            if (out_at > e.uncompressed) bad("entry '%s' inflates to more than the %llu bytes it declares", e.name.c_str(), static_cast<unsigned long long>(e.uncompressed));
            bad("entry '%s': its deflated data is corrupt or cut short", e.name.c_str());
        }
        if (out_at != e.uncompressed)
            bad("entry '%s' inflates to %zu bytes, but declares %llu", e.name.c_str(), out_at, static_cast<unsigned long long>(e.uncompressed));
        out.resize(out_at);
        return out;
    }
};

}  // namespace

StateEntries npz_load_bytes(const std::string& bytes, const std::string& name) {
    ZipReader zip{bytes, name};
    uint64_t directory_offset = 0;
    std::vector<ZipEntry> directory = zip.directory(&directory_offset);
    StateEntries entries;
    std::unordered_set<std::string> seen;
    for (const ZipEntry& z : directory) {
        if (z.name.size() < 5 || z.name.compare(z.name.size() - 4, 4, ".npy") != 0)
            zip.bad("entry '%s' is not a .npy array (an .npz holds only .npy files; tapedeck never runs pickles)", z.name.c_str());
        if (!seen.insert(z.name).second) zip.bad("entry '%s' is in the archive twice", z.name.c_str());
        StateEntry e;
        e.key = z.name.substr(0, z.name.size() - 4);
        NpyContent content = npy_parse_bytes(zip.entry_bytes(z, directory_offset), name + ": entry '" + z.name + "'", "torch.load");
        e.kind = content.is_string ? STATE_STRING : STATE_TENSOR;
        e.value = content.tensor;
        e.text = content.text;
        entries.push_back(std::move(e));
    }
    return entries;
}

}  // namespace td
