// plan_model.cpp: the recorded graph of a frozen function as node records, and what each pass
// stage marks on them (plan_model.h).
//
// [SECTION] records   the recording's steps and outside values as node records
// [SECTION] marks     each pass stage's marks on them; plan_model_build
// [SECTION] view      a stage's marks as the window shows them (plan_mark_of, plan_view_decorate, colours)
#include "plan_model.h"

#include <algorithm>
#include <unordered_map>

#include "plan.h"
#include "plan_log.h"

namespace td {

namespace {

const char* const STAGE_NAMES[PLAN_STAGES] = {"recorded", "dce", "cse", "fold", "fuse", "inplace", "reuse"};

// Where each of the log's steps is among the records: kernel steps by their node, the others
// (no node of their own) by kind, node and target.
struct StepIndex {
    std::unordered_map<int64_t, int64_t> by_node;      // kernel step's node -> record id
    std::unordered_map<std::string, int64_t> other;    // "kind:node:target" -> record id
    static std::string key(const PlanLogStep& s) {
        return std::to_string(s.kind) + ":" + std::to_string(s.node) + ":" + std::to_string(s.target);
    }
    int64_t find(const PlanLogStep& s) const {
        if (s.kind == STEP_KERNEL || s.kind == STEP_FUSED) {
            auto it = by_node.find(s.node);
            return it == by_node.end() ? 0 : it->second;
        }
        auto it = other.find(key(s));
        return it == other.end() ? 0 : it->second;
    }
};

std::string shape_text(const Plan& plan, const ValueIds& outputs) {
    std::string shape;
    for (int v : outputs) shape += (shape.empty() ? "" : " ") + plan.values[v].shape.str();
    return shape;
}

}  // namespace

const char* plan_stage_name(int stage) { return stage >= 0 && stage < PLAN_STAGES ? STAGE_NAMES[stage] : "?"; }

int plan_stage_find(const std::string& name) {
    for (int s = 0; s < PLAN_STAGES; ++s)
        if (name == STAGE_NAMES[s]) return s;
    return -1;
}

// ============================================================================================
// [SECTION] records

namespace {

// The records of a recording being made: the recording, the records so far, which record made
// each value, where each log step is, and the next synthetic id (for what has no node).
struct PlanRecords {
    const Plan& rec;
    std::vector<NodeRecord>& records;
    std::vector<int64_t> record_of_value;
    StepIndex index;
    int64_t synthetic = PLAN_SYNTHETIC_ID;
};

// The steps, in record order: a node's id where it has one, else a synthetic id. Notes which
// record makes each value.
std::vector<int64_t> plan_step_ids(PlanRecords& b, const BigVector<PlanStep>& steps) {
    std::vector<int64_t> step_id(steps.size(), 0);
    for (size_t k = 0; k < steps.size(); ++k) {
        const PlanStep& s = steps[k];
        PlanLogStep ls = plan_log_step(s);
        int64_t id = 0;
        if (s.kind == STEP_KERNEL && s.recorded_id > 0 && !b.index.by_node.count(s.recorded_id)) {
            id = s.recorded_id;
            b.index.by_node[id] = id;
        } else {
            id = b.synthetic++;
            b.index.other.emplace(StepIndex::key(ls), id);
        }
        step_id[k] = id;
        for (int v : s.outputs)
            if (!b.record_of_value[v]) b.record_of_value[v] = id;
    }
    return step_id;
}

// The record of value v as `reader` reads it (0: none). Tensors from outside that the steps read
// get one record each, made here (a constant read by the step that copies it in is that step's
// own data: no record).
int64_t plan_value_record(PlanRecords& b, int v, const PlanStep& reader) {
    const Plan& rec = b.rec;
    if (b.record_of_value[v]) return b.record_of_value[v];
    const PlanValue& pv = rec.values[v];
    if (pv.kind == VALUE_STEP) return 0;
    if (pv.kind == VALUE_CONSTANT && reader.kind == STEP_KERNEL && reader.op == OP_clone && reader.recorded_id == pv.recorded_id)
        return 0;
    NodeRecord r;
    bool is_node = (pv.kind == VALUE_INPUT || pv.kind == VALUE_CAPTURED) && pv.recorded_id > 0 &&
                   !b.index.by_node.count(pv.recorded_id);
    r.id = is_node ? pv.recorded_id : b.synthetic++;
    if (is_node) b.index.by_node[r.id] = r.id;
    std::string name = plan_value_name(rec, v);
    r.op = pv.kind == VALUE_INPUT ? "argument" : pv.kind == VALUE_CAPTURED ? "captured" : name;
    r.name = name;
    r.shape = pv.shape.str();
    r.dtype = dtype_name(pv.dtype);
    r.is_leaf = true;
    if (pv.kind == VALUE_INPUT) r.requires_grad = rec.inputs[pv.index].requires_grad;
    if (pv.kind == VALUE_CAPTURED) {
        const Tensor& t = rec.captured[pv.index].tensor;
        r.requires_grad = t.defined() && t.requires_grad();
    }
    b.records.push_back(r);
    b.record_of_value[v] = r.id;
    return r.id;
}

// The record of step s (id `id`): its op as the step says it, shape, dtype, and the records of
// its inputs (made when they come from outside).
NodeRecord plan_step_record(PlanRecords& b, const PlanStep& s, int64_t id) {
    const Plan& rec = b.rec;
    NodeRecord r;
    r.id = id;
    r.phase = s.phase;
    r.group = s.recorded_group;
    r.where = s.where;
    switch (s.kind) {
        case STEP_KERNEL: {
            bool constant_copy = s.op == OP_clone && s.inputs.size() == 1 && rec.values[s.inputs[0]].kind == VALUE_CONSTANT;
            r.op = constant_copy ? "tensor" : op_info(s.op).name;
            std::string attrs = op_describe_attrs(s.op, plan_step_attrs(rec, s));
            if (!attrs.empty() && !constant_copy) r.op += "(" + attrs + ")";
            r.is_inplace = (op_info(s.op).flags & OPF_INPLACE) != 0;
            break;
        }
        case STEP_GRAD_ACCUMULATE:
            r.op = plan_value_name(rec, rec.grad_targets[s.target].grad_value) + " +=";
            break;
        case STEP_GRAD_CLEAR: r.op = plan_value_name(rec, rec.grad_targets[s.target].grad_value) + " = nil"; break;
        case STEP_GUARD: r.op = "guard " + std::to_string(s.target + 1); break;
        default: r.op = "step"; break;
    }
    r.shape = shape_text(rec, s.outputs);
    if (!s.outputs.empty()) r.dtype = dtype_name(rec.values[s.outputs[0]].dtype);
    for (int v : s.inputs) {
        int64_t from = plan_value_record(b, v, s);
        if (from) r.inputs.push_back(from);
    }
    return r;
}

// The index of record `id` among the sorted records, -1 when there is none.
int record_index(const std::vector<NodeRecord>& records, int64_t id) {
    auto it = std::lower_bound(records.begin(), records.end(), id, [](const NodeRecord& r, int64_t i) { return r.id < i; });
    return it != records.end() && it->id == id ? static_cast<int>(it - records.begin()) : -1;
}

// ============================================================================================
// [SECTION] marks

// One log entry of pass `pass` marked on the stage's boxes (`mark` finds a step's box).
template <class MarkOf>
void plan_entry_mark(PlanModel& m, const Plan& plan, const PlanRecords& b, int pass, const PlanLogEntry& e,
                     std::vector<PlanBoxMark>& marks, MarkOf mark) {
    switch (pass) {
        case LOG_CSE:
            if (PlanBoxMark* box = mark(e.step)) {
                box->state = PLAN_MERGED;
                box->merged_into = b.index.find(e.other);
                box->note = "= #" + std::to_string(e.other.node) + "'s result";
            }
            break;
        case LOG_FOLD:
            if (PlanBoxMark* box = mark(e.step)) {
                box->state = PLAN_FOLDED;
                box->note = "folded: a constant";
            }
            break;
        case LOG_FUSE: {
            int group = static_cast<int>(m.fused.size());
            m.fused.emplace_back();
            for (const PlanLogStep& op : e.ops) {
                int64_t id = b.index.find(op);
                if (!id) continue;
                m.fused.back().push_back(id);
                if (PlanBoxMark* box = mark(op)) {
                    box->fused = group;
                    box->note = "fused loop " + std::to_string(group + 1);
                }
            }
            break;
        }
        case LOG_INPLACE: {
            PlanBoxMark* box = mark(e.step);
            if (!box) break;
            box->in_place = true;
            std::string into = plan_value_name(plan, e.value);
            box->note = e.reason == LOG_INTO_GRAD ? "writes into " + into
                        : e.reason == LOG_INTO_SUM ? "adds into " + into
                                                   : "writes over " + into;
            break;
        }
        case LOG_REUSE:
            for (int v : e.values) {
                int i = v < static_cast<int>(b.record_of_value.size()) ? record_index(b.records, b.record_of_value[v]) : -1;
                if (i < 0) continue;
                marks[static_cast<size_t>(i)].buffer = e.buffer;
                marks[static_cast<size_t>(i)].note = "buf" + std::to_string(e.buffer);
            }
            break;
        default: break;
    }
}

// Stage `stage`'s marks: the stage before's, plus its pass's decisions (stage k shows pass k - 1,
// plan_log.h's order), and its summary line.
void plan_stage_marks(PlanModel& m, const Plan& plan, const PlanPassLog& log, const PlanRecords& b, int stage) {
    int pass = stage - 1;
    std::vector<PlanBoxMark>& marks = m.marks[stage];
    marks = m.marks[stage - 1];
    m.summary[stage] = std::string(plan_log_pass_name(pass)) + ": " + (log.ran[pass] ? plan_log_heading(log, pass) : "off");
    auto mark = [&](const PlanLogStep& s) -> PlanBoxMark* {
        int i = record_index(b.records, b.index.find(s));
        return i >= 0 ? &marks[static_cast<size_t>(i)] : nullptr;
    };
    if (pass == LOG_DCE || pass == LOG_FOLD) {   // the second dce sweep shows with fold
        for (const PlanLogEntry& e : log.passes[LOG_DCE]) {
            if ((e.reason == LOG_DEAD_AFTER) != (pass == LOG_FOLD)) continue;
            if (PlanBoxMark* box = mark(e.step)) {
                box->state = PLAN_DROPPED;
                box->note = pass == LOG_DCE ? "dropped: nothing reads it" : "dropped: its readers went";
            }
        }
    }
    for (const PlanLogEntry& e : log.passes[pass]) plan_entry_mark(m, plan, b, pass, e, marks, mark);
}

}  // namespace

std::shared_ptr<PlanModel> plan_model_build(const Plan& plan, const PlanPassLog& log) {
    auto model = std::make_shared<PlanModel>();
    PlanModel& m = *model;
    m.name = plan.name;
    m.recorded_steps = log.recorded_steps;
    m.steps = log.steps;
    const Plan& rec = plan.recording ? *plan.recording : plan;
    BigVector<PlanStep> steps = plan_unpacked_steps(rec);
    PlanRecords b{rec, m.records, std::vector<int64_t>(rec.values.size(), 0), StepIndex(), PLAN_SYNTHETIC_ID};

    std::vector<int64_t> step_id = plan_step_ids(b, steps);
    for (size_t k = 0; k < steps.size(); ++k) {
        NodeRecord r = plan_step_record(b, steps[k], step_id[k]);
        m.records.push_back(r);
    }
    std::sort(m.records.begin(), m.records.end(), [](const NodeRecord& x, const NodeRecord& y) { return x.id < y.id; });

    // The stages: each starts from the one before and adds its pass's decisions.
    m.marks[0].assign(m.records.size(), PlanBoxMark());
    m.summary[0] = "the recorded graph: " + std::to_string(log.recorded_steps) + " steps";
    for (int stage = 1; stage < PLAN_STAGES; ++stage) plan_stage_marks(m, plan, log, b, stage);
    for (const PlanLogEntry& e : log.passes[LOG_REUSE]) {
        if (m.buffer_bytes.size() <= static_cast<size_t>(e.buffer)) m.buffer_bytes.resize(static_cast<size_t>(e.buffer) + 1);
        m.buffer_bytes[static_cast<size_t>(e.buffer)] = e.bytes;
    }
    return model;
}

// ============================================================================================
// [SECTION] view

const PlanBoxMark* plan_mark_of(const PlanModel& model, int stage, int64_t id) {
    if (stage < 0 || stage >= PLAN_STAGES) return nullptr;
    const std::vector<NodeRecord>& records = model.records;
    auto it = std::lower_bound(records.begin(), records.end(), id, [](const NodeRecord& r, int64_t i) { return r.id < i; });
    if (it == records.end() || it->id != id) return nullptr;
    return &model.marks[stage][static_cast<size_t>(it - records.begin())];
}

void plan_view_decorate(GraphView& view, const PlanModel& model, const TextMeasure& measure) {
    const float PAD_X = 8.0f;   // model.cpp's BOX_PAD_X
    for (ViewBox& b : view.boxes) {
        if (b.kind != BOX_NODE && b.kind != BOX_GHOST) continue;
        const NodeRecord* r = record_find(model.records, b.node_id);
        if (!r) continue;
        float w, h;
        if (r->id >= PLAN_SYNTHETIC_ID) {   // no node: its op says what it is
            b.title = r->op;
            measure(b.title, &w, &h);
            b.width = std::max(b.width, w + 2 * PAD_X);
        }
        if (b.kind != BOX_NODE) continue;
        float widest = 0;
        for (int stage = 0; stage < PLAN_STAGES; ++stage) {
            const PlanBoxMark* mark = plan_mark_of(model, stage, b.node_id);
            if (!mark || mark->note.empty()) continue;
            measure(mark->note, &w, &h);
            widest = std::max(widest, w);
        }
        measure("#", &w, &h);
        b.height += h;   // a line for the notes, in every stage
        b.width = std::max(b.width, widest + 2 * PAD_X);
    }
}

uint32_t plan_buffer_colour(int buffer) {
    // Light, distinct fills (0xAABBGGRR), labels stay readable on them.
    // green, blue, yellow, lavender, cyan, pink, olive, magenta, grey-blue, orange
    static const uint32_t palette[] = {0xFFB4E6B4u, 0xFFF0C8A0u, 0xFF8CE6E6u, 0xFFF0B4D2u, 0xFFE6E68Cu,
                                       0xFFC8C8FFu, 0xFFA0DCC8u, 0xFFDCA0DCu, 0xFFE6D2C8u, 0xFF78C8FFu};
    const int n = static_cast<int>(sizeof palette / sizeof palette[0]);
    return buffer < 0 ? 0xFFFFFFFFu : palette[buffer % n];
}

}  // namespace td
