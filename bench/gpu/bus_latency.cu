// What a device collective pays to talk across the bus, for choosing where the executor engine
// keeps its commands (comm/device/README.md): a GPU thread's dependent reads of a word in
// host-mapped memory (plain volatile, and acquire at system scope), of a word in device memory
// for comparison, the cost of a system-scope fence, and a round trip between a host thread and a
// GPU thread through two host-mapped words (the executor's "post a command, see it done").
//
//   gpu_bus_latency [--reads 2000] [--trips 2000]
//
// Prints one line per measure (nanoseconds each, from the GPU's global timer, or the host's clock
// for the round trip). Exits 77 without a GPU.
#include <cuda_runtime.h>
#include <fmt/format.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    fmt::print(stderr, "gpu_bus_latency: {}: {}\n", what, cudaGetErrorString(e));
    std::exit(2);
  }
}

__device__ __forceinline__ uint64_t nanosNow() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__device__ __forceinline__ uint32_t loadAcquireSys(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.acquire.sys.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// out[0]: ns per dependent volatile read; out[1]: per acquire.sys read; out[2]: per fence.sys.
// `word` holds 0, so each address depends on the previous value without moving.
__global__ void readKernel(const uint32_t* word, int reads, uint64_t* out, int slot) {
  const volatile uint32_t* w = word;
  uint32_t v = 0;
  uint64_t t0 = nanosNow();
  for (int i = 0; i < reads; ++i) v = w[v & 0];
  uint64_t t1 = nanosNow();
  for (int i = 0; i < reads; ++i) v = loadAcquireSys(word + (v & 0));
  uint64_t t2 = nanosNow();
  for (int i = 0; i < reads; ++i) __threadfence_system();
  uint64_t t3 = nanosNow();
  out[slot + 0] = (t1 - t0) / reads + (v & 0);
  out[slot + 1] = (t2 - t1) / reads;
  out[slot + 2] = (t3 - t2) / reads;
}

// The GPU side of the round trip: waits for ping == i, then writes pong = i, `trips` times.
__global__ void pongKernel(const uint32_t* ping, uint32_t* pong, int trips) {
  for (int i = 1; i <= trips; ++i) {
    while (loadAcquireSys(ping) != uint32_t(i)) {
    }
    __threadfence_system();
    asm volatile("st.release.sys.u32 [%0], %1;" ::"l"(pong), "r"(uint32_t(i)) : "memory");
  }
}

int intFlag(int argc, char** argv, const char* name, int dflt) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], name) == 0) return std::atoi(argv[i + 1]);
  }
  return dflt;
}

}  // namespace

int main(int argc, char** argv) {
  const int reads = intFlag(argc, argv, "--reads", 2000);
  const int trips = intFlag(argc, argv, "--trips", 2000);
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    fmt::print("gpu_bus_latency: no CUDA device\n");
    return 77;
  }
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  uint32_t* host = nullptr;
  uint32_t* hostDev = nullptr;
  check(cudaHostAlloc(reinterpret_cast<void**>(&host), 4096, cudaHostAllocMapped), "cudaHostAlloc");
  std::memset(host, 0, 4096);
  check(cudaHostGetDevicePointer(reinterpret_cast<void**>(&hostDev), host, 0), "device pointer");
  uint32_t* devWord = nullptr;
  uint64_t* out = nullptr;
  check(cudaMalloc(reinterpret_cast<void**>(&devWord), 256), "cudaMalloc");
  check(cudaMemset(devWord, 0, 256), "cudaMemset");
  check(cudaMalloc(reinterpret_cast<void**>(&out), 6 * sizeof(uint64_t)), "cudaMalloc");

  readKernel<<<1, 1>>>(hostDev, reads, out, 0);  // host-mapped word
  readKernel<<<1, 1>>>(devWord, reads, out, 3);  // device word (its fences: same instruction)
  check(cudaGetLastError(), "launch");
  uint64_t r[6];
  check(cudaMemcpy(r, out, sizeof r, cudaMemcpyDeviceToHost), "cudaMemcpy");

  // Round trip: the host writes ping = i and waits for pong = i.
  uint32_t* ping = host + 16;
  uint32_t* pong = host + 32;
  cudaStream_t s;
  check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
  pongKernel<<<1, 1, 0, s>>>(hostDev + 16, hostDev + 32, trips);
  check(cudaGetLastError(), "launch pong");
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 1; i <= trips; ++i) {
    __atomic_store_n(ping, uint32_t(i), __ATOMIC_RELEASE);
    while (__atomic_load_n(pong, __ATOMIC_ACQUIRE) != uint32_t(i)) {
    }
  }
  const double rtt =
      std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() /
      trips;
  check(cudaStreamSynchronize(s), "pong kernel");

  fmt::print("# device 0: {}; {} dependent reads, {} round trips\n", prop.name, reads, trips);
  fmt::print("{:<46} {:>10}\n", "measure", "ns each");
  fmt::print("{:<46} {:>10}\n", "GPU read of host-mapped memory (volatile)", r[0]);
  fmt::print("{:<46} {:>10}\n", "GPU read of host-mapped memory (acquire.sys)", r[1]);
  fmt::print("{:<46} {:>10}\n", "GPU read of device memory (volatile)", r[3]);
  fmt::print("{:<46} {:>10}\n", "GPU read of device memory (acquire.sys)", r[4]);
  fmt::print("{:<46} {:>10}\n", "GPU fence.sys (__threadfence_system)", r[2]);
  fmt::print("{:<46} {:>10.0f}\n", "host -> GPU -> host round trip (mapped words)", rtt);
  return 0;
}
