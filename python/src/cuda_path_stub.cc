// CudaPath where braid_torch is built without it (braid without CUDA, or a torch without CUDA):
// the first op on a CUDA tensor raises, saying why; nothing else can be reached.
#include "cuda_path.h"

namespace braid::pytorch {

CudaPath::CudaPath(Communicator&, int device, double) : device_(device) {
  TORCH_CHECK(false, "braid: CUDA tensors (cuda:", device,
              ") need a braid_torch built with CUDA: braid configured where nvcc exists "
              "(BRAID_WITH_CUDA) against a torch with CUDA; this one was built without");
}

CudaPath::~CudaPath() = default;

namespace {
[[noreturn]] void unreachable() { TORCH_CHECK(false, "braid: built without CUDA tensors"); }
}  // namespace

CudaPath::WorkPtr CudaPath::allReduce(int, const at::Tensor&, DataType, RedOp) { unreachable(); }
CudaPath::WorkPtr CudaPath::broadcast(int, const at::Tensor&, DataType, int) { unreachable(); }
CudaPath::WorkPtr CudaPath::reduce(int, const at::Tensor&, DataType, RedOp, int) {
  unreachable();
}
CudaPath::WorkPtr CudaPath::allReduceCoalesced(int, const std::vector<Tensors>&,
                                               const std::vector<DataType>&, RedOp,
                                               const Tensors&) {
  unreachable();
}
CudaPath::WorkPtr CudaPath::allGather(int, const Tensors&, const at::Tensor&, DataType, int) {
  unreachable();
}
CudaPath::WorkPtr CudaPath::allGatherBase(int, ::c10d::OpType, const char*, const Tensors&,
                                          const Tensors&, const std::vector<DataType>&) {
  unreachable();
}
CudaPath::WorkPtr CudaPath::reduceScatterBase(int, ::c10d::OpType, const char*, const Tensors&,
                                              const Tensors&, const std::vector<DataType>&,
                                              RedOp) {
  unreachable();
}
CudaPath::WorkPtr CudaPath::allToAllBase(int, const at::Tensor&, const at::Tensor&,
                                         const Splits&, const Splits&, DataType) {
  unreachable();
}
CudaPath::WorkPtr CudaPath::allToAll(int, const Tensors&, const Tensors&, const Splits&,
                                     const Splits&, DataType) {
  unreachable();
}
CudaPath::WorkPtr CudaPath::gather(int, const Tensors&, const at::Tensor&, DataType, int) {
  unreachable();
}
CudaPath::WorkPtr CudaPath::scatter(int, const at::Tensor&, const Tensors&, DataType, int) {
  unreachable();
}
void CudaPath::abort() {}

}  // namespace braid::pytorch
