// main.cpp: the `tapedeck` program. Runs scripts, code (-e) and the REPL (-i, or no script), as
// lua.c does, plus subcommands (`tapedeck bench`).
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <lua.hpp>
#include <string>
#include <vector>

#include "backend.h"
#include "blas.h"
#include "device.h"
#include "onnx_export.h"
#include "plan.h"
#include "commands.h"
#include "debugger.h"
#include "dap.h"
#include "kernel.h"
#include "repl.h"
#include "repl_state.h"
#include "tapedeck_lua.h"
#include "viewer.h"

namespace {

const char* const USAGE =
    "usage: tapedeck [options] [script.lua [args...]]   (script '-' is stdin)\n"
    "       tapedeck bench [--peers] [--out DIR] [--device cuda] [workload...]\n"
    "       tapedeck run-plan plan.tdp [--input name=file.npy ...] [--out dir] [--max-bytes N]\n"
    "       tapedeck export-onnx plan.tdp model.onnx [--inline] [--strict]\n"
    "       tapedeck --kernel CONNECTION_FILE             (a Jupyter kernel: started by Jupyter)\n"
    "       tapedeck --install-kernel [--user | --prefix DIR]   (the Jupyter kernelspec 'tapedeck')\n"
    "       tapedeck --dap                   (a Debug Adapter Protocol server on stdin/stdout: for an editor)\n"
    "       tapedeck --dap-port N            (the same on 127.0.0.1:N, a session per connection)\n"
    "Options:\n"
    "  -i          run the script, then open the REPL with its globals\n"
    "  --pm        post-mortem: when the script fails, stop in the failing frame (then exit with status 1)\n"
    "  -e code     run code (may be given more than once)\n"
    "  --view      open the graph viewer window (with no -i: until it is closed or Ctrl-C)\n"
    "  --screenshot out.png [--frames N]   after the script, write the viewer as a PNG\n"
    "  -v          print the version, where the matrix products run (OpenBLAS or Eigen) and the GPU\n"
    "  --ops       list every op and which devices have its kernel (cpu, cuda)\n"
    "  -h          print this help\n"
    "With no script and no -e, tapedeck opens the REPL. Inside it, type :help.\n";

// `tapedeck --ops`: each op of the table, and for each device its kernel or why there is none.
void print_op_coverage() {
    printf("%-28s %-5s %s\n", "op", "cpu", "cuda");
    int counts[2] = {0, 0};
    for (int i = 0; i < td::OP_COUNT; ++i) {
        td::OpId op = static_cast<td::OpId>(i);
        const char* cpu = td::kernel_missing_reason(op, td::DEVICE_CPU);
        const char* cuda = td::kernel_missing_reason(op, td::DEVICE_CUDA);
        counts[0] += !cpu;
        counts[1] += !cuda;
        printf("%-28s %-5s %s\n", td::op_info(op).name, cpu ? "-" : "yes", cuda ? cuda : "yes");
    }
    printf("%d ops: %d with a cpu kernel, %d with a cuda kernel (%s)\n", static_cast<int>(td::OP_COUNT), counts[0],
           counts[1], td::cuda_available() ? td::cuda_device_name().c_str() : td::cuda_unavailable_reason().c_str());
}

// `tapedeck bench [--peers] [names]` runs bench/bench.lua from the source tree this program was built
// from. The global TAPEDECK_BUILD names this build for the results' header ("tapedeck 0.1; GEMM: ...").
int subcommand_bench(lua_State* L, int argc, char** argv) {
    std::string script = std::string(TAPEDECK_SOURCE_DIR) + "/bench/bench.lua";
    std::string build = std::string("tapedeck ") + TAPEDECK_VERSION + "; GEMM: " + td::blas_describe();
    lua_pushstring(L, build.c_str());
    lua_setglobal(L, "TAPEDECK_BUILD");
    for (int i = 0; i < argc; ++i) lua_pushstring(L, argv[i]);
    return repl_run_chunk(L, script, "", true, argc) == LUA_OK ? 0 : 1;
}

// "1000000", "512M", "4G": a number of bytes (K, M, G: powers of 1024); false when it is not one.
bool parse_byte_count(const std::string& text, size_t* out) {
    size_t digits = 0;
    unsigned long long n = 0;
    while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') {
        if (__builtin_mul_overflow(n, 10ull, &n) || __builtin_add_overflow(n, static_cast<unsigned long long>(text[digits] - '0'), &n))
            return false;
        ++digits;
    }
    if (digits == 0 || n == 0) return false;
    std::string unit = text.substr(digits);
    int shift = unit.empty() ? 0 : unit == "K" || unit == "k" ? 10 : unit == "M" || unit == "m" ? 20 : unit == "G" || unit == "g" ? 30 : -1;
    if (shift < 0 || n > (~0ull >> shift)) return false;
    *out = static_cast<size_t>(n << shift);
    return true;
}

// The tensor of a --input file for plan input k, or an error naming run-plan, the input and the file.
td::Tensor run_plan_input(const td::Plan& plan, size_t k, const std::string& file) {
    const td::PlanInput& in = plan.inputs[k];
    td::Value v;
    try {
        v = td::npy_load(file);
    } catch (const td::EngineError& e) {
        td::engine_fail("run-plan: input %zu (%s): %s", k + 1, in.name.c_str(), e.what());
    }
    if (v.shape != in.shape || v.dtype != in.dtype)
        td::engine_fail("run-plan: input %zu (%s) must be %s %s, but %s holds %s %s", k + 1, in.name.c_str(),
                        td::dtype_name(in.dtype), in.shape.str().c_str(), file.c_str(), td::dtype_name(v.dtype),
                        v.shape.str().c_str());
    td::Tensor t = td::ops::create(td::OP_zeros, v.shape, v.dtype);
    memcpy(t.value().raw(), v.raw(), static_cast<size_t>(v.numel()) * td::dtype_size(v.dtype));
    td::node_set_requires_grad(t.node.get(), t.output, in.requires_grad);
    return t;
}

// run-plan's command line: the plan file, the --input files (name or "" for the next input in
// order, file), --out and --max-bytes.
struct RunPlanArgs {
    std::string plan_path;
    std::string out_dir = ".";
    td::PlanLoadOptions load_options;
    std::vector<std::pair<std::string, std::string>> given;
};

const char* const RUN_PLAN_USAGE =
    "usage: tapedeck run-plan plan.tdp [--input name=file.npy ...] [--out dir] [--max-bytes N[K|M|G]]\n";

// Parse run-plan's arguments; false, with the message and usage printed, on bad input.
bool run_plan_parse_args(int argc, char** argv, RunPlanArgs& args) {
    for (int i = 0; i < argc; ++i) {
        std::string a = argv[i];
        if ((a == "--input" || a == "--out" || a == "--max-bytes") && i + 1 >= argc) {
            fprintf(stderr, "run-plan: %s needs a value\n%s", a.c_str(), RUN_PLAN_USAGE);
            return false;
        }
        if (a == "--input") {
            std::string spec = argv[++i];
            size_t eq = spec.find('=');
            args.given.emplace_back(eq == std::string::npos ? "" : spec.substr(0, eq), eq == std::string::npos ? spec : spec.substr(eq + 1));
        } else if (a == "--out") {
            args.out_dir = argv[++i];
        } else if (a == "--max-bytes") {
            if (!parse_byte_count(argv[++i], &args.load_options.max_bytes)) {
                fprintf(stderr, "run-plan: --max-bytes needs a positive number of bytes like 1000000, 512M or 4G, got '%s'\n%s",
                        argv[i], RUN_PLAN_USAGE);
                return false;
            }
        } else if (args.plan_path.empty() && !a.empty() && a[0] != '-') {
            args.plan_path = a;
        } else {
            fprintf(stderr, "run-plan: unknown argument '%s'\n%s", a.c_str(), RUN_PLAN_USAGE);
            return false;
        }
    }
    if (args.plan_path.empty()) {
        fputs(RUN_PLAN_USAGE, stderr);
        return false;
    }
    return true;
}

// The plan's inputs from the --input files, by name or in order; an error (thrown) names an
// unknown, extra, repeated or missing input.
std::vector<td::Tensor> run_plan_inputs(const td::Plan& plan, const std::vector<std::pair<std::string, std::string>>& given) {
    std::vector<td::Tensor> inputs(plan.inputs.size());
    size_t next_positional = 0;
    for (const auto& g : given) {
        size_t k = next_positional;
        if (!g.first.empty()) {
            for (k = 0; k < plan.inputs.size() && plan.inputs[k].name != g.first; ++k) {}
            if (k == plan.inputs.size()) {
                std::string names;
                for (const td::PlanInput& in : plan.inputs) names += " " + in.name;
                if (names.empty()) names = " none";
                td::engine_fail("run-plan: the plan has no input '%s' (its inputs:%s)", g.first.c_str(), names.c_str());
            }
        } else {
            ++next_positional;
        }
        if (k >= inputs.size())
            td::engine_fail("run-plan: more inputs given than the plan takes (%zu)", inputs.size());
        if (inputs[k].defined())
            td::engine_fail("run-plan: input %zu (%s) is given twice", k + 1, plan.inputs[k].name.c_str());
        inputs[k] = run_plan_input(plan, k, g.second);
    }
    for (size_t k = 0; k < inputs.size(); ++k)
        if (!inputs[k].defined())
            td::engine_fail("run-plan: input %zu (%s, %s %s) is missing: give --input %s=file.npy", k + 1,
                            plan.inputs[k].name.c_str(), td::dtype_name(plan.inputs[k].dtype),
                            plan.inputs[k].shape.str().c_str(), plan.inputs[k].name.c_str());
    return inputs;
}

// Write what the run returned (output1.npy, ...), and each captured tensor as it is now with its
// gradient (<name>.npy, <name>.grad.npy), into `out_dir` (made when missing), one line each.
void run_plan_write_results(const td::Plan& plan, const td::PlanRunResult& result, const std::string& out_dir) {
    std::error_code error;
    std::filesystem::create_directories(out_dir, error);
    if (error) td::engine_fail("run-plan: cannot make %s: %s", out_dir.c_str(), error.message().c_str());
    auto write = [&](const std::string& file, const td::Value& v) {
        std::string path = (std::filesystem::path(out_dir) / file).lexically_normal().string();
        td::npy_save(v, path);
        printf("wrote %s  %s %s\n", path.c_str(), td::dtype_name(v.dtype), v.shape.str().c_str());
    };
    for (size_t k = 0; k < result.outputs.size(); ++k)
        if (result.outputs[k].defined()) write("output" + std::to_string(k + 1) + ".npy", result.outputs[k].value());
    for (size_t c = 0; c < plan.captured.size(); ++c) {
        const td::Tensor& t = plan.captured[c].tensor;
        std::string name = plan.captured[c].name.empty() ? "captured" + std::to_string(c + 1) : plan.captured[c].name;
        write(name + ".npy", t.value());
        const td::Tensor& grad = t.node->outputs[t.output].grad;
        if (grad.defined()) write(name + ".grad.npy", grad.value());
    }
}

// `tapedeck run-plan plan.tdp --input x=x.npy --input y=y.npy --out results/`: runs a saved plan
// once on .npy inputs (by name, or in order without a name) and writes what it returned
// (output1.npy, ...), the gradients it accumulated (<name>.grad.npy) and the captured tensors as
// they are after the call (<name>.npy: updated weights) into the out directory. --max-bytes bounds
// the memory the plan may take (plan_load's max_bytes).
int subcommand_run_plan(lua_State*, int argc, char** argv) {
    RunPlanArgs args;
    if (!run_plan_parse_args(argc, argv, args)) return 2;
    try {
        td::PlanPasses passes;
        std::unique_ptr<td::Plan> recorded = td::plan_load(args.plan_path, &passes, args.load_options);
        std::unique_ptr<td::Plan> plan = td::plan_compile(std::move(recorded), passes);
        std::vector<td::Tensor> inputs = run_plan_inputs(*plan, args.given);
        td::set_grad_enabled(plan->grad_mode);   // as when it was recorded (a plan made under no_grad too)
        std::string mismatch = td::plan_check_inputs(*plan, inputs);
        if (!mismatch.empty()) td::engine_fail("run-plan: %s", mismatch.c_str());
        td::PlanRunResult result = td::plan_run(*plan, inputs, true);
        if (!result.completed) td::engine_fail("run-plan: %s", result.reason.c_str());
        run_plan_write_results(*plan, result, args.out_dir);
    } catch (const std::exception& e) {
        fprintf(stderr, "%s\n", e.what());
        return 1;
    }
    return 0;
}

// `tapedeck export-onnx plan.tdp model.onnx [--inline] [--strict]`: a saved plan (torch.save_plan)
// as an ONNX model, as torch.onnx.export writes it (docs/onnx.md). Prints what the model takes
// and gives, and any warning.
int subcommand_export_onnx(lua_State*, int argc, char** argv) {
    std::vector<std::string> paths;
    td::OnnxExportOptions options;
    for (int i = 0; i < argc; ++i) {
        std::string a = argv[i];
        if (a == "--inline") options.inline_backward = true;
        else if (a == "--strict") options.strict = true;
        else if (!a.empty() && a[0] == '-') {
            fprintf(stderr, "tapedeck export-onnx: unknown option %s (expected --inline or --strict)\n", a.c_str());
            return 2;
        } else paths.push_back(a);
    }
    if (paths.size() != 2) {
        fprintf(stderr, "usage: tapedeck export-onnx plan.tdp model.onnx [--inline] [--strict]\n");
        return 2;
    }
    try {
        td::PlanPasses passes;
        std::shared_ptr<const td::Plan> recorded(td::plan_load(paths[0], &passes));
        td::OnnxExportResult result = td::onnx_export(recorded, options, paths[1]);
        for (const std::string& w : result.warnings) fprintf(stderr, "export_onnx: warning: %s\n", w.c_str());
        auto joined = [](const std::vector<std::string>& list) {
            std::string text;
            for (const std::string& s : list) text += (text.empty() ? "" : ", ") + s;
            return text;
        };
        printf("wrote %s: %d nodes, %d functions (opset %d)\n  inputs:  %s\n  outputs: %s\n", paths[1].c_str(), result.nodes,
               result.functions, options.opset, joined(result.inputs).c_str(), joined(result.outputs).c_str());
    } catch (const std::exception& e) {
        fprintf(stderr, "%s\n", e.what());
        return 1;
    }
    return 0;
}

struct Subcommand {
    const char* name;
    int (*run)(lua_State* L, int argc, char** argv);   // args after the subcommand's name
};

const Subcommand subcommands[] = {
    {"bench", subcommand_bench},
    {"run-plan", subcommand_run_plan},
    {"export-onnx", subcommand_export_onnx},
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

// Where the REPL and debugger stops read lines: stdin, made on first use (a script that never
// stops never sets up readline).
LineSource& stdin_source() {
    if (!repl_state.stdin_source) {
        repl_state.stdin_source = line_source_for_stdin();
        repl_state.stdin_source->on_idle = viewer_frame;   // the viewer's window keeps drawing while the prompt (or a stop) waits
    }
    return *repl_state.stdin_source;
}

// The terminal REPL as the debugger's front end (debugger_front_end.h): stops run its loop and
// run Lua as it does.
DebuggerFrontEnd terminal_front_end() {
    DebuggerFrontEnd f;
    f.call = repl_docall;
    f.report = repl_report;
    f.load = repl_load;
    f.eval = repl_eval;
    f.run_chunk = repl_run_chunk;
    f.run_command = command_run;
    f.loop = repl_loop;
    f.request_quit = repl_request_quit;
    f.quit_requested = repl_quit_requested;
    f.set_break_in = repl_set_break_in;
    f.set_error_observer = repl_set_error_observer;
    return f;
}

// The debugger is attached unless TAPEDECK_DEBUGGER=off (to measure what attaching costs); its
// commands work either way.
void attach_debugger(lua_State* L) {
    debugger_set_front_end(terminal_front_end());
    debugger_open_lua(L);
    const char* setting = getenv("TAPEDECK_DEBUGGER");
    if (setting && strcmp(setting, "off") == 0) return;
    debugger_attach(L, stdin_source, isatty(STDIN_FILENO));
}

void print_banner() {
    printf("tapedeck %s (Lua 5.4) -- :help for commands, Ctrl-D to quit\n", TAPEDECK_VERSION);
}

// The one way out of main: the Lua state closes (every tensor, the debugger, the viewer's window
// and worker go, in order), then the line source, then the engine's spare memory. The engine's singletons are immortal,
// so nothing of it is destroyed after main returns.
int shutdown(lua_State* L, int status) {
    lua_close(L);
    repl_state.stdin_source.reset();   // readline's history file is trimmed here
    td::engine_release_spares();
    return status;
}

// What the command line asks for, read as lua.c reads it: options, then the script and its arguments.
struct ProgramOptions {
    bool interactive = false;          // -i, or neither a script nor -e
    bool post_mortem = false;          // --pm
    std::vector<const char*> code;     // -e chunks, in order
    int script = 0;                    // index of the script in argv; 0: none
    ViewerOptions viewer;              // --view, --screenshot FILE, --frames N
};

constexpr int OPTIONS_GO_ON = -1;

// Read the options up to the script (or "--"). Returns OPTIONS_GO_ON, or the exit status the
// program ends with: -v, --ops and -h print and end; bad options print why and the usage.
int parse_options(int argc, char** argv, ProgramOptions& options) {
    std::string option_error;
    int i = 1;
    for (; i < argc && argv[i][0] == '-' && argv[i][1] != '\0'; ++i) {   // "-" alone is a script: stdin
        if (viewer_parse_option(argc, argv, &i, &options.viewer, &option_error)) {   // --view, --screenshot FILE, --frames N
            if (!option_error.empty()) {
                fprintf(stderr, "tapedeck: %s\n%s", option_error.c_str(), USAGE);
                return 1;
            }
        } else if (strcmp(argv[i], "-i") == 0) {
            options.interactive = true;
        } else if (strcmp(argv[i], "--pm") == 0) {
            options.post_mortem = true;
        } else if (strcmp(argv[i], "-e") == 0) {
            if (++i >= argc) {
                fprintf(stderr, "tapedeck: -e needs code after it\n%s", USAGE);
                return 1;
            }
            options.code.push_back(argv[i]);
        } else if (strcmp(argv[i], "-v") == 0 || strcmp(argv[i], "--version") == 0) {
            printf("tapedeck %s\n", TAPEDECK_VERSION);
            printf("GEMM: %s\n", td::blas_describe().c_str());   // which products run where (engine/backends/blas.h)
            printf("GPU: %s\n", td::cuda_available() ? td::cuda_device_name().c_str() : td::cuda_unavailable_reason().c_str());
            if (td::cuda_built()) printf("CUDA: %s\n", td::cuda_libraries().c_str());   // what the loader found
            return 0;
        } else if (strcmp(argv[i], "--ops") == 0) {
            print_op_coverage();
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
    options.script = i < argc ? i : 0;
    if (options.post_mortem && !options.script) {
        fprintf(stderr, "tapedeck: --pm needs a script to run, as in  tapedeck --pm train.lua\n%s", USAGE);
        return 1;
    }
    if (options.post_mortem && !debugger_attached()) {
        fprintf(stderr, "tapedeck: --pm needs the debugger (TAPEDECK_DEBUGGER=off turns it off)\n");
        return 1;
    }
    if (options.script == 0 && options.code.empty()) options.interactive = true;
    return OPTIONS_GO_ON;
}

// Run what the options ask for: the -e chunks, the script (with --pm's post-mortem), the viewer
// the options opened, then with -i the REPL. Returns the exit status.
int run_program(lua_State* L, int argc, char** argv, const ProgramOptions& options) {
    int script = options.script;
    if (options.interactive && isatty(STDIN_FILENO)) print_banner();
    // A person will look at the graph afterwards: backward passes keep what they recorded. A
    // script run on its own frees it as it goes, as PyTorch does (engine_backward_graph_kept).
    td::engine_keep_backward_graph(options.interactive);
    set_arg_table(L, argv, argc, script);
    viewer_start_from_options(options.viewer);

    for (const char* chunk : options.code) {
        if (repl_run_chunk(L, chunk, "=command line", false) != LUA_OK) return 1;
    }
    int status = 0;
    if (script) {   // the rest of the command line is its arguments (also passed as `...`)
        for (int j = script + 1; j < argc; ++j) lua_pushstring(L, argv[j]);
        debugger_set_post_mortem_on_error(options.post_mortem);
        if (repl_run_chunk(L, argv[script], "", true, argc - script - 1) != LUA_OK) status = 1;
        debugger_set_post_mortem_on_error(false);
    }
    if (repl_quit_requested()) {   // :quit at a debugger stop; the script's failure when --pm showed it
        return debugger_input_ended() || (options.post_mortem && status != 0) ? 1 : 0;
    }
    if (viewer_finish_from_options(options.viewer, options.interactive, repl_take_interrupt) != 0) status = 1;
    if (options.interactive) {   // after a script that failed too: its globals are there to inspect
        repl_loop(L, stdin_source());
        status = debugger_input_ended() ? 1 : 0;
    }
    return status;
}

// `tapedeck --dap` or `tapedeck --dap-port N`: the DAP server (repl/dap/, docs/debugger.md).
int run_dap(lua_State* L, int argc, char** argv) {
    bool port = strcmp(argv[1], "--dap-port") == 0;
    if (argc != (port ? 3 : 2)) {
        fprintf(stderr, "tapedeck: %s\n%s", port ? "--dap-port needs a port number, and nothing else" : "--dap takes nothing else", USAGE);
        return 1;
    }
    if (!port) return dap_serve_stdio(L);
    char* end = nullptr;
    long n = strtol(argv[2], &end, 10);
    if (end == argv[2] || *end != '\0' || n < 0 || n > 65535) {
        fprintf(stderr, "tapedeck: --dap-port needs a port number from 0 (any free one) to 65535, not '%s'\n", argv[2]);
        return 1;
    }
    return dap_serve_port(L, static_cast<int>(n));
}

}  // namespace

int main(int argc, char** argv) {
    lua_State* L = luaL_newstate();
    luaL_openlibs(L);
    tapedeck_open(L);
    viewer_open_lua(L);
    repl_install_interrupt_handler(L);   // repl_state.L: the program's Lua state
    attach_debugger(L);
    td::engine_keep_backward_graph(false);   // a subcommand (bench) or a script; -i turns it on below

    if (argc > 1) {
        for (const Subcommand& s : subcommands) {
            if (strcmp(argv[1], s.name) == 0) {
                return shutdown(L, s.run(L, argc - 2, argv + 2));
            }
        }
    }
    if (argc > 1 && strcmp(argv[1], "--install-kernel") == 0) return shutdown(L, kernel_install(argc - 2, argv + 2));
    if (argc > 1 && strcmp(argv[1], "--kernel") == 0) {
        if (argc != 3) {
            fprintf(stderr, "tapedeck: --kernel needs the connection file Jupyter gives, and nothing else\n%s", USAGE);
            return shutdown(L, 1);
        }
        return shutdown(L, kernel_run(L, argv[2]));
    }
    if (argc > 1 && (strcmp(argv[1], "--dap") == 0 || strcmp(argv[1], "--dap-port") == 0)) return shutdown(L, run_dap(L, argc, argv));
    // Options first (as lua.c): -e chunks run in order after the banner, then the script.
    ProgramOptions options;
    int ended = parse_options(argc, argv, options);
    if (ended != OPTIONS_GO_ON) return shutdown(L, ended);
    return shutdown(L, run_program(L, argc, argv, options));
}
