#include "tests/transport/slot_memory.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <stdexcept>

#if BRAID_TEST_CUDA
#include <cuda_runtime_api.h>
#endif

namespace braid::transport::testing {
namespace {

#if BRAID_TEST_CUDA
void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) {
    throw std::runtime_error(std::string(what) +
                             " of a device slot failed: " + cudaGetErrorString(err));
  }
}
#else
[[noreturn]] void noCuda() { throw std::runtime_error("device slots in a build without CUDA"); }
#endif

}  // namespace

void toSlot(Kind kind, void* slot, const void* src, size_t n) {
  if (!deviceSlots(kind)) {
    std::memcpy(slot, src, n);
    return;
  }
#if BRAID_TEST_CUDA
  check(cudaMemcpy(slot, src, n, cudaMemcpyHostToDevice), "cudaMemcpy");
  // From pageable memory cudaMemcpy may return once the bytes are staged, before they land; the
  // peer reads the slot as soon as it is posted (seen on an H100: wrong bytes between processes).
  check(cudaStreamSynchronize(nullptr), "cudaStreamSynchronize");
#else
  noCuda();
#endif
}

void fromSlot(Kind kind, const void* slot, void* dst, size_t n) {
  if (!deviceSlots(kind)) {
    std::memcpy(dst, slot, n);
    return;
  }
#if BRAID_TEST_CUDA
  check(cudaMemcpy(dst, slot, n, cudaMemcpyDeviceToHost), "cudaMemcpy");
#else
  noCuda();
#endif
}

void setSlot(Kind kind, void* slot, int byte, size_t n) {
  if (!deviceSlots(kind)) {
    std::memset(slot, byte, n);
    return;
  }
#if BRAID_TEST_CUDA
  check(cudaMemset(slot, byte, n), "cudaMemset");
  check(cudaStreamSynchronize(nullptr), "cudaStreamSynchronize");  // cudaMemset is asynchronous
#else
  noCuda();
#endif
}

std::string deviceSlotsUnavailable() {
#if BRAID_TEST_CUDA
  static const std::string why = [] {
    pid_t pid = fork();
    if (pid == 0) {
      int count = 0;
      _exit(cudaGetDeviceCount(&count) == cudaSuccess && count > 0 ? 0 : 1);
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid) return std::string("fork failed");
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? std::string()
                                                         : std::string("no CUDA device");
  }();
  return why;
#else
  return "this build has no CUDA";
#endif
}

}  // namespace braid::transport::testing
