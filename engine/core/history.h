// history.h: the debugger's rewind history — what the program computed, kept so that a stop can
// look back at it (`:back`, the viewer's timeline).
//
// While something looks at values (engine_values_watched(): the debugger with a breakpoint or a
// step, the viewer's window) and the budget is not 0, every event the debugger can stop at is
// recorded: a forward node that ran (HOOK_AFTER) and a backward group (HOOK_GROUP_DONE). An event
// holds references to the values needed to show it as it was (no copy): a forward node's inputs
// and outputs; a backward group's forward inputs and outputs, the gradients that arrived at the
// node (grad_output) and those its rule sent on (grad_input). Nothing re-runs.
//
// The history is an observer of the engine's hook (tape.h): OBSERVER_FOLLOWS, so it gets node
// events only while something looks at values, and OBSERVER_FIRST, so a stop finds its own event.
//
// In-place writes: a storage the history holds is copied before a node writes it (copy-on-write,
// at HOOK_BEFORE_WRITE: an in-place op's storage, or a buffer a frozen call's replay reuses),
// once per event interval, so a rewound view reads the bytes as they were
// (history_value_as_of). Debugger edits at the live stop change the live event itself: `out = t`
// writes the values the event holds, `grad_input[i] = t` is noted (history_note_group_edited).
//
// The budget bounds the bytes the history holds: every storage an event references (counted once
// however many events share it, and whether or not something else holds it too: an upper bound
// of what the history keeps alive), with its header, plus the copies, plus the events' own
// records (an event and its block of values: ~120 bytes, and ~100 per value). Over it, the oldest
// events' values are let go (the events stay listed, `values_kept` false: they "fell out"); still
// over it, the oldest events are forgotten. The listed events are also at most HISTORY_MAX_EVENTS.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tape.h"

namespace td {

constexpr size_t HISTORY_DEFAULT_BUDGET = 64ull << 20;    // 64 MB: the viewer left open over a long run holds no more
constexpr size_t HISTORY_MAX_EVENTS = 100000;

// One value an event held: its value, and which node output it is (0 when none: a gradient
// held by no node).
struct HistoryValue {
    Value value;              // empty (no storage) where there was none, or after it fell out
    int64_t node_id = 0;
    int output = 0;
};

// A run of an event's values (its inputs, its outputs, ...).
struct HistoryValues {
    const HistoryValue* first = nullptr;
    size_t count = 0;
    size_t size() const { return count; }
    bool empty() const { return count == 0; }
    const HistoryValue& operator[](size_t i) const { return first[i]; }
    const HistoryValue* begin() const { return first; }
    const HistoryValue* end() const { return first + count; }
};

struct HistoryEvent {
    uint64_t serial = 0;      // events are numbered 1, 2, ... in the order they happened
    int64_t node_id = 0;      // the node that ran, or the forward node of a backward group
    std::string op;           // its op's name (a torch.Function's own name)
    Phase phase = PHASE_FORWARD;
    bool group = false;       // a backward group (HOOK_GROUP_DONE), else a node that ran
    SourceLoc where;
    int64_t newest_id = 0;    // the newest node on the tape then: later ids did not exist yet
    uint64_t pass = 0;        // backward: BackwardPass::serial of its pass
    bool values_kept = true;  // false once its values fell out of the budget
    // The values, in one block (one allocation an event): inputs, outputs, grad_outputs, grad_inputs.
    std::vector<HistoryValue> values;
    uint16_t n_inputs = 0, n_outputs = 0, n_grad_outputs = 0, n_grad_inputs = 0;

    // forward: the node's inputs; group: the forward node's
    HistoryValues inputs() const { return run(0, n_inputs); }
    // the node's outputs (group: the forward node's)
    HistoryValues outputs() const { return run(n_inputs, n_outputs); }
    // group: per output, what arrived (d root / d output)
    HistoryValues grad_outputs() const { return run(n_inputs + n_outputs, n_grad_outputs); }
    // group: per input, what the rule sent (d root / d input)
    HistoryValues grad_inputs() const { return run(n_inputs + n_outputs + n_grad_outputs, n_grad_inputs); }

private:
    HistoryValues run(size_t first, size_t count) const {
        return values_kept && first + count <= values.size() ? HistoryValues{values.data() + first, count} : HistoryValues{};
    }
};

// The budget in bytes; 0 turns the history off and lets everything go.
void history_set_budget(size_t bytes);
size_t history_budget();
// Whether events are being recorded now (a budget, something watching values, not paused).
bool history_recording();
// The debugger's stop prompt pauses recording (ops typed at a stop are not events), nested.
void history_pause();
void history_resume();
// Forget every event (keeps the budget).
void history_clear();

size_t history_bytes_held();           // charged bytes: held storages + copies (headers too) + the events' records
size_t history_copy_bytes();           // of which copies made before in-place writes
size_t history_events_listed();
size_t history_events_with_values();
uint64_t history_newest_serial();      // 0 when none
uint64_t history_oldest_serial();      // the oldest listed; 0 when none
uint64_t history_oldest_kept_serial(); // the oldest whose values are kept; 0 when none
// The event with that serial, or null when it was never recorded or was forgotten.
const HistoryEvent* history_event(uint64_t serial);

// `v` as it was at event `serial`: v itself unless an in-place write since then changed its
// storage, in which case the same layout on the copy taken before that write. Not held by the
// history (or none since): v.
Value history_value_as_of(const Value& v, uint64_t serial);

// The debugger replaced a gradient at the live stop of `node`'s backward group: the newest event,
// when it is that group, holds the new grad_input.
void history_note_group_edited(const Node* node);

// The largest budget history_parse_bytes accepts (1 PiB: more than any machine holds, far below
// what a size_t counts).
constexpr size_t HISTORY_MAX_BUDGET = size_t(1) << 50;
// Parse "200MB", "1 GB", "512KB", "1000" (bytes), "off"/"0" into bytes. False when it is not one;
// then *why (when given) says why when it is a size but too large (above HISTORY_MAX_BUDGET).
bool history_parse_bytes(const std::string& text, size_t* bytes, std::string* why = nullptr);
// "200 MB", "1.5 GB", "512 KB", "300 bytes".
std::string history_bytes_text(size_t bytes);

}  // namespace td
