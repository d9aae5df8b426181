// plan_pack.cpp: a recording's steps packed into bytes and back (PackedSteps, plan.h).
//
// A step is written as: a byte of kind, phase and which optional fields follow; op and attribute
// index as varints; the optional target and into_grad; the input and output value ids, each as
// the zigzag varint of its difference from the id written before it; the source line as
// differences from the step before; the recorded id as a difference from the step before's, and
// the recorded group (backward steps) as a difference from the recorded id. A loop's steps read
// values made a few steps earlier, on lines a few lines apart: most fields take one byte.
// A backward group (PlanGroup) is written the same way: its recorded id, line and end step as
// differences from the group before's, its root and gradients as value ids (-1 as 0, an id as its
// difference plus 1).
#include "plan.h"

#include "tape.h"

namespace td {

namespace {

enum PackFlag : uint8_t {
    PACK_PHASE_BACKWARD = 1 << 3,   // bits 0-2: the StepKind
    PACK_HAS_TARGET = 1 << 4,
    PACK_HAS_INTO_GRAD = 1 << 5,
    PACK_HAS_GROUP = 1 << 6,
};

uint64_t zigzag(int64_t x) { return (static_cast<uint64_t>(x) << 1) ^ static_cast<uint64_t>(x >> 63); }
int64_t unzigzag(uint64_t x) { return static_cast<int64_t>(x >> 1) ^ -static_cast<int64_t>(x & 1); }

void put_varint(BigVector<uint8_t>& out, uint64_t x) {
    while (x >= 0x80) {
        out.push_back(static_cast<uint8_t>(x | 0x80));
        x >>= 7;
    }
    out.push_back(static_cast<uint8_t>(x));
}

void put_signed(BigVector<uint8_t>& out, int64_t x) { put_varint(out, zigzag(x)); }

// Reads what put_* wrote. The bytes are the engine's own (never a file): a read past the end is
// a bug, and fails loudly.
struct PackReader {
    const uint8_t* at;
    const uint8_t* end;
    uint64_t varint() {
        uint64_t x = 0;
        for (int shift = 0;; shift += 7) {
            if (at == end || shift > 63) engine_fail("freeze: packed steps end mid-step (an engine bug)");
            uint8_t b = *at++;
            x |= static_cast<uint64_t>(b & 0x7f) << shift;
            if (!(b & 0x80)) return x;
        }
    }
    int64_t signed_varint() { return unzigzag(varint()); }
};

// The differences' bases, as they are after each step (PackedSteps keeps the packer's).
struct PackBases {
    int value = 0, file = 0, line = 0;
    int64_t recorded_id = 0;
};

void put_ids(BigVector<uint8_t>& out, const ValueIds& ids, PackBases& bases) {
    put_varint(out, ids.size());
    for (int v : ids) {
        put_signed(out, static_cast<int64_t>(v) - bases.value);
        bases.value = v;
    }
}

void read_ids(PackReader& in, ValueIds& ids, PackBases& bases) {
    size_t n = static_cast<size_t>(in.varint());
    ids.clear();
    ids.reserve(n);
    for (size_t i = 0; i < n; ++i) {
        bases.value = static_cast<int>(bases.value + in.signed_varint());
        ids.push_back(bases.value);
    }
}

void put_step(BigVector<uint8_t>& out, const PlanStep& s, PackBases& bases) {
    if (!s.fused.empty()) engine_fail("freeze: a fused step cannot be packed (only a recording's steps are)");
    uint8_t head = static_cast<uint8_t>(s.kind);
    if (s.phase == PHASE_BACKWARD) head |= PACK_PHASE_BACKWARD;
    if (s.target != -1) head |= PACK_HAS_TARGET;
    if (s.into_grad != -1) head |= PACK_HAS_INTO_GRAD;
    if (s.recorded_group != 0) head |= PACK_HAS_GROUP;
    out.push_back(head);
    put_varint(out, s.op);
    put_varint(out, static_cast<uint64_t>(s.attrs));
    if (head & PACK_HAS_TARGET) put_signed(out, s.target);
    if (head & PACK_HAS_INTO_GRAD) put_signed(out, s.into_grad);
    put_ids(out, s.inputs, bases);
    put_ids(out, s.outputs, bases);
    put_signed(out, static_cast<int64_t>(s.where.file) - bases.file);
    put_signed(out, static_cast<int64_t>(s.where.line) - bases.line);
    bases.file = s.where.file;
    bases.line = s.where.line;
    put_signed(out, s.recorded_id - bases.recorded_id);
    bases.recorded_id = s.recorded_id;
    if (head & PACK_HAS_GROUP) put_signed(out, s.recorded_group - s.recorded_id);
}

void read_step(PackReader& in, PlanStep& s, PackBases& bases) {
    if (in.at == in.end) engine_fail("freeze: packed steps end mid-step (an engine bug)");
    uint8_t head = *in.at++;
    s.kind = static_cast<StepKind>(head & 7);
    s.phase = (head & PACK_PHASE_BACKWARD) ? PHASE_BACKWARD : PHASE_FORWARD;
    s.op = static_cast<OpId>(in.varint());
    s.attrs = static_cast<int>(in.varint());
    s.target = (head & PACK_HAS_TARGET) ? static_cast<int>(in.signed_varint()) : -1;
    s.into_grad = (head & PACK_HAS_INTO_GRAD) ? static_cast<int>(in.signed_varint()) : -1;
    read_ids(in, s.inputs, bases);
    read_ids(in, s.outputs, bases);
    bases.file = static_cast<int>(bases.file + in.signed_varint());
    bases.line = static_cast<int>(bases.line + in.signed_varint());
    s.where = SourceLoc{bases.file, bases.line};
    bases.recorded_id += in.signed_varint();
    s.recorded_id = bases.recorded_id;
    s.recorded_group = (head & PACK_HAS_GROUP) ? s.recorded_id + in.signed_varint() : 0;
}

// A value id that may be -1 (no value).
void put_optional_id(BigVector<uint8_t>& out, int v, PackBases& bases) {
    if (v < 0) {
        put_varint(out, 0);
        return;
    }
    put_varint(out, zigzag(static_cast<int64_t>(v) - bases.value) + 1);
    bases.value = v;
}

int read_optional_id(PackReader& in, PackBases& bases) {
    uint64_t x = in.varint();
    if (x == 0) return -1;
    bases.value = static_cast<int>(bases.value + unzigzag(x - 1));
    return bases.value;
}

void put_group(BigVector<uint8_t>& out, const PlanGroup& g, PackBases& bases, int& last_step) {
    put_signed(out, g.recorded_id - bases.recorded_id);
    bases.recorded_id = g.recorded_id;
    put_signed(out, static_cast<int64_t>(g.where.file) - bases.file);
    put_signed(out, static_cast<int64_t>(g.where.line) - bases.line);
    bases.file = g.where.file;
    bases.line = g.where.line;
    put_signed(out, static_cast<int64_t>(g.before_step) - last_step);
    last_step = g.before_step;
    put_optional_id(out, g.root_value, bases);
    for (const ValueIds* ids : {&g.grad_outputs, &g.grad_inputs}) {
        put_varint(out, ids->size());
        for (int v : *ids) put_optional_id(out, v, bases);
    }
}

void read_group(PackReader& in, PlanGroup& g, PackBases& bases, int& last_step) {
    bases.recorded_id += in.signed_varint();
    g.recorded_id = bases.recorded_id;
    bases.file = static_cast<int>(bases.file + in.signed_varint());
    bases.line = static_cast<int>(bases.line + in.signed_varint());
    g.where = SourceLoc{bases.file, bases.line};
    last_step = static_cast<int>(last_step + in.signed_varint());
    g.before_step = last_step;
    g.root_value = read_optional_id(in, bases);
    for (ValueIds* ids : {&g.grad_outputs, &g.grad_inputs}) {
        size_t n = static_cast<size_t>(in.varint());
        ids->clear();
        ids->reserve(n);
        for (size_t i = 0; i < n; ++i) ids->push_back(read_optional_id(in, bases));
    }
}

PackBases bases_of(const PackedSteps& p) { return PackBases{p.last_value, p.last_file, p.last_line, p.last_recorded_id}; }

void keep_bases(PackedSteps& p, const PackBases& bases) {
    p.last_value = bases.value;
    p.last_file = bases.file;
    p.last_line = bases.line;
    p.last_recorded_id = bases.recorded_id;
}

}  // namespace

size_t plan_step_count(const Plan& plan) { return plan.packed.count + plan.steps.size(); }

void plan_visit_steps(const Plan& plan, const std::function<void(const PlanStep&)>& visit) {
    PackReader in{plan.packed.bytes.data(), plan.packed.bytes.data() + plan.packed.bytes.size()};
    PackBases bases;
    PlanStep s;
    for (size_t k = 0; k < plan.packed.count; ++k) {
        read_step(in, s, bases);
        visit(s);
    }
    for (const PlanStep& tail : plan.steps) visit(tail);
}

BigVector<PlanStep> plan_unpacked_steps(const Plan& plan) {
    BigVector<PlanStep> steps;
    steps.reserve(plan_step_count(plan));
    plan_visit_steps(plan, [&](const PlanStep& s) { steps.push_back(s); });
    return steps;
}

void plan_pack_steps(Plan& plan, size_t keep) {
    if (plan.steps.size() <= keep) return;
    size_t n = plan.steps.size() - keep;
    PackedSteps& p = plan.packed;
    PackBases bases = bases_of(p);
    for (size_t k = 0; k < n; ++k) put_step(p.bytes, plan.steps[k], bases);
    keep_bases(p, bases);
    p.count += n;
    plan.steps.erase(plan.steps.begin(), plan.steps.begin() + static_cast<std::ptrdiff_t>(n));
}

void plan_add_group(Plan& plan, const PlanGroup& group) {
    PackedSteps& p = plan.packed_groups;
    PackBases bases = bases_of(p);
    put_group(p.bytes, group, bases, p.last_step);
    keep_bases(p, bases);
    ++p.count;
}

int plan_last_group_end(const Plan& plan) {
    if (!plan.groups.empty()) return plan.groups.back().before_step;
    return plan.packed_groups.count ? plan.packed_groups.last_step : -1;
}

BigVector<PlanGroup> plan_unpacked_groups(const Plan& plan) {
    BigVector<PlanGroup> groups;
    groups.reserve(plan.packed_groups.count + plan.groups.size());
    const PackedSteps& p = plan.packed_groups;
    PackReader in{p.bytes.data(), p.bytes.data() + p.bytes.size()};
    PackBases bases;
    int last_step = 0;
    PlanGroup g;
    for (size_t k = 0; k < p.count; ++k) {
        read_group(in, g, bases, last_step);
        groups.push_back(g);
    }
    for (const PlanGroup& tail : plan.groups) groups.push_back(tail);
    return groups;
}

}  // namespace td
