// kernels_cuda_other.cu: see cuda_common.h.
#include "cuda_common.h"

namespace td {

void cuda_register_other(KernelFn*) {}

}  // namespace td
