// kernel_install.cpp: `tapedeck --install-kernel [--user | --prefix DIR]` writes the kernelspec
// (kernel.h).
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "file_whole.h"
#include "kernel.h"

namespace fs = std::filesystem;

namespace {

const char* const INSTALL_USAGE = "usage: tapedeck --install-kernel [--user | --prefix DIR]\n";

// The user's Jupyter data folder, as Jupyter finds it: $JUPYTER_DATA_DIR, else
// $XDG_DATA_HOME/jupyter, else ~/.local/share/jupyter.
fs::path user_data_dir() {
    if (const char* dir = getenv("JUPYTER_DATA_DIR"); dir && *dir) return dir;
    if (const char* xdg = getenv("XDG_DATA_HOME"); xdg && *xdg) return fs::path(xdg) / "jupyter";
    const char* home = getenv("HOME");
    return fs::path(home && *home ? home : ".") / ".local" / "share" / "jupyter";
}

// kernel.json: this program (its real path) with --kernel, interrupted by SIGINT.
std::string kernel_json(const fs::path& program) {
    nlohmann::json spec;
    spec["argv"] = {program.string(), "--kernel", "{connection_file}"};
    spec["display_name"] = "tapedeck (Lua)";
    spec["language"] = "lua";
    spec["interrupt_mode"] = "signal";
    spec["metadata"]["debugger"] = false;
    return spec.dump(2) + "\n";
}

}  // namespace

int kernel_install(int argc, char** argv) {
    fs::path root = "/usr/local/share/jupyter";
    for (int i = 0; i < argc; ++i) {
        if (strcmp(argv[i], "--user") == 0) {
            root = user_data_dir();
        } else if (strcmp(argv[i], "--prefix") == 0 && i + 1 < argc) {
            root = fs::path(argv[++i]) / "share" / "jupyter";
        } else {
            fprintf(stderr, "tapedeck --install-kernel: unexpected '%s'\n%s", argv[i], INSTALL_USAGE);
            return 2;
        }
    }
    fs::path dir = root / "kernels" / "tapedeck";
    try {
        fs::path program = fs::canonical("/proc/self/exe");
        fs::create_directories(dir);
        td::file_write_whole((dir / "kernel.json").string(), kernel_json(program), "tapedeck --install-kernel");
        for (const char* logo : {"logo-32x32.png", "logo-64x64.png", "logo-svg.svg"}) {
            fs::path from = fs::path(TAPEDECK_SOURCE_DIR) / "assets" / logo;
            std::string bytes = td::file_read_bytes(from.string(), "tapedeck --install-kernel", 1 << 20);
            td::file_write_whole((dir / logo).string(), bytes, "tapedeck --install-kernel");
        }
        printf("installed the kernelspec 'tapedeck' in %s (it runs %s)\n", dir.c_str(), program.c_str());
    } catch (const std::exception& e) {
        fprintf(stderr, "tapedeck --install-kernel: %s\n", e.what());
        return 1;
    }
    return 0;
}
