// gradcheck.cpp: finite differences against computed gradients (gradcheck.h).
#include "gradcheck.h"

#include "backend.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <unordered_set>

namespace td {

std::vector<int64_t> gradcheck_sample(int64_t numel, int64_t limit) {
    std::vector<int64_t> picked;
    if (numel <= 0 || limit <= 0) return picked;
    if (numel <= limit) {
        picked.resize(static_cast<size_t>(numel));
        for (int64_t k = 0; k < numel; ++k) picked[static_cast<size_t>(k)] = k;
        return picked;
    }
    std::unordered_set<int64_t> chosen{0};
    if (limit > 1) chosen.insert(numel - 1);
    std::mt19937_64 random(20261125);   // fixed: the same sample every time
    while (static_cast<int64_t>(chosen.size()) < limit) chosen.insert(static_cast<int64_t>(random() % static_cast<uint64_t>(numel)));
    picked.assign(chosen.begin(), chosen.end());
    std::sort(picked.begin(), picked.end());
    return picked;
}

std::string gradcheck_eps_refusal(double eps) {
    char range[96];
    snprintf(range, sizeof range, "use an eps from %.2g to %g (the default 1e-6 suits float64)", GRADCHECK_MIN_EPS, GRADCHECK_MAX_EPS);
    char text[400];
    if (!(eps > 0) || !std::isfinite(eps))
        snprintf(text, sizeof text, "eps %g is not a step: it must be a positive number; %s", eps, range);
    else if (eps < GRADCHECK_MIN_EPS)
        snprintf(text, sizeof text,
                 "eps %g is too small for float64, the dtype the differences are taken in: x + eps keeps too few of eps's "
                 "digits (float64 has about 16), so f(x + eps) - f(x - eps) is rounding error; %s",
                 eps, range);
    else if (eps > GRADCHECK_MAX_EPS)
        snprintf(text, sizeof text,
                 "eps %g is too large: a central difference over +-%g measures a secant, not the derivative (its error "
                 "grows as eps^2); %s",
                 eps, eps, range);
    else
        return "";
    return text;
}

std::vector<double> gradcheck_flatten_outputs(const std::vector<Value>& outputs) {
    std::vector<double> flat;
    for (const Value& v : outputs) {
        if (!dtype_is_float(v.dtype)) continue;
        Value host = value_to_host(v);
        int64_t n = host.numel();
        for (int64_t i = 0; i < n; ++i) flat.push_back(value_get(host, i));
    }
    return flat;
}

std::vector<double> gradcheck_numeric_column(const GradcheckEvaluate& f, const Value& input, int64_t k, double eps) {
    const double original = value_get(input, k);
    struct Restore {   // the exact value goes back however the evaluations end
        const Value& v;
        int64_t k;
        double x;
        ~Restore() { value_set(v, k, x); }
    } restore{input, k, original};
    value_set(input, k, original + eps);
    std::vector<double> plus = gradcheck_flatten_outputs(f());
    value_set(input, k, original - eps);
    std::vector<double> minus = gradcheck_flatten_outputs(f());
    if (plus.size() != minus.size()) engine_fail("gradcheck: the function's outputs changed size between two evaluations");
    // The step really taken: x + eps rounds in the input's dtype (float32 inputs take a coarse one).
    value_set(input, k, original + eps);
    double up = value_get(input, k);
    value_set(input, k, original - eps);
    double down = value_get(input, k);
    double step = up - down;
    for (size_t i = 0; i < plus.size(); ++i) plus[i] = step != 0 ? (plus[i] - minus[i]) / step : 0;
    return plus;
}

void GradcheckComparison::add(int64_t index, double analytic, double numeric, const GradcheckTolerance& tolerance) {
    ++checked;
    double diff = std::fabs(analytic - numeric);
    bool is_nan = std::isnan(diff);
    double allowed = tolerance.atol + tolerance.rtol * std::fabs(numeric);
    // how far along its tolerance the difference is (past 1: a mismatch)
    double excess = is_nan ? std::numeric_limits<double>::infinity()
                    : allowed > 0 ? diff / allowed
                    : diff > 0    ? std::numeric_limits<double>::max()
                                  : 0;
    if (is_nan || diff > allowed) ++mismatched;
    if (is_nan || diff > max_abs_diff || std::isnan(max_abs_diff)) max_abs_diff = is_nan || std::isnan(max_abs_diff) ? NAN : diff;
    if (worst < 0 || excess > worst_excess_) {
        worst = index;
        worst_excess_ = excess;
        worst_analytic = analytic;
        worst_numeric = numeric;
    }
}

std::string gradcheck_index_text(const Shape& shape, int64_t flat) {
    std::string text = "[";
    int64_t stride = shape.numel();
    for (int d = 0; d < shape.ndim; ++d) {
        stride = shape.dims[d] ? stride / shape.dims[d] : 1;
        int64_t i = stride ? flat / stride : 0;
        flat -= i * stride;
        text += (d ? "," : "") + std::to_string(i + 1);
    }
    return text + "]";
}

std::vector<Value> op_evaluate_untracked(OpId op, const OpAttrs& attrs, const std::vector<Value>& inputs) {
    const OpInfo& info = op_info(op);
    if (info.flags & (OPF_CUSTOM | OPF_INPLACE | OPF_CREATE))
        engine_fail("%s: cannot be evaluated on its own (a torch.Function, an in-place or a creation op)", info.name);
    std::vector<const Value*> in;
    for (const Value& v : inputs) in.push_back(&v);
    ShapeCall shapes(info.name, in.data(), static_cast<int>(in.size()), attrs);
    info.shape_rule(shapes);
    std::vector<Value> outputs(static_cast<size_t>(shapes.n_outputs));
    Value* out[MAX_OUTPUTS];
    for (int i = 0; i < shapes.n_outputs; ++i) {
        if (i == 0 && (info.flags & OPF_VIEW)) {
            value_share_layout(outputs[0], inputs[0]);   // the view's kernel sets its own layout
            outputs[0].shape = shapes.shapes[0];
            outputs[0].dtype = shapes.dtypes[0];
        } else {
            outputs[static_cast<size_t>(i)] = value_new(shapes.shapes[i], shapes.dtypes[i], DEVICE_CPU);
        }
        out[i] = &outputs[static_cast<size_t>(i)];
    }
    KernelCall call{in.data(), static_cast<int>(in.size()), out, shapes.n_outputs, attrs};
    kernel_run(op, call);
    return outputs;
}

}  // namespace td
