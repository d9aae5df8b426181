// kernel_history.cpp: the notebook's input history (kernel_history.h).
#include "kernel_history.h"

#include <fnmatch.h>

#include <set>

namespace {

nl::json ok_reply(nl::json history) {
    nl::json reply;
    reply["status"] = "ok";
    reply["history"] = std::move(history);
    return reply;
}

}  // namespace

void KernelHistory::store_inputs_impl(int session, int, const std::string& input, const std::string& output) {
    entries_.push_back({session, execution_count_(), input, output});
    if (entries_.size() > MOST_ENTRIES) entries_.pop_front();
}

nl::json KernelHistory::item(const Entry& e, bool output) const {
    if (output) return nl::json::array({e.session, e.line, nl::json::array({e.input, e.output})});
    return nl::json::array({e.session, e.line, e.input});
}

nl::json KernelHistory::get_tail_impl(int n, bool, bool output) const {
    nl::json history = nl::json::array();
    size_t count = n < 0 ? 0 : std::min(static_cast<size_t>(n), entries_.size());
    for (size_t i = entries_.size() - count; i < entries_.size(); ++i) history.push_back(item(entries_[i], output));
    return ok_reply(history);
}

nl::json KernelHistory::get_range_impl(int session, int start, int stop, bool, bool output) const {
    nl::json history = nl::json::array();
    for (const Entry& e : entries_)   // the lines start..stop-1 of the session (stop <= 0: to the end)
        if (e.session == session && e.line >= start && (stop <= 0 || e.line < stop)) history.push_back(item(e, output));
    return ok_reply(history);
}

nl::json KernelHistory::search_impl(const std::string& pattern, bool, bool output, int n, bool unique) const {
    nl::json found = nl::json::array();
    std::set<std::string> seen;
    for (auto e = entries_.rbegin(); e != entries_.rend() && (n <= 0 || static_cast<int>(found.size()) < n); ++e) {
        if (fnmatch(pattern.c_str(), e->input.c_str(), 0) != 0) continue;
        if (unique && !seen.insert(e->input).second) continue;
        found.insert(found.begin(), item(*e, output));
    }
    return ok_reply(found);
}
