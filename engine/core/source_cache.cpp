// source_cache.cpp: script text for the Source window, group titles, and the debugger's banners and
// :list (one cache for all of them, so an edited script shows its new lines everywhere).
#include "source_cache.h"

#include <sys/stat.h>

#include <cstdio>
#include <list>

namespace td {

namespace {

constexpr size_t MAX_FILES = 16;
constexpr long MAX_FILE_BYTES = 2 << 20;

// What tells that a file changed on disk: its modification time (to the nanosecond) and size.
struct FileStamp {
    long long mtime_ns = -1;   // -1: not a readable regular file
    long long size = 0;
    bool operator!=(const FileStamp& o) const { return mtime_ns != o.mtime_ns || size != o.size; }
};

struct CachedFile {
    std::string path;
    FileStamp stamp;
    bool readable = false;
    std::vector<std::string> lines;
};

std::list<CachedFile>& cache() {   // most recently used first
    static std::list<CachedFile> files;
    return files;
}

FileStamp file_stamp(const std::string& path) {
    FileStamp stamp;
    struct stat st;
    if (stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return stamp;
    stamp.mtime_ns = static_cast<long long>(st.st_mtim.tv_sec) * 1000000000LL + st.st_mtim.tv_nsec;
    stamp.size = static_cast<long long>(st.st_size);
    return stamp;
}

void read_file(CachedFile& f) {
    f.lines.clear();
    f.readable = false;
    FILE* in = fopen(f.path.c_str(), "rb");
    if (!in) return;
    std::string line;
    long total = 0;
    int c;
    while ((c = fgetc(in)) != EOF && total < MAX_FILE_BYTES) {
        ++total;
        if (c == '\n') {
            f.lines.push_back(line);
            line.clear();
        } else if (c != '\r') {
            line += static_cast<char>(c);
        }
    }
    if (!line.empty()) f.lines.push_back(line);
    fclose(in);
    f.readable = true;
}

}  // namespace

const std::vector<std::string>* source_lines(const std::string& file) {
    std::list<CachedFile>& files = cache();
    FileStamp stamp = file_stamp(file);
    for (auto it = files.begin(); it != files.end(); ++it) {
        if (it->path != file) continue;
        if (it->stamp != stamp) {
            it->stamp = stamp;
            if (stamp.mtime_ns >= 0) read_file(*it);
            else it->readable = false;
        }
        files.splice(files.begin(), files, it);
        return files.front().readable ? &files.front().lines : nullptr;
    }
    CachedFile f;
    f.path = file;
    f.stamp = stamp;
    if (stamp.mtime_ns >= 0) read_file(f);
    files.push_front(std::move(f));
    if (files.size() > MAX_FILES) files.pop_back();
    return files.front().readable ? &files.front().lines : nullptr;
}

std::string source_line_text(const std::string& file, int line) {
    const std::vector<std::string>* lines = source_lines(file);
    if (!lines || line < 1 || line > static_cast<int>(lines->size())) return "";
    const std::string& s = (*lines)[line - 1];
    size_t a = s.find_first_not_of(" \t"), b = s.find_last_not_of(" \t");
    return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

}  // namespace td
