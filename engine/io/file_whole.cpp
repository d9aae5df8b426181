// file_whole.cpp: whole-or-nothing writes and size-bounded reads (file_whole.h).
//
// [SECTION] names     folder, file name, the temporary name, a file type in words
// [SECTION] write     the temporary file, committing it, file_write_whole
// [SECTION] read      file_read_bytes, bytes_text
#include "file_whole.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "tensor.h"

namespace td {

// ============================================================================================
// [SECTION] names

namespace {

std::string folder_of(const std::string& path) {
    size_t slash = path.find_last_of('/');
    if (slash == std::string::npos) return ".";
    return slash == 0 ? "/" : path.substr(0, slash);
}

std::string name_of(const std::string& path) {
    size_t slash = path.find_last_of('/');
    return slash == std::string::npos ? path : path.substr(slash + 1);
}

// ".<name>.tmp-": what every temporary file for `target` starts with (the name cut so that the
// whole stays under NAME_MAX).
std::string temp_prefix(const std::string& target) { return "." + name_of(target).substr(0, 200) + ".tmp-"; }

const char* file_type_text(mode_t mode) {
    if (S_ISDIR(mode)) return "a directory";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    if (S_ISFIFO(mode)) return "a fifo (named pipe)";
    if (S_ISSOCK(mode)) return "a socket";
    return "not a regular file";
}

// The file a write to `path` replaces: the file a symbolic link points to, else `path` itself.
std::string write_target(const std::string& path) {
    struct stat st;
    if (lstat(path.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return path;
    char* real = realpath(path.c_str(), nullptr);
    if (!real) return path;   // a dangling link: the link itself is replaced
    std::string resolved = real;
    free(real);
    return resolved;
}

}  // namespace

// ============================================================================================
// [SECTION] write

namespace {

// The file being written: an unnamed O_TMPFILE (named only at the end), or a named one. Its
// destructor closes it and removes a named one that was not committed.
struct TempFile {
    int fd = -1;
    std::string name;        // empty while unnamed
    ~TempFile() {
        if (fd >= 0) close(fd);
        if (!name.empty()) unlink(name.c_str());
    }
};

// A name for a temporary file in the target's folder: ".<name>.tmp-<pid>-<n>", n from the clock and
// the attempt (the caller tries again when the name is taken).
std::string temp_name(const std::string& target, int attempt) {
    auto ticks = static_cast<unsigned long long>(std::chrono::steady_clock::now().time_since_epoch().count());
    std::string folder = folder_of(target);
    return (folder == "/" ? "" : folder) + "/" + temp_prefix(target) + std::to_string(getpid()) + "-" +
           std::to_string((ticks + static_cast<unsigned long long>(attempt)) % 1000000000ull);
}

// Opens the temporary file beside `target` (unnamed when the filesystem and /proc allow it).
void temp_open(TempFile& temp, const std::string& target, const char* function, const std::string& unchanged) {
    temp.fd = open(folder_of(target).c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0666);
    if (temp.fd >= 0) {
        std::string self = "/proc/self/fd/" + std::to_string(temp.fd);
        if (access(self.c_str(), F_OK) == 0) return;   // it can be linked into the folder at the end
        close(temp.fd);
    }
    for (int attempt = 0; attempt < 100; ++attempt) {
        std::string name = temp_name(target, attempt);
        temp.fd = open(name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (temp.fd >= 0) {
            temp.name = name;
            return;
        }
        if (errno != EEXIST) break;
    }
    engine_fail("%scannot write %s: %s%s", function, target.c_str(), std::strerror(errno), unchanged.c_str());
}

void write_all(int fd, std::string_view bytes) {
    const char* at = bytes.data();
    size_t left = bytes.size();
    while (left > 0) {
        ssize_t n = write(fd, at, std::min<size_t>(left, size_t(1) << 30));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) throw errno;
        if (n == 0) throw EIO;
        at += n;
        left -= static_cast<size_t>(n);
    }
}

// Gives an unnamed temporary file a name in the folder (the rename needs one).
void temp_link(TempFile& temp, const std::string& target) {
    std::string self = "/proc/self/fd/" + std::to_string(temp.fd);
    for (int attempt = 0; attempt < 100; ++attempt) {
        std::string name = temp_name(target, attempt);
        if (linkat(AT_FDCWD, self.c_str(), AT_FDCWD, name.c_str(), AT_SYMLINK_FOLLOW) == 0) {
            temp.name = name;
            return;
        }
        if (errno != EEXIST) throw errno;
    }
    throw EEXIST;
}

// Removes the named temporary files of `target` that processes which no longer run left behind
// (a kill during a save). Best effort: an error here is no error of the save.
void remove_stale_temps(const std::string& target) {
    std::string folder = folder_of(target), prefix = temp_prefix(target);
    DIR* dir = opendir(folder.c_str());
    if (!dir) return;
    while (dirent* entry = readdir(dir)) {
        std::string name = entry->d_name;
        if (name.compare(0, prefix.size(), prefix) != 0) continue;
        long pid = std::strtol(name.c_str() + prefix.size(), nullptr, 10);
        if (pid <= 0 || pid == getpid() || kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;
        unlinkat(dirfd(dir), name.c_str(), 0);
    }
    closedir(dir);
}

}  // namespace

void file_write_whole(const std::string& path, std::string_view bytes, const char* function_or_null) {
    std::string prefix = function_or_null ? std::string(function_or_null) + ": " : "";
    const char* function = prefix.c_str();
    std::string target = write_target(path);
    struct stat old;
    bool existed = stat(target.c_str(), &old) == 0;
    if (existed && !S_ISREG(old.st_mode))
        engine_fail("%scannot write %s: it is %s, not a regular file", function, path.c_str(), file_type_text(old.st_mode));
    std::string unchanged = existed ? " (the file there is unchanged)" : "";
    if (existed && access(target.c_str(), W_OK) != 0)   // a read-only file stays protected, as a write in place would leave it
        engine_fail("%scannot write %s: %s%s", function, path.c_str(), std::strerror(errno), unchanged.c_str());
    TempFile temp;
    temp_open(temp, target, function, unchanged);
    try {
        if (existed) fchmod(temp.fd, old.st_mode & 07777);
        write_all(temp.fd, bytes);
        if (fsync(temp.fd) != 0) throw errno;
        if (temp.name.empty()) temp_link(temp, target);
        if (rename(temp.name.c_str(), target.c_str()) != 0) throw errno;
        temp.name.clear();   // it is the target now
    } catch (int error) {
        engine_fail("%scannot write %s: %s%s", function, path.c_str(), std::strerror(error), unchanged.c_str());
    }
    int dir = open(folder_of(target).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    bool synced = dir >= 0 && (fsync(dir) == 0 || errno == EINVAL);   // EINVAL: the filesystem does not sync folders
    int error = errno;
    if (dir >= 0) close(dir);
    if (!synced)
        engine_fail("%s%s is written, but its folder could not be synced to disk: %s", function, path.c_str(), std::strerror(error));
    remove_stale_temps(target);
}

// ============================================================================================
// [SECTION] read

std::string bytes_text(size_t bytes) {
    char buffer[64];
    if (bytes >= (size_t(1) << 30)) snprintf(buffer, sizeof buffer, "%.2f GB", static_cast<double>(bytes) / (1u << 30));
    else if (bytes >= (size_t(1) << 20)) snprintf(buffer, sizeof buffer, "%.1f MB", static_cast<double>(bytes) / (1u << 20));
    else snprintf(buffer, sizeof buffer, "%zu bytes", bytes);
    return buffer;
}

namespace {

// Refuses what is not a regular file, by its type; the size otherwise.
size_t regular_file_size(const struct stat& st, const std::string& path, const char* function) {
    if (S_ISDIR(st.st_mode)) engine_fail("%s: %s is a directory, not a file", function, path.c_str());
    if (!S_ISREG(st.st_mode)) engine_fail("%s: %s is %s, not a file: only regular files are read", function, path.c_str(), file_type_text(st.st_mode));
    return static_cast<size_t>(st.st_size);
}

}  // namespace

std::string file_read_bytes(const std::string& path, const char* function, size_t max_bytes) {
    struct stat st;
    if (stat(path.c_str(), &st) != 0) engine_fail("%s: cannot open %s: %s", function, path.c_str(), std::strerror(errno));
    regular_file_size(st, path, function);
    // O_NONBLOCK: should the path become a fifo after the stat, opening it does not wait for a writer
    int fd = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) engine_fail("%s: cannot open %s: %s", function, path.c_str(), std::strerror(errno));
    struct Closer {
        int fd;
        ~Closer() { close(fd); }
    } closer{fd};
    if (fstat(fd, &st) != 0) engine_fail("%s: cannot read %s: %s", function, path.c_str(), std::strerror(errno));
    size_t size = regular_file_size(st, path, function);
    if (size > max_bytes)
        engine_fail("%s: %s: the file is larger than the bound of %s (it is %s)", function, path.c_str(), bytes_text(max_bytes).c_str(),
                    bytes_text(size).c_str());
    std::string bytes(size, '\0');
    for (size_t at = 0; at <= size;) {   // one read past the size: a file that grows is noticed
        char extra;
        ssize_t n = at < size ? read(fd, bytes.data() + at, std::min<size_t>(size - at, size_t(1) << 30)) : read(fd, &extra, 1);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) engine_fail("%s: cannot read %s: %s", function, path.c_str(), std::strerror(errno));
        if (n == 0 && at < size) engine_fail("%s: %s: the file got shorter while it was read (%s of %s)", function, path.c_str(),
                                             bytes_text(at).c_str(), bytes_text(size).c_str());
        if (at == size && n > 0) engine_fail("%s: %s: the file grew while it was read (it was %s)", function, path.c_str(), bytes_text(size).c_str());
        if (at == size) break;
        at += static_cast<size_t>(n);
    }
    return bytes;
}

}  // namespace td
