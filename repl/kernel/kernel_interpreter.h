// kernel_interpreter.h: tapedeck as a Jupyter kernel's interpreter (xeus 2.4): cells run as REPL
// lines, results and pictures as rich displays, the debugger's prompt through Jupyter's input.
#pragma once

#include <atomic>
#include <chrono>
#include <string>
#include <xeus/xinterpreter.hpp>

#include "debugger_front_end.h"
#include "kernel_cell.h"
#include "output_capture.h"

struct lua_State;

class KernelInterpreter : public xeus::xinterpreter {
public:
    KernelInterpreter(lua_State* L, OutputCapture& output);

    // print, io.write and io.stdout:write send what they wrote to the notebook as they run
    // (flush_output_soon), not at the cell's end. Call once, before the kernel starts.
    void install_live_output();
    // Flush (below), except within a burst: past 20 writes less than 50 ms apart, the rest wait for
    // a write after a pause, or the cell's end.
    void flush_output_soon();

    // A debugger stop's line (the LineSource the debugger reads at a stop while a cell runs): the
    // picture of the stop shown (or updated in place), then the frontend's input prompt. Without
    // stdin (a notebook run headless) the stop continues. False when the frontend went away.
    bool read_stop_line(const char* prompt, std::string& line);

    // The count of the cell that runs or ran last.
    int execution_count() const { return cell_; }

    // Set by the interrupt thread while read_stop_line waits on the frontend.
    std::atomic<bool> waiting_for_input{false};

private:
    void configure_impl() override {}
    nl::json execute_request_impl(int execution_counter, const std::string& code, bool silent, bool store_history,
                                  nl::json user_expressions, bool allow_stdin) override;
    nl::json complete_request_impl(const std::string& code, int cursor_pos) override;
    nl::json inspect_request_impl(const std::string& code, int cursor_pos, int detail_level) override;
    nl::json is_complete_request_impl(const std::string& code) override;
    nl::json kernel_info_request_impl() override;
    void shutdown_request_impl() override {}

    // Send what was printed since the last flush as stream messages.
    void flush_output();
    // Run one Lua part of cell `cell`; on success its result (a MIME bundle, or null) in *result,
    // on error the message with its traceback in *error.
    bool run_lua(const CellPart& part, int cell, nl::json* result, std::string* error);
    // Run one ':' command, with a picture where the notebook can show one (:graph, :plot, ...).
    void run_command(const std::string& line);
    void show(const nl::json& data);
    void show_stop_picture();

    lua_State* L_;
    OutputCapture& output_;
    bool silent_ = false;           // the running request's: nothing published
    bool allow_stdin_ = false;      // the running request's: the frontend answers input prompts
    bool said_no_stdin_ = false;    // the cell was told its stops continue
    int cell_ = 0;                  // the running cell's execution count
    std::string stop_display_id_;   // the stop picture of the running cell, updated in place
    std::chrono::steady_clock::time_point last_flush_;
    int lines_in_burst_ = 0;
    std::string stop_shown_;        // what it shows: the stop's serial, rewound event, nodes
};
