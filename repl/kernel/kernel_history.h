// kernel_history.h: the notebook's input history (history_request: tail, range, search), as the
// messaging spec shapes it: [session, line, input], or [session, line, [input, output]] when the
// output is asked for. (xeus 2.4's in-memory manager answers the latter as four items, and xeus
// 2.4 stores every cell as line 1: the line here is the cell's execution count, asked of the
// interpreter.)
#pragma once

#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <xeus/xhistory_manager.hpp>

class KernelHistory : public xeus::xhistory_manager {
public:
    // `execution_count` gives the count of the cell that just ran.
    explicit KernelHistory(std::function<int()> execution_count) : execution_count_(std::move(execution_count)) {}
    // At most this many cells are kept (the oldest go): a long session stays bounded.
    static constexpr size_t MOST_ENTRIES = 10000;

private:
    struct Entry {
        int session = 0, line = 0;
        std::string input, output;
    };
    void configure_impl() override {}
    void store_inputs_impl(int session, int line, const std::string& input, const std::string& output) override;
    nl::json get_tail_impl(int n, bool raw, bool output) const override;
    nl::json get_range_impl(int session, int start, int stop, bool raw, bool output) const override;
    nl::json search_impl(const std::string& pattern, bool raw, bool output, int n, bool unique) const override;
    nl::json item(const Entry& e, bool output) const;

    std::function<int()> execution_count_;
    std::deque<Entry> entries_;
};
