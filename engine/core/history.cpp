// history.cpp: the rewind history (history.h): events recorded from the engine's hook (an
// OBSERVER_FOLLOWS observer, called first), the values they hold, copies before in-place writes,
// and the budget.
//
// [SECTION] state      the events, the storages they hold (counted once), the copies
// [SECTION] holding    hold / let go of a value; an event's values falling out; the budget
// [SECTION] recording  the observer: forward nodes, backward groups
// [SECTION] writes     copy-on-write before an in-place op, and reading a value as it was
// [SECTION] api        budget, pause, counts, parsing "200MB"
#include "history.h"

#include <cctype>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <unordered_map>

namespace td {

// ============================================================================================
// [SECTION] state

namespace {

// The bytes of one storage before an in-place write, taken while events up to `after_serial` had
// been recorded: the storage as events <= after_serial (and after the previous copy) saw it.
struct StorageCopy {
    uint64_t after_serial;
    Ref<Storage> copy;
};

// The copies of one storage (Storage::history_copied), oldest first.
struct StorageCopies {
    uint64_t serial = 0;              // Storage::serial (a freed storage's address may come back)
    std::vector<StorageCopy> copies;
};

// A copy in the order copies were made, so the ones no kept event needs go first.
struct CopyOrder {
    uint64_t after_serial;
    Storage* storage;
    uint64_t storage_serial;
};

struct HistoryState {
    size_t budget = HISTORY_DEFAULT_BUDGET;
    int paused = 0;
    std::deque<HistoryEvent> events;   // serials events.front().serial .. next_serial - 1, in order
    uint64_t next_serial = 1;
    size_t with_values = 0;            // the newest `with_values` events still hold their values
    std::unordered_map<Storage*, StorageCopies> copied;   // only storages written since an event held them
    std::deque<CopyOrder> copy_order;
    size_t held_bytes = 0;             // bytes of the storages held (Storage::history_refs > 0), headers too
    size_t copy_bytes = 0;             // bytes of the copies, headers too
    size_t event_bytes = 0;            // the events' own bookkeeping: each event and its block of values
    int observer = 0;                  // the engine hook's handle
    uint8_t observed_events = 0;       // the events it asked for (subscribe_wanted_events)
};

void on_engine_event(Node* node, HookEvent event, void*);

// The events the history needs: a node that ran and a backward group, while it records (a
// budget, not paused; the engine gives them only while someone looks at values: OBSERVER_FOLLOWS);
// a storage about to be written, while some event holds values (paused too: ops typed at a stop
// may write what it holds).
uint8_t wanted_events(size_t budget, int paused, size_t with_values) {
    uint8_t events = 0;
    if (budget > 0 && paused == 0) events |= hook_bit(HOOK_AFTER) | hook_bit(HOOK_GROUP_DONE);
    if (with_values > 0) events |= hook_bit(HOOK_BEFORE_WRITE);
    return events;
}

// Immortal, as the engine's other singletons. Subscribed first (OBSERVER_FIRST), so that a
// debugger's stop finds its own event recorded.
HistoryState& history_state_made() {
    HistoryState* state = new HistoryState;
    state->observed_events = wanted_events(state->budget, state->paused, state->with_values);
    state->observer = engine_observe(on_engine_event, nullptr, state->observed_events, OBSERVER_FOLLOWS, OBSERVER_FIRST);
    return *state;
}
HistoryState& h = history_state_made();

// After a change of the budget, the pause or the events holding values.
void subscribe_wanted_events() {
    uint8_t events = wanted_events(h.budget, h.paused, h.with_values);
    if (events == h.observed_events) return;
    h.observed_events = events;
    engine_observe_events(h.observer, events);
}

// What the history is charged for: the storages it holds and the copies, each with its header
// (tensor.cpp's 64-byte header on the CPU, a host record for a device's), and the events
// themselves. A budget of 64 MB holds about 64 MB then, however small the values.
constexpr size_t STORAGE_HEADER_BYTES = 64;
size_t storage_charge(const Storage* s) { return s->bytes + (s->device == DEVICE_CPU ? STORAGE_HEADER_BYTES : sizeof(Storage)); }
size_t event_charge(const HistoryEvent& e) {
    size_t op_heap = e.op.capacity() > 15 ? e.op.capacity() + 1 : 0;   // past the string's inline buffer
    return sizeof(HistoryEvent) + e.values.capacity() * sizeof(HistoryValue) + op_heap;
}
size_t charged_bytes() { return h.held_bytes + h.copy_bytes + h.event_bytes; }

uint64_t oldest_kept() {
    if (h.with_values == 0) return 0;
    return h.events[h.events.size() - h.with_values].serial;
}

// ============================================================================================
// [SECTION] holding

// Values are counted on their storage (Storage::history_refs): holding one costs no lookup.
void hold(const Value& v) {
    Storage* s = v.storage.get();
    if (s && s->history_refs++ == 0) h.held_bytes += storage_charge(s);
}

void forget_copies(Storage* s) {
    auto it = h.copied.find(s);
    if (it != h.copied.end()) {
        for (const StorageCopy& c : it->second.copies) h.copy_bytes -= storage_charge(c.copy.get());
        h.copied.erase(it);
    }
    s->history_copied = false;
}

void let_go(HistoryValue& hv) {
    Storage* s = hv.value.storage.get();
    if (s && --s->history_refs == 0) {
        h.held_bytes -= storage_charge(s);
        if (s->history_copied) forget_copies(s);
    }
    hv.value = Value();
}

void let_go_all(std::vector<HistoryValue>& values) {
    for (HistoryValue& hv : values) let_go(hv);
    std::vector<HistoryValue>().swap(values);
}

// The oldest event that still holds values lets them go (it stays listed).
void drop_oldest_values() {
    HistoryEvent& e = h.events[h.events.size() - h.with_values];
    h.event_bytes -= event_charge(e);
    let_go_all(e.values);
    h.event_bytes += event_charge(e);
    e.values_kept = false;
    --h.with_values;
}

// Copies taken before every kept event's time are read by no view: let them go, oldest first.
void drop_unneeded_copies() {
    uint64_t first = h.with_values ? oldest_kept() : h.next_serial;
    while (!h.copy_order.empty() && h.copy_order.front().after_serial < first) {
        CopyOrder c = h.copy_order.front();
        h.copy_order.pop_front();
        auto it = h.copied.find(c.storage);
        if (it == h.copied.end() || it->second.serial != c.storage_serial || it->second.copies.empty()) continue;
        std::vector<StorageCopy>& copies = it->second.copies;
        if (copies.front().after_serial != c.after_serial) continue;
        h.copy_bytes -= storage_charge(copies.front().copy.get());
        copies.erase(copies.begin());
        if (copies.empty()) forget_copies(c.storage);
    }
}

// Forget the oldest listed event (its values first, when it still holds them).
void forget_oldest_event() {
    if (h.with_values == h.events.size()) drop_oldest_values();
    h.event_bytes -= event_charge(h.events.front());
    h.events.pop_front();
}

// Within the budget and the event cap. Over the budget, events whose values fell out are forgotten
// first (oldest first: their records cost what values would), then the oldest values fall out;
// the newest event stays listed.
void trim() {
    while (charged_bytes() > h.budget) {
        if (h.events.size() > h.with_values && h.events.size() > 1) forget_oldest_event();
        else if (h.with_values > 0) drop_oldest_values();
        else break;
    }
    while (h.events.size() > HISTORY_MAX_EVENTS) forget_oldest_event();
    drop_unneeded_copies();
    subscribe_wanted_events();
}

HistoryValue value_of(const Value& v, int64_t node_id, int output) {
    HistoryValue hv;
    hv.node_id = node_id;
    hv.output = output;
    if (!value_freed(v)) {
        hv.value = v;
        hold(v);
    }
    return hv;
}

HistoryValue value_of_tensor(const Tensor& t) {
    if (!t.defined()) return HistoryValue();
    return value_of(t.value(), t.id(), t.output);
}

}  // namespace

// ============================================================================================
// [SECTION] recording

namespace {

// HOOK_AFTER of a forward node, or HOOK_GROUP_DONE: a new event holding the values it shows.
void record_event(Node* node, HookEvent event) {
    if (h.paused || h.budget == 0) return;
    bool group = event == HOOK_GROUP_DONE;
    if (!group && (event != HOOK_AFTER || node->phase != PHASE_FORWARD)) return;   // a backward group's own ops: its group is the event
    const BackwardPass* pass = group ? engine_backward_pass() : nullptr;
    if (group && (!pass || pass->group.node != node)) return;
    HistoryEvent e;
    e.serial = h.next_serial++;
    e.node_id = node->id;
    e.op = node->name();
    e.phase = group ? PHASE_BACKWARD : node->phase;
    e.group = group;
    e.where = node->where;
    e.newest_id = tape_next_id() - 1;
    e.pass = pass ? pass->serial : 0;
    e.n_inputs = static_cast<uint16_t>(node->inputs.size());
    e.n_outputs = static_cast<uint16_t>(node->outputs.size());
    e.n_grad_outputs = group ? e.n_outputs : 0;
    e.n_grad_inputs = group ? e.n_inputs : 0;
    e.values.reserve(static_cast<size_t>(e.n_inputs + e.n_outputs + e.n_grad_outputs + e.n_grad_inputs));
    for (const Edge& in : node->inputs) e.values.push_back(value_of(in.value(), in.id, in.output));
    for (int i = 0; i < node->outputs.size(); ++i) e.values.push_back(value_of(node->outputs[i].value, node->id, i));
    if (group) {
        for (int i = 0; i < node->outputs.size(); ++i) e.values.push_back(value_of_tensor(pass->group.grad_outputs[i]));
        for (int i = 0; i < node->inputs.size(); ++i) e.values.push_back(value_of_tensor(pass->group.grad_inputs[i]));
    }
    h.event_bytes += event_charge(e);
    h.events.push_back(std::move(e));
    ++h.with_values;
    trim();
}

void copy_before_write(Storage* storage);

void on_engine_event(Node* node, HookEvent event, void*) {
    if (event == HOOK_BEFORE_WRITE) copy_before_write(engine_storage_to_write());
    else record_event(node, event);
}

}  // namespace

void history_note_group_edited(const Node* node) {
    const BackwardPass* pass = engine_backward_pass();
    if (h.events.empty() || h.with_values == 0 || !pass || pass->group.node != node) return;
    HistoryEvent& e = h.events.back();
    if (!e.group || e.node_id != node->id) return;
    size_t first = static_cast<size_t>(e.n_inputs + e.n_outputs + e.n_grad_outputs);
    for (int i = 0; i < e.n_grad_inputs && first + i < e.values.size(); ++i) {
        HistoryValue& slot = e.values[first + static_cast<size_t>(i)];
        let_go(slot);
        slot = value_of_tensor(pass->group.grad_inputs[i]);
    }
    trim();
}

// ============================================================================================
// [SECTION] writes

namespace {

// A storage is about to be written: when an event holds it, its bytes as they are now are kept
// (once per event interval), for history_value_as_of.
void copy_before_write(Storage* storage) {
    if (!storage || storage->history_refs == 0 || h.with_values == 0) return;
    uint64_t after = h.next_serial - 1;   // the write comes after this event (and before the next)
    StorageCopies& entry = h.copied[storage];
    if (!storage->history_copied) {
        entry.serial = storage->serial;
        storage->history_copied = true;
    }
    std::vector<StorageCopy>& copies = entry.copies;
    if (!copies.empty() && copies.back().after_serial == after) return;   // already copied since that event
    Ref<Storage> copy = Ref<Storage>::adopt(storage_new(storage->bytes, storage->device));
    if (storage->device == DEVICE_CPU) {
        memcpy(copy->data, storage->data, storage->bytes);
    } else {   // the device's own copy, over the storage's bytes as int64 elements (sizes are multiples of 64)
        Value from, to;
        from.shape.ndim = 1;
        from.shape.dims[0] = static_cast<int64_t>(storage->bytes / 8);
        from.dtype = DTYPE_I64;
        to = from;
        from.storage = Ref<Storage>(storage);
        to.storage = copy;
        value_copy_elements(to, from);
    }
    h.copy_bytes += storage_charge(copy.get());
    copies.push_back({after, copy});
    h.copy_order.push_back({after, storage, storage->serial});
    trim();
}

}  // namespace

Value history_value_as_of(const Value& v, uint64_t serial) {
    Storage* s = v.storage.get();
    if (!s || !s->history_copied) return v;
    auto it = h.copied.find(s);
    if (it == h.copied.end()) return v;
    for (const StorageCopy& c : it->second.copies) {
        if (c.after_serial < serial) continue;
        Value old = v;
        old.storage = c.copy;
        return old;
    }
    return v;
}

// ============================================================================================
// [SECTION] api

void history_clear() {
    while (h.with_values > 0) drop_oldest_values();
    h.events.clear();
    h.event_bytes = 0;
    h.copy_order.clear();
    subscribe_wanted_events();
}

void history_set_budget(size_t bytes) {
    h.budget = bytes;
    if (bytes == 0) history_clear();
    else trim();
    subscribe_wanted_events();
}

size_t history_budget() { return h.budget; }

bool history_recording() { return engine_values_watched() && h.budget > 0 && h.paused == 0; }

void history_pause() {
    if (h.paused++ == 0) subscribe_wanted_events();
}

void history_resume() {
    if (h.paused > 0 && --h.paused == 0) subscribe_wanted_events();
}

size_t history_bytes_held() { return charged_bytes(); }
size_t history_copy_bytes() { return h.copy_bytes; }
size_t history_events_listed() { return h.events.size(); }
size_t history_events_with_values() { return h.with_values; }
uint64_t history_newest_serial() { return h.events.empty() ? 0 : h.events.back().serial; }
uint64_t history_oldest_serial() { return h.events.empty() ? 0 : h.events.front().serial; }
uint64_t history_oldest_kept_serial() { return oldest_kept(); }

const HistoryEvent* history_event(uint64_t serial) {
    if (h.events.empty() || serial < h.events.front().serial || serial > h.events.back().serial) return nullptr;
    return &h.events[static_cast<size_t>(serial - h.events.front().serial)];
}

bool history_parse_bytes(const std::string& text, size_t* bytes, std::string* why) {
    std::string t;
    for (char c : text)
        if (!isspace(static_cast<unsigned char>(c))) t += static_cast<char>(tolower(static_cast<unsigned char>(c)));
    if (t == "off") {
        *bytes = 0;
        return true;
    }
    char* end = nullptr;
    double x = strtod(t.c_str(), &end);
    if (end == t.c_str() || !(x >= 0) || x > 1e15) return false;
    std::string unit(end);
    double scale = 0;
    if (unit.empty() || unit == "b" || unit == "bytes") scale = 1;
    else if (unit == "k" || unit == "kb") scale = 1024.0;
    else if (unit == "m" || unit == "mb") scale = 1024.0 * 1024;
    else if (unit == "g" || unit == "gb") scale = 1024.0 * 1024 * 1024;
    else return false;
    if (x * scale > static_cast<double>(HISTORY_MAX_BUDGET)) {   // also before the cast to size_t overflows
        if (why) *why = "'" + text + "' is more than a budget can be (at most " + history_bytes_text(HISTORY_MAX_BUDGET) + ")";
        return false;
    }
    *bytes = static_cast<size_t>(x * scale);
    return true;
}

std::string history_bytes_text(size_t bytes) {
    char buffer[32];
    double x = static_cast<double>(bytes);
    if (bytes >= (1ull << 30)) snprintf(buffer, sizeof buffer, "%.4g GB", x / (1ull << 30));
    else if (bytes >= (1ull << 20)) snprintf(buffer, sizeof buffer, "%.4g MB", x / (1ull << 20));
    else if (bytes >= 1024) snprintf(buffer, sizeof buffer, "%.4g KB", x / 1024);
    else snprintf(buffer, sizeof buffer, "%zu bytes", bytes);
    return buffer;
}

}  // namespace td
