// The cuda_ipc backend (transport/backend.h), built where configure found CUDA
// (transport/cuda_ipc/missing.cc stands in elsewhere): device-memory slots, peers on this host.
#include "transport/cuda_ipc/cuda_ipc.h"

namespace braid::transport {

const Backend& cudaIpcBackend() {
  static const BuiltBackend<cuda_ipc::CudaIpcTransport> backend(
      Kind::kCudaIpc, /*sameHostOnly=*/true, /*deviceMemory=*/true);
  return backend;
}

}  // namespace braid::transport
