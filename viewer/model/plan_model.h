// plan_model.h: the viewer's pass-by-pass mode (`:plan f --passes --view`, viewer.show_plan(f);
// docs/freeze.md, "Pass by pass"), with no GL in it.
//
// A frozen function's recorded graph becomes node records (model.h), one per recorded step and
// one per tensor from outside (argument, parameter), laid out once like any tape. Each pass stage
// -- recorded, dce, cse, fold, fuse, inplace, reuse -- is a list of marks over those records
// (dropped, merged into another, folded, in a fused group, written in place, its buffer), made
// from the compiler's log (engine/freeze/plan_log.h). Stepping through the stages changes how boxes are
// drawn, never the boxes: the student sees the same picture change.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model.h"

namespace td {

struct Plan;
struct PlanPassLog;

enum PlanBoxState : uint8_t {
    PLAN_KEPT,      // still a step
    PLAN_DROPPED,   // dce: nothing needed it
    PLAN_MERGED,    // cse: it reuses `merged_into`'s result
    PLAN_FOLDED,    // fold: run at compile time, a constant now
};

// What one stage shows of one record. Marks carry on to later stages (a dropped step stays
// dropped); `note` is the latest pass's word on it.
struct PlanBoxMark {
    PlanBoxState state = PLAN_KEPT;
    int64_t merged_into = 0;   // PLAN_MERGED: the record whose result it reuses
    int fused = -1;            // the fused group it is in (index into PlanModel::fused), -1: none
    int buffer = -1;           // reuse: the plan buffer its result lives in, -1: none (shown)
    bool in_place = false;     // inplace: writes into memory that is there already
    std::string note;          // one line under the box: "dropped: nothing reads it", "buf0"
};

constexpr int PLAN_STAGES = 7;   // recorded, then one per pass (plan_log.h's order)
// The most recorded steps the view takes (viewer.show_plan refuses more): its marks are 7 per
// record, and the Graph window shows at most its node cap of them around the selection anyway.
constexpr size_t PLAN_VIEW_MAX_STEPS = 20000;

struct PlanModel {
    std::string name;                          // the frozen function's
    std::vector<NodeRecord> records;           // by id: recorded node ids, and synthetic ids (below)
    std::vector<PlanBoxMark> marks[PLAN_STAGES];   // per stage, per record (same index)
    std::vector<std::vector<int64_t>> fused;   // per fused group: its records, in order
    std::vector<size_t> buffer_bytes;          // per plan buffer
    std::string summary[PLAN_STAGES];          // "cse: 2 steps reuse an earlier step's result"
    size_t recorded_steps = 0, steps = 0;
};

// Records that stand for no node (a .grad accumulation, a guard, a .grad read) have ids from
// here on: after every node id, so they sort last and never name a live node.
constexpr int64_t PLAN_SYNTHETIC_ID = int64_t(1) << 40;

const char* plan_stage_name(int stage);            // "recorded", "dce", ... "reuse"
int plan_stage_find(const std::string& name);      // -1 when no stage has the name

// The model of `plan` (compiled, with its recording) and the log its compile wrote. O(steps).
std::shared_ptr<PlanModel> plan_model_build(const Plan& plan, const PlanPassLog& log);

// The mark of node `id` at `stage`, or null when it is not one of the plan's records.
const PlanBoxMark* plan_mark_of(const PlanModel& model, int stage, int64_t id);

// After view_build on the model's records: titles of synthetic records (their op, no id), and
// every node box made wide and tall enough for the widest note of any stage, so that the layout,
// made once, holds every stage.
void plan_view_decorate(GraphView& view, const PlanModel& model, const TextMeasure& measure);

// One colour per buffer (0xAABBGGRR), light enough to read labels on.
uint32_t plan_buffer_colour(int buffer);

}  // namespace td
