// kernels_cuda_products.cu: mm and bmm (cuBLAS; int64 with a kernel of its own) and conv2d with its
// two backward ops (cuDNN's convolution API). See cuda_common.h.
//
// mm, bmm      float/double through cublas{S,D}gemm(StridedBatched)_64: a row-major product is the
//              column-major one with the operands swapped (Cᵀ = op(B)ᵀ op(A)ᵀ), so no operand is
//              copied when it is row-major or column-major with any leading dimension (a transposed
//              or narrowed view); other layouts are made contiguous first. accumulate: beta = 1.
//              int64 (the CPU keeps int64 products int64): a plain kernel, one thread per element of
//              the result, reading both operands through their strides (any layout, no copies).
// conv2d       cudnnConvolutionForward (+ cudnnAddTensor for the bias), BackwardData, BackwardFilter;
//              CUDNN_FMA_MATH (no TF32: results close to the CPU's); the algorithm chosen once per
//              (op, dtype, shapes, window) by cudnnGet*Algorithm_v7's heuristics and kept in a map.
#include <array>
#include <map>
#include <memory>

#include "cuda_common.h"

namespace td {

namespace {

// ============================================================================================
// [SECTION] mm, bmm

// A matrix operand of a product as cuBLAS reads it: the matrix in v's last two dims (r x c), each
// of `batch` matrices `batch_stride` elements apart. Element (i, j) sits at i * ld + j when
// row_major, else at i + j * ld. `copy` holds a contiguous copy when v's layout is neither.
struct GemmOperand {
    const void* data = nullptr;
    int64_t rows = 0, cols = 0;
    bool row_major = true;
    int64_t ld = 1;
    int64_t batch_stride = 0;
    Value copy;
};

// The operand for v (2-d for mm, 3-d for bmm), in place when its layout allows, else from a
// contiguous copy on the device.
GemmOperand gemm_operand(const Value& v) {
    GemmOperand g;
    int nd = v.shape.ndim;
    int64_t r = v.shape.dims[nd - 2], c = v.shape.dims[nd - 1];
    g.rows = r, g.cols = c;
    const Value* source = &v;
    if (v.strided()) {
        int64_t s_row = v.stride(nd - 2), s_col = v.stride(nd - 1);
        int64_t s_batch = nd == 3 ? (v.shape.dims[0] == 1 ? 0 : v.stride(0)) : 0;
        // cuBLAS wants ld >= the leading size (and >= 1) and a batch stride >= 0; a size-1 dim's
        // stride does not matter, so it is chosen to satisfy that.
        bool row_major = c == 1 || s_col == 1;
        int64_t row_ld = r == 1 ? (c > 1 ? c : 1) : s_row;
        bool col_major = r == 1 || s_row == 1;
        int64_t col_ld = c == 1 ? (r > 1 ? r : 1) : s_col;
        if (s_batch >= 0 && row_major && row_ld >= (c > 1 ? c : 1)) {
            g.data = v.raw(), g.row_major = true, g.ld = row_ld, g.batch_stride = s_batch;
            return g;
        }
        if (s_batch >= 0 && col_major && col_ld >= (r > 1 ? r : 1)) {
            g.data = v.raw(), g.row_major = false, g.ld = col_ld, g.batch_stride = s_batch;
            return g;
        }
        g.copy = value_new(v.shape, v.dtype, DEVICE_CUDA);
        cuda_copy_elements(g.copy, v);
        source = &g.copy;
    }
    g.data = source->raw();
    g.row_major = true;
    g.ld = c > 1 ? c : 1;
    g.batch_stride = r * c;
    return g;
}

// How cuBLAS reads an operand that the product uses as op(X) (X transposed when `trans`): the
// column-major swap needs op(X)ᵀ, which is the stored matrix as is for a row-major X read
// without transpose, and transposed otherwise.
cublasOperation_t cublas_op(const GemmOperand& g, bool trans) {
    return g.row_major == trans ? CUBLAS_OP_T : CUBLAS_OP_N;
}

void gemm_call(const float* alpha, const float* beta, cublasOperation_t op_b, cublasOperation_t op_a, int64_t n,
               int64_t m, int64_t k, const GemmOperand& b, const GemmOperand& a, float* c, int64_t batch,
               int64_t c_stride) {
    const float* pa = static_cast<const float*>(a.data);
    const float* pb = static_cast<const float*>(b.data);
    if (batch == 1)
        cublas_check(cublasSgemm_64(cuda_cublas(), op_b, op_a, n, m, k, alpha, pb, b.ld, pa, a.ld, beta, c, n), "mm (cuda)");
    else
        cublas_check(cublasSgemmStridedBatched_64(cuda_cublas(), op_b, op_a, n, m, k, alpha, pb, b.ld, b.batch_stride, pa,
                                                  a.ld, a.batch_stride, beta, c, n, c_stride, batch),
                     "bmm (cuda)");
}

void gemm_call(const double* alpha, const double* beta, cublasOperation_t op_b, cublasOperation_t op_a, int64_t n,
               int64_t m, int64_t k, const GemmOperand& b, const GemmOperand& a, double* c, int64_t batch,
               int64_t c_stride) {
    const double* pa = static_cast<const double*>(a.data);
    const double* pb = static_cast<const double*>(b.data);
    if (batch == 1)
        cublas_check(cublasDgemm_64(cuda_cublas(), op_b, op_a, n, m, k, alpha, pb, b.ld, pa, a.ld, beta, c, n), "mm (cuda)");
    else
        cublas_check(cublasDgemmStridedBatched_64(cuda_cublas(), op_b, op_a, n, m, k, alpha, pb, b.ld, b.batch_stride, pa,
                                                  a.ld, a.batch_stride, beta, c, n, c_stride, batch),
                     "bmm (cuda)");
}

// o (contiguous, [batch,] m x n) = op(A) op(B), or += when accumulate, in float or double.
template <class T>
void float_product(const KernelCall& c, int64_t batch) {
    const Value& o = *c.outputs[0];
    const OpAttrs& at = c.attrs;
    GemmOperand a = gemm_operand(*c.inputs[0]), b = gemm_operand(*c.inputs[1]);
    int64_t m = at.trans_a ? a.cols : a.rows, k = at.trans_a ? a.rows : a.cols;
    int64_t n = at.trans_b ? b.rows : b.cols;
    T* out = o.data<T>();
    if (k == 0) {   // an empty sum: zeros (or nothing to add)
        if (!at.accumulate)
            cuda_check(cudaMemsetAsync(out, 0, static_cast<size_t>(o.numel()) * sizeof(T), cuda_stream()), "mm (cuda)");
        return;
    }
    T alpha = 1, beta = at.accumulate ? 1 : 0;
    // Row-major C = op(A) op(B) is column-major Cᵀ = op(B)ᵀ op(A)ᵀ: B first, n x m, ldc = n.
    gemm_call(&alpha, &beta, cublas_op(b, at.trans_b), cublas_op(a, at.trans_a), n, m, k, b, a, out, batch, m * n);
}

// A matrix operand of the int64 product, read through its strides: element (i, j) of batch p
// at offset + p * s_batch + i * s_row + j * s_col (transposition swaps s_row and s_col).
struct IntOperand {
    const int64_t* data;
    int64_t s_batch, s_row, s_col;
};

IntOperand int_operand(const Value& v, bool trans) {
    int nd = v.shape.ndim;
    IntOperand g{static_cast<const int64_t*>(v.storage->data) + v.offset, nd == 3 ? v.stride(0) : 0,
                 v.stride(nd - 2), v.stride(nd - 1)};
    if (trans) {
        int64_t s = g.s_row;
        g.s_row = g.s_col;
        g.s_col = s;
    }
    return g;
}

// out[p, i, j] (+)= sum over q of A[p, i, q] B[p, q, j] in int64, wrapping on overflow as the CPU
// does (it is built with -fwrapv): the arithmetic is done in uint64.
__global__ void int64_product(int64_t* out, IntOperand a, IntOperand b, int64_t batch, int64_t m, int64_t n,
                              int64_t k, bool accumulate) {
    int64_t total = batch * m * n;
    for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < total; e += int64_t(gridDim.x) * blockDim.x) {
        int64_t j = e % n, i = (e / n) % m, p = e / (m * n);
        const int64_t* ar = a.data + p * a.s_batch + i * a.s_row;
        const int64_t* bc = b.data + p * b.s_batch + j * b.s_col;
        uint64_t sum = accumulate ? static_cast<uint64_t>(out[e]) : 0;
        for (int64_t q = 0; q < k; ++q)
            sum += static_cast<uint64_t>(ar[q * a.s_col]) * static_cast<uint64_t>(bc[q * b.s_row]);
        out[e] = static_cast<int64_t>(sum);
    }
}

void int_product(const KernelCall& c, int64_t batch, const char* what) {
    const Value& o = *c.outputs[0];
    const Value &va = *c.inputs[0], &vb = *c.inputs[1];
    int nd = va.shape.ndim;
    int64_t m = o.shape.dims[nd - 2], n = o.shape.dims[nd - 1];
    int64_t k = c.attrs.trans_a ? va.shape.dims[nd - 2] : va.shape.dims[nd - 1];
    IntOperand a = int_operand(va, c.attrs.trans_a), b = int_operand(vb, c.attrs.trans_b);
    int64_product<<<cuda_blocks(o.numel()), CUDA_THREADS, 0, cuda_stream()>>>(o.data<int64_t>(), a, b, batch, m, n, k,
                                                                             c.attrs.accumulate);
    cuda_check_launch(what);
}

// The product's output must be a plain row-major block: it always is (a new value, or freeze's
// gradient buffer for accumulate); said here rather than written wrongly.
void check_product_output(const KernelCall& c, const char* what) {
    if (c.outputs[0]->strided()) engine_fail("%s: internal error: a strided output", what);
}

void cuda_mm(const KernelCall& c) {
    check_product_output(c, "mm (cuda)");
    switch (c.outputs[0]->dtype) {
        case DTYPE_F32: float_product<float>(c, 1); break;
        case DTYPE_F64: float_product<double>(c, 1); break;
        case DTYPE_I64: int_product(c, 1, "mm (cuda)"); break;
    }
}

void cuda_bmm(const KernelCall& c) {
    check_product_output(c, "bmm (cuda)");
    int64_t batch = c.outputs[0]->shape.dims[0];
    switch (c.outputs[0]->dtype) {
        case DTYPE_F32: float_product<float>(c, batch); break;
        case DTYPE_F64: float_product<double>(c, batch); break;
        case DTYPE_I64: int_product(c, batch, "bmm (cuda)"); break;
    }
}

// ============================================================================================
// [SECTION] conv2d (cuDNN)

enum ConvKind { CONV_FORWARD, CONV_BACKWARD_INPUT, CONV_BACKWARD_WEIGHT };

// cuDNN's descriptors for one convolution, made per call and destroyed with the object.
struct ConvDescriptors {
    cudnnTensorDescriptor_t x = nullptr, y = nullptr;
    cudnnFilterDescriptor_t w = nullptr;
    cudnnConvolutionDescriptor_t conv = nullptr;
    cudnnDataType_t type;

    ConvDescriptors() = default;
    ConvDescriptors(const ConvDescriptors&) = delete;
    ConvDescriptors& operator=(const ConvDescriptors&) = delete;
    ~ConvDescriptors() {
        if (x) cudnnDestroyTensorDescriptor(x);
        if (y) cudnnDestroyTensorDescriptor(y);
        if (w) cudnnDestroyFilterDescriptor(w);
        if (conv) cudnnDestroyConvolutionDescriptor(conv);
    }
};

// An int for cuDNN's 4-d descriptors, or an error naming the op.
int cudnn_int(int64_t v, const char* what) {
    if (v > INT32_MAX) engine_fail("%s: a size of %lld is too large for cuDNN", what, static_cast<long long>(v));
    return static_cast<int>(v);
}

// What cuDNN reads and writes: the value's bytes, or an aligned copy. A contiguous view at an offset
// (x[2] of a batch) can start off a 16-byte boundary, which some cuDNN 9 engines refuse at execute
// although the heuristics chose them without seeing the pointer; an output so placed is written
// through a copy too. Legacy 4-d descriptors keep int strides, so a tensor past 2^31 - 1 elements
// is refused here, by name, not by a cuDNN status.
class CudnnOperand {
public:
    CudnnOperand(const Value& v, bool output, const char* what) : value_(v), output_(output), what_(what) {
        if (v.numel() > INT32_MAX)
            engine_fail("%s: a tensor of %lld elements is past cuDNN's limit of 2^31 - 1 for one convolution operand; "
                        "split the batch", what, static_cast<long long>(v.numel()));
        data_ = v.raw();
        if (reinterpret_cast<uintptr_t>(data_) % 16 == 0) return;
        copy_ = std::make_unique<CudaScratch>(bytes());
        if (!output) cuda_check(cudaMemcpyAsync(copy_->data, data_, bytes(), cudaMemcpyDeviceToDevice, cuda_stream()), what);
        data_ = copy_->data;
    }
    CudnnOperand(const CudnnOperand&) = delete;
    CudnnOperand& operator=(const CudnnOperand&) = delete;
    void* data() const { return data_; }
    // An output written through a copy: the copy's bytes back into the value (after the cuDNN call).
    void finish() const {
        if (output_ && copy_)
            cuda_check(cudaMemcpyAsync(value_.raw(), copy_->data, bytes(), cudaMemcpyDeviceToDevice, cuda_stream()), what_);
    }

private:
    size_t bytes() const { return static_cast<size_t>(value_.numel()) * dtype_size(value_.dtype); }
    const Value& value_;
    bool output_;
    const char* what_;
    void* data_ = nullptr;
    std::unique_ptr<CudaScratch> copy_;
};

// N,C,H,W of an image shape: [N,C,H,W], or one image [C,H,W] as N = 1.
std::array<int64_t, 4> nchw(const Shape& s) {
    if (s.ndim == 4) return {s.dims[0], s.dims[1], s.dims[2], s.dims[3]};
    return {1, s.dims[0], s.dims[1], s.dims[2]};
}

// The descriptors of a convolution of input `x` with `weight` into `y` (shapes), in `dtype`, with
// the window of attrs; the math FMA (no TF32 tensor cores).
void make_descriptors(ConvDescriptors& d, const Shape& x, const Shape& weight, const Shape& y, DType dtype,
                      const OpAttrs& a, const char* what) {
    d.type = dtype == DTYPE_F64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
    std::array<int64_t, 4> xs = nchw(x), ys = nchw(y);
    cudnn_check(cudnnCreateTensorDescriptor(&d.x), what);
    cudnn_check(cudnnCreateTensorDescriptor(&d.y), what);
    cudnn_check(cudnnCreateFilterDescriptor(&d.w), what);
    cudnn_check(cudnnCreateConvolutionDescriptor(&d.conv), what);
    cudnn_check(cudnnSetTensor4dDescriptor(d.x, CUDNN_TENSOR_NCHW, d.type, cudnn_int(xs[0], what), cudnn_int(xs[1], what),
                                           cudnn_int(xs[2], what), cudnn_int(xs[3], what)),
                what);
    cudnn_check(cudnnSetTensor4dDescriptor(d.y, CUDNN_TENSOR_NCHW, d.type, cudnn_int(ys[0], what), cudnn_int(ys[1], what),
                                           cudnn_int(ys[2], what), cudnn_int(ys[3], what)),
                what);
    cudnn_check(cudnnSetFilter4dDescriptor(d.w, d.type, CUDNN_TENSOR_NCHW, cudnn_int(weight[0], what),
                                           cudnn_int(weight[1], what), cudnn_int(weight[2], what),
                                           cudnn_int(weight[3], what)),
                what);
    cudnn_check(cudnnSetConvolution2dDescriptor(d.conv, a.padding_h, a.padding_w, a.stride_h, a.stride_w, a.dilation_h,
                                                a.dilation_w, CUDNN_CROSS_CORRELATION, d.type),
                what);
    cudnn_check(cudnnSetConvolutionGroupCount(d.conv, a.groups), what);
    cudnn_check(cudnnSetConvolutionMathType(d.conv, CUDNN_FMA_MATH), what);
}

// The algorithm chosen for one convolution, and the workspace it needs.
struct ConvChoice {
    int algo;
    size_t workspace;
};

typedef std::array<int64_t, 20> ConvKey;   // kind, dtype, x (4), weight (4), y (4), window (6)

ConvKey conv_key(ConvKind kind, DType dtype, const Shape& x, const Shape& weight, const Shape& y, const OpAttrs& a) {
    std::array<int64_t, 4> xs = nchw(x), ys = nchw(y);
    return {kind, dtype, xs[0], xs[1], xs[2], xs[3], weight[0], weight[1], weight[2], weight[3], ys[0], ys[1], ys[2],
            ys[3], a.stride_h, a.stride_w, a.padding_h, a.padding_w, a.dilation_h * 65536LL + a.dilation_w, a.groups};
}

// The preference among the heuristics' answers (lower is better): FMA math and deterministic first
// (results that repeat, and match eager and frozen runs), then in the heuristics' own order.
int choice_rank(cudnnMathType_t math, cudnnDeterminism_t determinism) {
    return (math == CUDNN_FMA_MATH ? 0 : 2) + (determinism == CUDNN_DETERMINISTIC ? 0 : 1);
}

// The algorithm for a convolution of `kind` with the descriptors d: from the cache, else from
// cuDNN's heuristics (the first of the best rank whose workspace size cuDNN can tell), cached.
ConvChoice conv_choice(ConvKind kind, const ConvKey& key, const ConvDescriptors& d, const char* what) {
    static std::map<ConvKey, ConvChoice> cache;
    auto found = cache.find(key);
    if (found != cache.end()) return found->second;
    cudnnHandle_t h = cuda_cudnn();
    constexpr int MAX_ALGOS = 16;
    int count = 0;
    int algos[MAX_ALGOS];
    int ranks[MAX_ALGOS];
    if (kind == CONV_FORWARD) {
        cudnnConvolutionFwdAlgoPerf_t perf[MAX_ALGOS];
        cudnn_check(cudnnGetConvolutionForwardAlgorithm_v7(h, d.x, d.w, d.conv, d.y, MAX_ALGOS, &count, perf), what);
        for (int i = 0; i < count; ++i) {
            algos[i] = perf[i].status == CUDNN_STATUS_SUCCESS ? perf[i].algo : -1;
            ranks[i] = choice_rank(perf[i].mathType, perf[i].determinism);
        }
    } else if (kind == CONV_BACKWARD_INPUT) {
        cudnnConvolutionBwdDataAlgoPerf_t perf[MAX_ALGOS];
        cudnn_check(cudnnGetConvolutionBackwardDataAlgorithm_v7(h, d.w, d.y, d.conv, d.x, MAX_ALGOS, &count, perf), what);
        for (int i = 0; i < count; ++i) {
            algos[i] = perf[i].status == CUDNN_STATUS_SUCCESS ? perf[i].algo : -1;
            ranks[i] = choice_rank(perf[i].mathType, perf[i].determinism);
        }
    } else {
        cudnnConvolutionBwdFilterAlgoPerf_t perf[MAX_ALGOS];
        cudnn_check(cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, d.x, d.y, d.conv, d.w, MAX_ALGOS, &count, perf), what);
        for (int i = 0; i < count; ++i) {
            algos[i] = perf[i].status == CUDNN_STATUS_SUCCESS ? perf[i].algo : -1;
            ranks[i] = choice_rank(perf[i].mathType, perf[i].determinism);
        }
    }
    for (int rank = 0; rank < 4; ++rank) {
        for (int i = 0; i < count; ++i) {
            if (algos[i] < 0 || ranks[i] != rank) continue;
            size_t bytes = 0;
            cudnnStatus_t status;
            if (kind == CONV_FORWARD)
                status = cudnnGetConvolutionForwardWorkspaceSize(h, d.x, d.w, d.conv, d.y,
                                                                 static_cast<cudnnConvolutionFwdAlgo_t>(algos[i]), &bytes);
            else if (kind == CONV_BACKWARD_INPUT)
                status = cudnnGetConvolutionBackwardDataWorkspaceSize(
                    h, d.w, d.y, d.conv, d.x, static_cast<cudnnConvolutionBwdDataAlgo_t>(algos[i]), &bytes);
            else
                status = cudnnGetConvolutionBackwardFilterWorkspaceSize(
                    h, d.x, d.y, d.conv, d.w, static_cast<cudnnConvolutionBwdFilterAlgo_t>(algos[i]), &bytes);
            if (status != CUDNN_STATUS_SUCCESS) continue;
            ConvChoice choice{algos[i], bytes};
            cache.emplace(key, choice);
            return choice;
        }
    }
    engine_fail("%s: cuDNN has no algorithm for this convolution", what);
}

// cuDNN's scaling factors: double for double tensors, float otherwise.
struct ConvScale {
    float f;
    double d;
    const void* of(DType dtype) const { return dtype == DTYPE_F64 ? static_cast<const void*>(&d) : &f; }
};

void check_conv_dtype(DType dtype, const char* what) {
    if (dtype != DTYPE_F32 && dtype != DTYPE_F64) engine_fail("%s: not defined for %s tensors", what, dtype_name(dtype));
}

// A convolution with no input elements (an empty batch N = 0, or an image of height or width 0
// that only the padding covers) has nothing to sum: cuDNN refuses sizes of 0, so the callers
// write the zeros (the CPU kernel's result) themselves.
void conv_zeros(const Value& v, const char* what) {
    cuda_check(cudaMemsetAsync(v.raw(), 0, static_cast<size_t>(v.numel()) * dtype_size(v.dtype), cuda_stream()), what);
}

// y += bias, one value per output channel, broadcast as a [1,O,1,1] tensor.
void add_bias(const Value& y, const Value& bias, const char* what) {
    std::array<int64_t, 4> ys = nchw(y.shape);
    cudnnDataType_t type = y.dtype == DTYPE_F64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
    ConvScale one{1.0f, 1.0};
    cudnnTensorDescriptor_t y_desc = nullptr, bias_desc = nullptr;
    cudnnStatus_t status = cudnnCreateTensorDescriptor(&y_desc);
    if (status == CUDNN_STATUS_SUCCESS) status = cudnnCreateTensorDescriptor(&bias_desc);
    if (status == CUDNN_STATUS_SUCCESS)
        status = cudnnSetTensor4dDescriptor(y_desc, CUDNN_TENSOR_NCHW, type, cudnn_int(ys[0], what),
                                            cudnn_int(ys[1], what), cudnn_int(ys[2], what), cudnn_int(ys[3], what));
    if (status == CUDNN_STATUS_SUCCESS)
        status = cudnnSetTensor4dDescriptor(bias_desc, CUDNN_TENSOR_NCHW, type, 1, cudnn_int(ys[1], what), 1, 1);
    if (status == CUDNN_STATUS_SUCCESS)
        status = cudnnAddTensor(cuda_cudnn(), one.of(y.dtype), bias_desc, bias.raw(), one.of(y.dtype), y_desc, y.raw());
    if (bias_desc) cudnnDestroyTensorDescriptor(bias_desc);
    if (y_desc) cudnnDestroyTensorDescriptor(y_desc);
    cudnn_check(status, what);
}

// Inputs: x [N,C,H,W] or [C,H,W], weight [O,C/groups,kH,kW], an optional bias [O].
void cuda_conv2d(const KernelCall& c) {
    const char* what = "conv2d (cuda)";
    const Value &x = *c.inputs[0], &weight = *c.inputs[1], &y = *c.outputs[0];
    check_conv_dtype(y.dtype, what);
    if (x.numel() == 0) {
        conv_zeros(y, what);
    } else {
        ConvDescriptors d;
        make_descriptors(d, x.shape, weight.shape, y.shape, y.dtype, c.attrs, what);
        ConvChoice choice =
            conv_choice(CONV_FORWARD, conv_key(CONV_FORWARD, y.dtype, x.shape, weight.shape, y.shape, c.attrs), d, what);
        CudaScratch workspace(choice.workspace);
        CudnnOperand x_in(x, false, what), w_in(weight, false, what), y_out(y, true, what);
        ConvScale one{1.0f, 1.0}, zero{0.0f, 0.0};
        cudnn_check(cudnnConvolutionForward(cuda_cudnn(), one.of(y.dtype), d.x, x_in.data(), d.w, w_in.data(), d.conv,
                                            static_cast<cudnnConvolutionFwdAlgo_t>(choice.algo), workspace.data,
                                            choice.workspace, zero.of(y.dtype), d.y, y_out.data()),
                    what);
        y_out.finish();
    }
    if (c.n_inputs > 2) add_bias(y, *c.inputs[2], what);
}

// Inputs: grad of the output, weight; the output dx has attrs.shape (the forward input's).
void cuda_conv2d_backward_input(const KernelCall& c) {
    const char* what = "conv2d_backward_input (cuda)";
    const Value &grad = *c.inputs[0], &weight = *c.inputs[1], &dx = *c.outputs[0];
    check_conv_dtype(dx.dtype, what);
    if (grad.numel() == 0) return conv_zeros(dx, what);
    ConvDescriptors d;
    make_descriptors(d, dx.shape, weight.shape, grad.shape, dx.dtype, c.attrs, what);
    ConvChoice choice = conv_choice(CONV_BACKWARD_INPUT,
                                    conv_key(CONV_BACKWARD_INPUT, dx.dtype, dx.shape, weight.shape, grad.shape, c.attrs), d, what);
    CudaScratch workspace(choice.workspace);
    CudnnOperand w_in(weight, false, what), grad_in(grad, false, what), dx_out(dx, true, what);
    ConvScale one{1.0f, 1.0}, zero{0.0f, 0.0};
    cudnn_check(cudnnConvolutionBackwardData(cuda_cudnn(), one.of(dx.dtype), d.w, w_in.data(), d.y, grad_in.data(), d.conv,
                                             static_cast<cudnnConvolutionBwdDataAlgo_t>(choice.algo), workspace.data,
                                             choice.workspace, zero.of(dx.dtype), d.x, dx_out.data()),
                what);
    dx_out.finish();
}

// Inputs: grad of the output, the forward input x; the output dw has attrs.shape (the weight's).
void cuda_conv2d_backward_weight(const KernelCall& c) {
    const char* what = "conv2d_backward_weight (cuda)";
    const Value &grad = *c.inputs[0], &x = *c.inputs[1], &dw = *c.outputs[0];
    check_conv_dtype(dw.dtype, what);
    if (x.numel() == 0) return conv_zeros(dw, what);   // dW = a sum over no elements
    ConvDescriptors d;
    make_descriptors(d, x.shape, dw.shape, grad.shape, dw.dtype, c.attrs, what);
    ConvChoice choice = conv_choice(CONV_BACKWARD_WEIGHT,
                                    conv_key(CONV_BACKWARD_WEIGHT, dw.dtype, x.shape, dw.shape, grad.shape, c.attrs), d, what);
    CudaScratch workspace(choice.workspace);
    CudnnOperand x_in(x, false, what), grad_in(grad, false, what), dw_out(dw, true, what);
    ConvScale one{1.0f, 1.0}, zero{0.0f, 0.0};
    cudnn_check(cudnnConvolutionBackwardFilter(cuda_cudnn(), one.of(dw.dtype), d.x, x_in.data(), d.y, grad_in.data(), d.conv,
                                               static_cast<cudnnConvolutionBwdFilterAlgo_t>(choice.algo), workspace.data,
                                               choice.workspace, zero.of(dw.dtype), d.w, dw_out.data()),
                what);
    dw_out.finish();
}

}  // namespace

void cuda_register_products(KernelFn* table) {
    table[OP_mm] = cuda_mm;
    table[OP_bmm] = cuda_bmm;
    table[OP_conv2d] = cuda_conv2d;
    table[OP_conv2d_backward_input] = cuda_conv2d_backward_input;
    table[OP_conv2d_backward_weight] = cuda_conv2d_backward_weight;
}

}  // namespace td
