// main.cpp: the `tapedeck` program. Runs scripts, code (-e) and the REPL (-i, or no script), as
// lua.c does, plus subcommands (`tapedeck bench`).
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <lua.hpp>
#include <string>
#include <vector>

#include "repl.h"
#include "tapedeck_lua.h"
#include "viewer.h"

namespace {

const char* const USAGE =
    "usage: tapedeck [options] [script.lua [args...]]   (script '-' is stdin)\n"
    "       tapedeck bench [workload...]\n"
    "Options:\n"
    "  -i          run the script, then open the REPL with its globals\n"
    "  -e code     run code (may be given more than once)\n"
    "  --view      open the graph viewer window (with no -i: until it is closed or Ctrl-C)\n"
    "  --screenshot out.png [--frames N]   after the script, write the viewer as a PNG\n"
    "  -v          print the version\n"
    "  -h          print this help\n"
    "With no script and no -e, tapedeck opens the REPL. Inside it, type :help.\n";

// `tapedeck bench [names]` runs bench/bench.lua from the source tree this program was built from.
int subcommand_bench(lua_State* L, int argc, char** argv) {
    std::string script = std::string(TAPEDECK_SOURCE_DIR) + "/bench/bench.lua";
    for (int i = 0; i < argc; ++i) lua_pushstring(L, argv[i]);
    return repl_run_chunk(L, script, "", true, argc) == LUA_OK ? 0 : 1;
}

struct Subcommand {
    const char* name;
    int (*run)(lua_State* L, int argc, char** argv);   // args after the subcommand's name
};

const Subcommand subcommands[] = {
    {"bench", subcommand_bench},
};

// The global `arg`: arg[0] is the script, arg[1..] its arguments, negative indices the rest.
void set_arg_table(lua_State* L, char** argv, int argc, int script_index) {
    lua_createtable(L, argc - script_index - 1, script_index + 1);
    for (int i = 0; i < argc; ++i) {
        lua_pushstring(L, argv[i]);
        lua_rawseti(L, -2, i - script_index);
    }
    lua_setglobal(L, "arg");
}

void print_banner() {
    printf("tapedeck %s (Lua 5.4) -- :help for commands, Ctrl-D to quit\n", TAPEDECK_VERSION);
}

}  // namespace

int main(int argc, char** argv) {
    lua_State* L = luaL_newstate();
    luaL_openlibs(L);
    tapedeck_open(L);
    viewer_open_lua(L);
    repl_install_interrupt_handler(L);

    if (argc > 1) {
        for (const Subcommand& s : subcommands) {
            if (strcmp(argv[1], s.name) == 0) {
                int code = s.run(L, argc - 2, argv + 2);
                lua_close(L);
                return code;
            }
        }
    }

    // Options first (as lua.c): -e chunks run in order after the banner, then the script.
    bool interactive = false;
    std::vector<const char*> code;
    std::string option_error;
    int i = 1;
    for (; i < argc && argv[i][0] == '-' && argv[i][1] != '\0'; ++i) {   // "-" alone is a script: stdin
        if (viewer_parse_option(argc, argv, &i, &option_error)) {   // --view, --screenshot FILE, --frames N
            if (!option_error.empty()) {
                fprintf(stderr, "tapedeck: %s\n%s", option_error.c_str(), USAGE);
                return 1;
            }
        } else if (strcmp(argv[i], "-i") == 0) {
            interactive = true;
        } else if (strcmp(argv[i], "-e") == 0) {
            if (++i >= argc) {
                fprintf(stderr, "tapedeck: -e needs code after it\n%s", USAGE);
                return 1;
            }
            code.push_back(argv[i]);
        } else if (strcmp(argv[i], "-v") == 0 || strcmp(argv[i], "--version") == 0) {
            printf("tapedeck %s\n", TAPEDECK_VERSION);
            return 0;
        } else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            fputs(USAGE, stdout);
            return 0;
        } else if (strcmp(argv[i], "--") == 0) {
            ++i;
            break;
        } else {
            fprintf(stderr, "tapedeck: unknown option '%s'\n%s", argv[i], USAGE);
            return 1;
        }
    }
    int script = i < argc ? i : 0;   // index of the script in argv; 0: none
    if (script == 0 && code.empty()) interactive = true;
    if (interactive && isatty(STDIN_FILENO)) print_banner();
    set_arg_table(L, argv, argc, script);
    viewer_start_from_options();

    for (const char* chunk : code) {
        if (repl_run_chunk(L, chunk, "=command line", false) != LUA_OK) {
            lua_close(L);
            return 1;
        }
    }
    int status = 0;
    if (script) {   // the rest of the command line is its arguments (also passed as `...`)
        for (int j = script + 1; j < argc; ++j) lua_pushstring(L, argv[j]);
        if (repl_run_chunk(L, argv[script], "", true, argc - script - 1) != LUA_OK) status = 1;
    }
    if (viewer_finish_from_options(interactive, repl_take_interrupt) != 0) status = 1;
    if (interactive) {   // after a script that failed too: its globals are there to inspect
        std::unique_ptr<LineSource> source = line_source_for_stdin(L);
        source->on_idle = viewer_frame;   // the viewer's window keeps drawing while the prompt waits
        repl_loop(L, *source);
        status = 0;
    }
    lua_close(L);
    return status;
}
