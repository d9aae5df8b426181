// kernels_cuda_products.cu: see cuda_common.h.
#include "cuda_common.h"

namespace td {

void cuda_register_products(KernelFn*) {}

}  // namespace td
