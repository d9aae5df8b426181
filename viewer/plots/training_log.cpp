// training_log.cpp: the series behind the Training window and :plot (training_log.h): adding
// points with bounded memory, the optimizers' gradient norms and update ratios, and the listing.
#include "training_log.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>

#include "tape.h"
#include "tensor_stats.h"

namespace td {

namespace {

double step_or_now(double step) {
    return step >= 0 ? step : static_cast<double>(training_log().optimizer_steps);
}

// Halve a full scalar series: neighbouring points averaged in pairs (an odd last one stays).
void scalar_halve(ScalarSeries& s) {
    size_t n = s.values.size() / 2;
    for (size_t i = 0; i < n; ++i) {
        s.steps[i] = (s.steps[2 * i] + s.steps[2 * i + 1]) / 2;
        s.values[i] = (s.values[2 * i] + s.values[2 * i + 1]) / 2;
    }
    if (s.values.size() % 2) {
        s.steps[n] = s.steps.back();
        s.values[n] = s.values.back();
        ++n;
    }
    s.steps.resize(n);
    s.values.resize(n);
    s.per_point *= 2;
}

// Element i of a host value as a double (the common dtypes read directly).
struct HostReader {
    Value v;
    explicit HostReader(const Value& value) : v(value_contiguous(value_to_host(value))) {}
    int64_t size() const { return v.numel(); }
    double operator[](int64_t i) const {
        if (v.dtype == DTYPE_F32) return v.data<float>()[i];
        if (v.dtype == DTYPE_F64) return v.data<double>()[i];
        return value_get(v, i);
    }
};

}  // namespace

TrainingLog& training_log() {
    static TrainingLog* log = new TrainingLog();   // never destroyed: read until the process ends
    return *log;
}

bool training_logs_steps() {
    const TrainingLog& log = training_log();
    if (log.automatic != TrainingLog::AUTOMATIC_WHEN_WATCHED) return log.automatic == TrainingLog::AUTOMATIC_ALWAYS;
    return log.script_logged || engine_steps_watched();
}

void training_log_scalar(const std::string& name, double value, double step) {
    TrainingLog& log = training_log();
    ScalarSeries& s = log.scalars[name];
    step = step_or_now(step);
    ++s.logged;
    s.last = value;
    s.last_step = step;
    ++log.version;
    if (s.per_point == 1) {
        s.steps.push_back(step);
        s.values.push_back(value);
    } else {
        if (s.pending_count == 0) s.pending_step = 0;
        s.pending_step += step;
        s.pending_sum += value;
        if (++s.pending_count == s.per_point) {
            s.steps.push_back(s.pending_step / static_cast<double>(s.per_point));
            s.values.push_back(s.pending_sum / static_cast<double>(s.per_point));
            s.pending_sum = 0;
            s.pending_count = 0;
        }
    }
    if (s.values.size() >= TRAINING_MAX_POINTS) scalar_halve(s);
}

void training_log_tensor(const std::string& name, const Value& value, double step) {
    TrainingLog& log = training_log();
    step = step_or_now(step);
    TensorStats stats = tensor_stats(value, TRAINING_BINS);
    training_log_scalar(name + "/norm", stats.finite == stats.count ? stats.norm : std::nan(""), step);
    HistogramSeries& h = log.histograms[name];
    if (h.logged++ % h.keep_every != 0) return;
    HistogramStep entry;
    entry.step = step;
    entry.lo = stats.min;
    entry.hi = stats.max;
    entry.nonfinite = stats.count - stats.finite;
    entry.counts.assign(TRAINING_BINS, 0.0f);
    for (size_t b = 0; b < stats.histogram.size() && b < entry.counts.size(); ++b)
        entry.counts[b] = static_cast<float>(stats.histogram[b]);
    h.steps.push_back(std::move(entry));
    if (h.steps.size() >= TRAINING_MAX_HISTOGRAMS) {   // drop every other one
        size_t kept = 0;
        for (size_t i = 0; i < h.steps.size(); i += 2) h.steps[kept++] = std::move(h.steps[i]);
        h.steps.resize(kept);
        h.keep_every *= 2;
    }
}

void training_log_clear() {
    TrainingLog& log = training_log();
    log.scalars.clear();
    log.histograms.clear();
    log.parameters.clear();
    log.optimizer_steps = 0;
    log.backward_losses = 0;
    log.loss_from_backward = false;
    log.script_logged_loss = false;
    ++log.version;
}

namespace {

// The value of the latest loss (engine_last_loss): read at once on the CPU, else through its node
// while it lives. False when it cannot be read.
bool last_loss_value(double* value) {
    const LastLoss& loss = engine_last_loss();
    *value = loss.value;
    if (loss.node_id == 0) return true;
    Node* n = tape_find(loss.node_id);
    if (!n || loss.output >= static_cast<int>(n->outputs.size()) || value_freed(n->outputs[loss.output].value)) return false;
    *value = value_get(value_to_host(n->outputs[loss.output].value), 0);
    return true;
}

// HOOK_LOSS: a backward() from a loss. Logged here only while no optimizer has counted a step (a
// hand-written update loop); step() logs the loss otherwise (training_step_end).
void on_loss(Node*, HookEvent event, void*) {
    TrainingLog& log = training_log();
    if (event != HOOK_LOSS || log.optimizer_steps > 0 || log.script_logged_loss || !training_logs_steps()) return;
    double value = 0;
    if (!last_loss_value(&value)) return;
    log.loss_count_seen = engine_last_loss().count;   // step() does not log this one again
    log.loss_from_backward = true;
    training_log_scalar("loss", value, static_cast<double>(log.backward_losses++));
}

}  // namespace

void training_follow_losses() {
    TrainingLog& log = training_log();
    if (log.loss_observer == 0) log.loss_observer = engine_observe(on_loss, nullptr, hook_bit(HOOK_LOSS), OBSERVER_RECORDS);
}

void training_note_script_loss() {
    TrainingLog& log = training_log();
    if (log.script_logged_loss) return;
    log.script_logged_loss = true;
    if (log.loss_from_backward) log.scalars.erase("loss");
    log.loss_from_backward = false;
    ++log.version;
}

bool training_is_scalar(const std::string& name) { return training_log().scalars.count(name) > 0; }
bool training_is_histogram(const std::string& name) { return training_log().histograms.count(name) > 0; }

std::vector<std::string> training_family(const std::string& prefix) {
    std::vector<std::string> names;
    const TrainingLog& log = training_log();
    std::string start = prefix + "/";
    // The optimizer's parameters in their order first (fc1 before fc2, weight before bias).
    for (const std::string& p : log.parameters)
        if (log.scalars.count(start + p)) names.push_back(start + p);
    for (auto it = log.scalars.lower_bound(start); it != log.scalars.end() && it->first.compare(0, start.size(), start) == 0; ++it)
        if (std::find(names.begin(), names.end(), it->first) == names.end()) names.push_back(it->first);
    return names;
}

std::string training_series_listing() {
    const TrainingLog& log = training_log();
    std::string out;
    std::set<std::string> families_done;
    for (const auto& [name, series] : log.scalars) {
        size_t slash = name.find('/');
        if (slash != std::string::npos) {
            std::string prefix = name.substr(0, slash);
            if (families_done.count(prefix)) continue;
            std::vector<std::string> members = training_family(prefix);
            if (members.size() > 1) {
                families_done.insert(prefix);
                if (!out.empty()) out += ", ";
                out += prefix + " (" + std::to_string(members.size()) + " series)";
                continue;
            }
        }
        if (!out.empty()) out += ", ";
        out += name;
    }
    for (const auto& entry : log.histograms) {
        if (!out.empty()) out += ", ";
        out += "hist " + entry.first;
    }
    return out;
}

// Sums of squares over n elements, in double, with four accumulators (the loop then pipelines).
template <class T>
double sum_squares(const T* x, int64_t n) {
    double a[4] = {0, 0, 0, 0};
    int64_t i = 0;
    for (; i + 4 <= n; i += 4)
        for (int k = 0; k < 4; ++k) a[k] += static_cast<double>(x[i + k]) * static_cast<double>(x[i + k]);
    for (; i < n; ++i) a[0] += static_cast<double>(x[i]) * static_cast<double>(x[i]);
    return (a[0] + a[1]) + (a[2] + a[3]);
}
// sum (x - y)^2 and sum y^2 in one pass.
template <class T>
void diff_squares(const T* x, const T* y, int64_t n, double* diff, double* base) {
    double d[4] = {0, 0, 0, 0}, b[4] = {0, 0, 0, 0};
    int64_t i = 0;
    for (; i + 4 <= n; i += 4)
        for (int k = 0; k < 4; ++k) {
            double yk = y[i + k], dk = static_cast<double>(x[i + k]) - yk;
            d[k] += dk * dk;
            b[k] += yk * yk;
        }
    for (; i < n; ++i) {
        double yk = y[i], dk = static_cast<double>(x[i]) - yk;
        d[0] += dk * dk;
        b[0] += yk * yk;
    }
    *diff = (d[0] + d[1]) + (d[2] + d[3]);
    *base = (b[0] + b[1]) + (b[2] + b[3]);
}

double training_norm(const Value& v) {
    if (value_freed(v)) return std::nan("");
    Value host = value_contiguous(value_to_host(v));
    if (host.dtype == DTYPE_F32) return std::sqrt(sum_squares(host.data<float>(), host.numel()));
    if (host.dtype == DTYPE_F64) return std::sqrt(sum_squares(host.data<double>(), host.numel()));
    HostReader r(host);
    double sum = 0;
    for (int64_t i = 0, n = r.size(); i < n; ++i) sum += r[i] * r[i];
    return std::sqrt(sum);
}

// ‖a − b‖ and ‖b‖ (same shape and dtype), read on the host in one pass.
void training_diff_norms(const Value& a, const Value& b, double* diff, double* base) {
    Value ha = value_contiguous(value_to_host(a)), hb = value_contiguous(value_to_host(b));
    int64_t n = std::min(ha.numel(), hb.numel());
    if (ha.dtype == DTYPE_F32 && hb.dtype == DTYPE_F32) diff_squares(ha.data<float>(), hb.data<float>(), n, diff, base);
    else if (ha.dtype == DTYPE_F64 && hb.dtype == DTYPE_F64) diff_squares(ha.data<double>(), hb.data<double>(), n, diff, base);
    else {
        HostReader ra(ha), rb(hb);
        *diff = *base = 0;
        for (int64_t i = 0; i < n; ++i) *diff += (ra[i] - rb[i]) * (ra[i] - rb[i]), *base += rb[i] * rb[i];
    }
    *diff = std::sqrt(*diff);
    *base = std::sqrt(*base);
}

double training_diff_norm(const Value& a, const Value& b) {
    double diff = 0, base = 0;
    training_diff_norms(a, b, &diff, &base);
    return diff;
}

void training_step_begin(const std::vector<Value>& params) {
    std::vector<Value>& before = training_log().params_before;
    before.clear();
    before.reserve(params.size());
    for (const Value& p : params) {
        Value host = value_contiguous(value_to_host(p));
        if (host.storage.get() == p.storage.get()) {   // on the CPU and contiguous: copy it
            Value copy = value_new(p.shape, p.dtype);
            std::memcpy(copy.raw(), host.raw(), static_cast<size_t>(p.numel()) * dtype_size(p.dtype));
            host = copy;
        }
        before.push_back(host);
    }
}

void training_step_end(const std::vector<Value>& params, const std::vector<Value>& grads,
                       const std::vector<std::string>& names) {
    TrainingLog& log = training_log();
    double step = static_cast<double>(log.optimizer_steps);
    for (size_t i = 0; i < params.size() && i < names.size(); ++i) {
        if (std::find(log.parameters.begin(), log.parameters.end(), names[i]) == log.parameters.end())
            log.parameters.push_back(names[i]);
        if (i < grads.size() && !value_freed(grads[i]))
            training_log_scalar("grad_norm/" + names[i], training_norm(grads[i]), step);
        if (i < log.params_before.size()) {
            double moved = 0, before = 0;
            training_diff_norms(params[i], log.params_before[i], &moved, &before);
            training_log_scalar("update_ratio/" + names[i], before > 0 ? moved / before : std::nan(""), step);
        }
    }
    log.params_before.clear();
    const LastLoss& loss = engine_last_loss();
    if (loss.count != log.loss_count_seen) {
        log.loss_count_seen = loss.count;
        double value = 0;
        bool found = last_loss_value(&value);   // on a device: read through its node, if it still lives
        auto it = log.scalars.find("loss");
        bool logged_by_script = it != log.scalars.end() && it->second.last_step == step;
        if (found && !logged_by_script) {
            training_log_scalar("loss", value, step);
            log.loss_from_backward = false;   // the optimizer's series now: a script's own `loss` adds to it
        }
    }
    ++log.optimizer_steps;
    ++log.version;
}

}  // namespace td
