// training_log.h: training over time: named series of numbers a script logs per step
// (`viewer.log(name, value)`, and the optimizers' step() automatically), for the Training window
// and `:plot` (plot_render.h). No GL, no window: built into every tapedeck.
//
// Two kinds of series, one name space:
//   scalar     (step, value) points: the loss, `grad_norm/<param>`, `update_ratio/<param>`, anything
//              a script logs as a number or a 1-element tensor;
//   histogram  per logged step, TRAINING_BINS counts over the tensor's [min, max] (its finite
//              values), for `viewer.log(name, tensor)`; its norm goes into the scalar `<name>/norm`.
//
// Memory is bounded (rule 11 of docs/design.md): a scalar series keeps at most TRAINING_MAX_POINTS points.
// When full it halves its resolution: neighbouring points are averaged in pairs (their steps and
// their values), and from then on each new point is the mean of 2 (then 4, 8, ...) logged values
// in a row. A histogram series keeps at most TRAINING_MAX_HISTOGRAMS steps; when full, every other
// one is dropped and then only one logged histogram in 2 (4, ...) is kept. A 10,000-step run and a
// 1,000,000-step run hold the same amount.
//
// The step: the number of optimizer steps made so far (every optimizer's step() counts), unless
// the caller gives one. So a loss logged in the loop before opt:step() and the gradient norms that
// step() logs land on the same step: the state of the weights after that many updates.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tensor.h"

namespace td {

constexpr size_t TRAINING_MAX_POINTS = 2048;      // per scalar series
constexpr size_t TRAINING_MAX_HISTOGRAMS = 256;   // per histogram series
constexpr int TRAINING_BINS = 48;                 // bins of one logged histogram

struct ScalarSeries {
    std::vector<double> steps, values;   // points, oldest first
    int64_t per_point = 1;               // logged values averaged into one point (1, 2, 4, ...)
    double pending_step = 0, pending_sum = 0;   // the point being filled (when per_point > 1)
    int64_t pending_count = 0;
    int64_t logged = 0;                  // values logged in all
    double last = 0;                     // the latest logged value
    double last_step = -1;
};

struct HistogramStep {
    double step = 0;
    double lo = 0, hi = 0;               // the range of the bins (the finite values' min and max)
    std::vector<float> counts;           // TRAINING_BINS
    int64_t nonfinite = 0;               // NaN and infinities, not in the bins
};

struct HistogramSeries {
    std::vector<HistogramStep> steps;    // oldest first
    int64_t keep_every = 1;              // keep one logged histogram in this many
    int64_t logged = 0;
};

struct TrainingLog {
    std::map<std::string, ScalarSeries> scalars;
    std::map<std::string, HistogramSeries> histograms;
    int64_t optimizer_steps = 0;         // step() calls so far: the default step of a logged value
    uint64_t version = 0;                // bumped by every change (the Training window redraws)
    // Whether optimizers' step() logs gradient norms, update ratios and the loss: ALWAYS, NEVER, or
    // WHEN_WATCHED (the default): while someone looks (engine_steps_watched(): the REPL or -i, the
    // viewer, a breakpoint) or once the script logged something itself (viewer.log). A script run on
    // its own (the bench) pays nothing, as with the fused LSTM.
    enum Automatic { AUTOMATIC_WHEN_WATCHED, AUTOMATIC_ALWAYS, AUTOMATIC_NEVER };
    Automatic automatic = AUTOMATIC_WHEN_WATCHED;
    bool script_logged = false;          // viewer.log was called
    std::vector<std::string> parameters; // parameter names in the order step() logged them first
    // The host copies of the parameters made by training_step_begin, until training_step_end.
    std::vector<Value> params_before;
    uint64_t loss_count_seen = 0;        // engine_last_loss's count at the latest logged loss
    // The `loss` of a loop with no optimizer (a hand-written update, p:sub_(lr * p.grad)): until an
    // optimizer's step() has counted a step, every backward() from a loss logs it (HOOK_LOSS), at
    // step 0, 1, 2, ... (the losses so logged); from then on step() logs it, as above.
    int loss_observer = 0;               // the engine_observe handle (0: not yet subscribed)
    int64_t backward_losses = 0;         // losses logged at backward()
    bool loss_from_backward = false;     // series `loss` holds only points logged at backward()
    bool script_logged_loss = false;     // viewer.log("loss", ...) was called: the script's own wins
};

TrainingLog& training_log();
// Whether the optimizers' step() logs now (TrainingLog::automatic).
bool training_logs_steps();

// Add a value to scalar series `name` at `step` (< 0: the optimizer steps so far).
void training_log_scalar(const std::string& name, double value, double step = -1);
// Add a histogram of `value` (any device, dtype, shape) to histogram series `name`, and its norm to
// scalar series `<name>/norm`, at `step` (< 0: the optimizer steps so far).
void training_log_tensor(const std::string& name, const Value& value, double step = -1);
// Forget every series and set the step counter to 0.
void training_log_clear();
// Subscribe to the engine's HOOK_LOSS (once): a backward() from a loss logs `loss` while no
// optimizer has stepped and the script logs no `loss` itself (TrainingLog::backward_losses).
void training_follow_losses();
// The script logs `loss` itself (viewer.log("loss", ...)): points logged at backward() go, and no more come.
void training_note_script_loss();
// Whether `name` is a scalar series, a histogram series, or the prefix of scalar series
// (`grad_norm` for `grad_norm/fc1.weight`, ...): the names `:plot` takes.
bool training_is_scalar(const std::string& name);
bool training_is_histogram(const std::string& name);
std::vector<std::string> training_family(const std::string& prefix);   // series named prefix/...
// The names there are, for listings and errors: scalar series (families folded into `prefix/*`
// once they hold more than one) and histogram series (`hist NAME`).
std::string training_series_listing();

// ---------------------------------------------------------------------------------------------
// The optimizers' automatic logging (optim.lua's step()).
//
// step_begin(params) copies each parameter's values (on the host; the copy lives until step_end);
// step_end(params, names) logs, for parameter i, `grad_norm/<names[i]>` (‖grad‖, from the gradient
// step() used) and `update_ratio/<names[i]>` (‖w_after − w_before‖ / ‖w_before‖), then the latest
// backward pass's loss (`loss`, unless the script logged a `loss` at this step), and counts the
// step. Parameters without a gradient are skipped (step() skips them too).
void training_step_begin(const std::vector<Value>& params);
void training_step_end(const std::vector<Value>& params, const std::vector<Value>& grads,
                       const std::vector<std::string>& names);

// ‖v‖ (the 2-norm, in double; NaN when an element is NaN, as torch.norm) and ‖a − b‖ (same shape),
// read on the host.
double training_norm(const Value& v);
double training_diff_norm(const Value& a, const Value& b);

}  // namespace td
