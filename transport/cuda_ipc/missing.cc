// The cuda_ipc backend of a build without CUDA (transport/CMakeLists.txt compiles this file
// instead of transport/cuda_ipc/backend.cc): listed, never available, and says what to install.
#include "transport/backend.h"

namespace braid::transport {

const Backend& cudaIpcBackend() {
  static const MissingBackend backend(
      Kind::kCudaIpc, /*deviceMemory=*/true,
      "this build has no CUDA IPC transport (configure found no CUDA toolkit: install it, then "
      "reconfigure with BRAID_WITH_CUDA=AUTO or ON)");
  return backend;
}

}  // namespace braid::transport
