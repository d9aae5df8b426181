// plan_native_build.cpp: freeze to native code, the build — finding the compiler, the private
// cache, compiling, checking a cached object before it is loaded, and loading it (plan_native.h).
//
// The cache: $XDG_CACHE_HOME/tapedeck/native (or ~/.cache/tapedeck/native), mode 0700 and owned
// by the user, else refused. An object is named by a hash of the source's code (its comments,
// which name recorded nodes and script lines, left out), the compiler (its
// path, size and time) and the flags; beside it, <key>.check records the key, its size and a hash
// of its bytes, written after the object. A cached object is loaded only when its check file is
// its own and its bytes match it; otherwise it is rebuilt. The source (<key>.cpp) and the
// compiler's messages (<key>.log) stay there for people to read.
//
// [SECTION] compiler and cache   finding them, hashes
// [SECTION] compile              running the compiler with a time limit
// [SECTION] build                check, compile, load
#include "plan_native.h"
#include "file_whole.h"
#include "plan_internal.h"
#include "native_prelude_text.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

namespace td {

PlanNative::~PlanNative() {
    if (handle) dlclose(handle);
}

const char* plan_native_flags() {
    return "-std=c++20 -O3 -march=native -ffp-contract=off -fno-math-errno -fPIC -shared -lmvec";
}

std::string plan_native_prelude() {
    std::string math = scalar_math_text;
    size_t include = math.find("#include \"host_device.h\"");
    if (include != std::string::npos) math.replace(include, strlen("#include \"host_device.h\""), "#define TD_HOST_DEVICE");
    std::string prelude = "#include <limits>\n" + math + "\n" + native_prelude_text + "\n";
    for (size_t at = prelude.find("#pragma once"); at != std::string::npos; at = prelude.find("#pragma once"))
        prelude.erase(at, strlen("#pragma once"));   // a header's guard: the prelude is the main file
    return prelude;
}

namespace {

// ============================================================================================
// [SECTION] compiler and cache

uint64_t fnv1a(const std::string& bytes, uint64_t hash = 14695981039346656037ull) {
    for (unsigned char c : bytes) hash = (hash ^ c) * 1099511628211ull;
    return hash;
}

std::string hex(uint64_t x) {
    char text[24];
    snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(x));
    return text;
}

// The source without its comments: what the compiler compiles. The cache is keyed by it, so a
// plan recorded again (new node ids in the comments) or a script line reworded finds its object.
std::string code_of(const std::string& source) {
    std::string code;
    code.reserve(source.size());
    for (size_t at = 0; at < source.size();) {
        size_t end = source.find('\n', at);
        if (end == std::string::npos) end = source.size();
        size_t comment = source.find("//", at);
        code.append(source, at, (comment < end ? comment : end) - at);
        code += '\n';
        at = end + 1;
    }
    return code;
}

bool executable_file(const std::string& path) {
    struct stat st;
    return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(path.c_str(), X_OK) == 0;
}

// The compiler: options, $TAPEDECK_CXX, $CXX (a path or a name on PATH), else g++, c++, clang++
// on PATH. "" with `why` set when there is none.
std::string find_compiler(const NativeBuildOptions& options, std::string& why) {
    std::string asked = options.compiler, from = "the compiler option";
    if (asked.empty() && getenv("TAPEDECK_CXX") && *getenv("TAPEDECK_CXX")) asked = getenv("TAPEDECK_CXX"), from = "TAPEDECK_CXX";
    if (asked.empty() && getenv("CXX") && *getenv("CXX")) asked = getenv("CXX"), from = "CXX";
    std::vector<std::string> names = asked.empty() ? std::vector<std::string>{"g++", "c++", "clang++"} : std::vector<std::string>{asked};
    const char* path_env = getenv("PATH");
    std::string path = path_env ? path_env : "/usr/bin:/bin";
    for (const std::string& name : names) {
        if (name.find('/') != std::string::npos) {
            if (executable_file(name)) return name;
            continue;
        }
        for (size_t start = 0; start <= path.size();) {
            size_t end = path.find(':', start);
            if (end == std::string::npos) end = path.size();
            std::string candidate = path.substr(start, end - start) + "/" + name;
            if (end > start && executable_file(candidate)) return candidate;
            start = end + 1;
        }
    }
    why = asked.empty() ? "no C++ compiler found (looked for g++, c++ and clang++ on PATH; install g++, or set TAPEDECK_CXX)"
                        : "no C++ compiler at " + from + "=" + asked + " (not an executable file, nor one on PATH)";
    return "";
}

// The compiler's identity for the cache key: its path, size and modification time.
std::string compiler_identity(const std::string& compiler) {
    struct stat st;
    if (stat(compiler.c_str(), &st) != 0) return compiler;
    return compiler + " " + std::to_string(st.st_size) + " " + std::to_string(st.st_mtime);
}

bool make_private_dir(const std::string& dir, std::string& why) {
    if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
        why = "cannot make the cache folder " + dir + ": " + strerror(errno);
        return false;
    }
    struct stat st;
    if (lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
        why = "the cache folder " + dir + " is not a folder";
        return false;
    }
    if (st.st_uid != getuid()) {
        why = "the cache folder " + dir + " belongs to another user";
        return false;
    }
    if ((st.st_mode & 077) && chmod(dir.c_str(), 0700) != 0) {
        why = "the cache folder " + dir + " is open to other users and cannot be made private";
        return false;
    }
    return true;
}

// The cache folder, made (private) when missing; "" with `why` when it cannot be used.
std::string cache_dir(const NativeBuildOptions& options, std::string& why) {
    std::string dir = options.cache_dir;
    if (dir.empty()) {
        const char* xdg = getenv("XDG_CACHE_HOME");
        const char* home = getenv("HOME");
        std::string base = xdg && *xdg ? xdg : home && *home ? std::string(home) + "/.cache" : "";
        if (base.empty()) {
            why = "no cache folder (neither XDG_CACHE_HOME nor HOME is set)";
            return "";
        }
        mkdir(base.c_str(), 0700);
        if (!make_private_dir(base + "/tapedeck", why)) return "";
        dir = base + "/tapedeck/native";
    }
    if (!make_private_dir(dir, why)) return "";
    if (access(dir.c_str(), W_OK) != 0) {
        why = "the cache folder " + dir + " is not writable";
        return "";
    }
    return dir;
}

// ============================================================================================
// [SECTION] compile

// Runs argv with stdout and stderr to `log`; false (with `why`) when it cannot start, fails, or
// runs over `limit_seconds` (then it is killed).
bool run_command(const std::vector<std::string>& argv, const std::string& log, double limit_seconds, std::string& why) {
    pid_t child = fork();
    if (child < 0) {
        why = std::string("cannot start the compiler: ") + strerror(errno);
        return false;
    }
    if (child == 0) {
        int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        std::vector<char*> args;
        for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
        args.push_back(nullptr);
        execv(args[0], args.data());
        _exit(127);
    }
    auto start = std::chrono::steady_clock::now();
    int status = 0;
    while (waitpid(child, &status, WNOHANG) == 0) {
        if (plan_seconds_since(start) > limit_seconds) {
            kill(child, SIGKILL);
            waitpid(child, &status, 0);
            why = "the compiler ran over " + std::to_string(static_cast<int>(limit_seconds)) + " s and was stopped";
            return false;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return true;
    why = WIFEXITED(status) ? "the compiler failed (exit status " + std::to_string(WEXITSTATUS(status)) + ")"
                            : "the compiler was killed by signal " + std::to_string(WTERMSIG(status));
    return false;
}

// The first lines of the compiler's messages, for the user.
std::string log_head(const std::string& log) {
    std::string text;
    try {
        text = file_read_bytes(log, "native", 1 << 20);
    } catch (const std::exception&) {
        return "";
    }
    size_t at = 0;
    for (int line = 0; line < 12 && at != std::string::npos; ++line) at = text.find('\n', at + 1);
    return at == std::string::npos ? text : text.substr(0, at) + "\n...";
}

constexpr double COMPILE_LIMIT_SECONDS = 300;

bool compile_object(const std::string& compiler, const std::string& dir, const std::string& key, const std::string& source,
                    std::string& why) {
    std::string cpp = dir + "/" + key + ".cpp", object = dir + "/" + key + ".so", log = dir + "/" + key + ".log";
    std::string temporary = object + ".tmp" + std::to_string(getpid());
    try {
        file_write_whole(cpp, source, "native");
    } catch (const std::exception& error) {
        why = error.what();
        return false;
    }
    std::vector<std::string> argv = {compiler}, libraries;   // libraries (-l) after the source
    std::string flags = plan_native_flags();
    for (size_t at = 0; at < flags.size();) {
        size_t end = flags.find(' ', at);
        if (end == std::string::npos) end = flags.size();
        std::string flag = flags.substr(at, end - at);
        (flag.rfind("-l", 0) == 0 ? libraries : argv).push_back(flag);
        at = end + 1;
    }
    argv.insert(argv.end(), {"-o", temporary, cpp});
    argv.insert(argv.end(), libraries.begin(), libraries.end());
    if (!run_command(argv, log, COMPILE_LIMIT_SECONDS, why)) {
        unlink(temporary.c_str());
        std::string head = log_head(log);
        why += " on " + cpp + (head.empty() ? "" : ":\n" + head);
        return false;
    }
    if (rename(temporary.c_str(), object.c_str()) != 0) {
        why = "cannot put the object in the cache: " + std::string(strerror(errno));
        unlink(temporary.c_str());
        return false;
    }
    return true;
}

// ============================================================================================
// [SECTION] build

// The check file of the object cached under `key`: the key (another object's check file, put in
// its place with it, does not match), the object's size and the hash of its bytes.
std::string check_text(const std::string& key, const std::string& object_bytes) {
    return "tapedeck native object " + key + "\nsize " + std::to_string(object_bytes.size()) + "\nfnv1a " +
           hex(fnv1a(object_bytes)) + "\n";
}

// Whether the object cached under `key` matches its check file (written after it): the key, its
// size and hash, before anything loads it. `why` says what did not match when the object is there.
bool cached_object_holds(const std::string& key, const std::string& object, const std::string& check, std::string& why) {
    if (access(object.c_str(), F_OK) != 0) return false;
    try {
        std::string bytes = file_read_bytes(object, "native", size_t(1) << 30);
        std::string recorded = access(check.c_str(), F_OK) == 0 ? file_read_bytes(check, "native", 4096) : "";
        std::string expected = check_text(key, bytes);
        if (recorded == expected) return true;
        bool same_key = recorded.substr(0, recorded.find('\n')) == expected.substr(0, expected.find('\n'));
        why = recorded.empty() ? "it had no check file"
              : !same_key      ? "its check file is another object's"
                               : "its size or hash did not match its check file";
    } catch (const std::exception& error) {
        why = error.what();
    }
    return false;
}

// dlopen and dlsym every segment's function; the object must carry the source's hash.
bool load_object(PlanNative& native, const std::string& object, const std::string& source_hash, std::string& why) {
    void* handle = dlopen(object.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
        why = std::string("cannot load ") + object + ": " + dlerror();
        return false;
    }
    const char* carried = static_cast<const char*>(dlsym(handle, "td_native_source_hash"));
    bool ok = carried && source_hash == carried;
    for (NativeSegment& seg : native.segments) {
        seg.run = reinterpret_cast<void (*)(void* const*)>(dlsym(handle, seg.symbol.c_str()));
        ok = ok && seg.run;
    }
    if (!ok) {
        dlclose(handle);
        why = object + " is not the object of this plan (its source hash or functions differ)";
        return false;
    }
    native.handle = handle;
    return true;
}

}  // namespace

std::string plan_native_full_source(const PlanNative& native) {
    return plan_native_prelude() + "extern \"C\" const char td_native_source_hash[] = \"" + hex(fnv1a(code_of(native.source))) + "\";\n\n" +
           native.source;
}

NativeBuildResult plan_native_build(Plan& plan, const NativeBuildOptions& options) {
    NativeBuildResult result;
    if (plan.exec && plan.exec->running) {
        result.message = "the plan is running";
        return result;
    }
    std::unique_ptr<PlanNative> native = plan_native_generate(plan);
    if (!native->why_not.empty()) {
        result.message = native->why_not;
        return result;
    }
    std::string why;
    native->compiler = find_compiler(options, why);
    std::string dir = native->compiler.empty() ? "" : cache_dir(options, why);
    if (dir.empty()) {
        result.message = why;
        return result;
    }
    std::string source = plan_native_full_source(*native);
    std::string key = hex(fnv1a(code_of(source) + "\n" + compiler_identity(native->compiler) + "\n" + plan_native_flags()));
    native->object_path = dir + "/" + key + ".so";
    std::string check = dir + "/" + key + ".check";
    auto start = std::chrono::steady_clock::now();
    std::string stale;
    native->cache_hit = cached_object_holds(key, native->object_path, check, stale);
    if (!native->cache_hit) {
        unlink(check.c_str());
        if (!compile_object(native->compiler, dir, key, source, why)) {
            result.message = why;
            return result;
        }
        native->compile_seconds = plan_seconds_since(start);
        try {
            file_write_whole(check, check_text(key, file_read_bytes(native->object_path, "native", size_t(1) << 30)), "native");
        } catch (const std::exception& error) {
            result.message = error.what();
            return result;
        }
        start = std::chrono::steady_clock::now();
    }
    if (!load_object(*native, native->object_path, hex(fnv1a(code_of(native->source))), why)) {
        result.message = why;
        return result;
    }
    native->load_seconds = plan_seconds_since(start);
    char text[256];
    snprintf(text, sizeof text, "%d of %zu steps native in %zu segments (%s)", native->native_steps, plan.steps.size(),
             native->segments.size(), native->cache_hit ? "cached object" : "compiled");
    result.message = text + std::string(stale.empty() ? "" : "; the cached object was rebuilt: " + stale);
    result.ok = true;
    plan.native = std::move(native);
    plan.exec.reset();   // rebuilt on the next call, with the segments
    return result;
}

}  // namespace td
