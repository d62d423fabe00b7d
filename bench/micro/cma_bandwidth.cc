// What the kernel's cross-memory copy (process_vm_readv, "CMA") moves against a plain memcpy on
// this machine: the only way one process reads another's ordinary memory in one copy without a
// kernel module, so the ceiling of a single-copy all-reduce on such buffers (issue 14).
//
// A forked child fills a private buffer and waits; the parent reads it in chunks of each size
// into a chunk-sized buffer (which stays in cache, as a pipelined reduce's would) through
// process_vm_readv, then copies its own buffer the same way with memcpy. Prints GB/s (bytes read
// per second), the median of --runs, for each chunk size. Exit 77 where the kernel refuses it.
//
//   cma_bandwidth [--bytes 64M] [--runs 5]
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

double seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

size_t parseBytes(const char* text) {
  char* end = nullptr;
  const unsigned long long v = std::strtoull(text, &end, 10);
  const std::string unit = end ? end : "";
  const size_t scale = unit == "K" ? 1 << 10 : unit == "M" ? 1 << 20 : unit == "G" ? 1 << 30 : 1;
  if (v == 0 || !(unit.empty() || scale > 1)) {
    std::fprintf(stderr, "cma_bandwidth: --bytes '%s' is no size (e.g. 64M)\n", text);
    std::exit(2);
  }
  return static_cast<size_t>(v) * scale;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  size_t bytes = 64 << 20;
  int runs = 5;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--bytes" && i + 1 < argc) {
      bytes = parseBytes(argv[++i]);
    } else if (a == "--runs" && i + 1 < argc) {
      runs = std::max(1, std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr, "usage: cma_bandwidth [--bytes 64M] [--runs 5]\n");
      return 2;
    }
  }
  std::vector<char> mine(bytes, 1);
  int toChild[2], toParent[2];
  if (pipe(toChild) != 0 || pipe(toParent) != 0) {
    std::perror("cma_bandwidth: pipe");
    return 1;
  }
  const pid_t child = fork();
  if (child < 0) {
    std::perror("cma_bandwidth: fork");
    return 1;
  }
  if (child == 0) {
    // Its own pages (written after the fork), published by address; it lives until told.
    std::vector<char> theirs(bytes, 2);
    const uintptr_t where = reinterpret_cast<uintptr_t>(theirs.data());
    if (write(toParent[1], &where, sizeof where) != sizeof where) _exit(1);
    char done;
    _exit(read(toChild[0], &done, 1) == 1 ? 0 : 1);
  }
  uintptr_t remote = 0;
  if (read(toParent[0], &remote, sizeof remote) != sizeof remote) {
    std::fprintf(stderr, "cma_bandwidth: the child did not publish its buffer\n");
    return 1;
  }
  std::printf("# %zu bytes, median of %d runs, GB/s of bytes read\n", bytes, runs);
  std::printf("# %10s %14s %10s %8s\n", "chunk", "process_vm_readv", "memcpy", "ratio");
  int rc = 0;
  for (size_t chunk : {size_t(64) << 10, size_t(256) << 10, size_t(1) << 20, size_t(4) << 20}) {
    if (chunk > bytes) break;
    std::vector<char> into(chunk);
    std::vector<double> cma, copy;
    for (int r = 0; r < runs && rc == 0; ++r) {
      double t = seconds();
      for (size_t off = 0; off + chunk <= bytes; off += chunk) {
        iovec local{into.data(), chunk};
        iovec far{reinterpret_cast<void*>(remote + off), chunk};
        if (process_vm_readv(child, &local, 1, &far, 1, 0) != static_cast<ssize_t>(chunk)) {
          const int why = errno;
          std::fprintf(stderr, "cma_bandwidth: process_vm_readv of %zu bytes at offset %zu: %s\n",
                       chunk, off, std::strerror(why));
          // Not permitted here (a seccomp filter, ptrace restrictions): nothing to measure.
          rc = why == EPERM || why == ENOSYS ? 77 : 1;
          break;
        }
      }
      cma.push_back(static_cast<double>(bytes) / (seconds() - t) / 1e9);
      if (into[0] != 2) {
        std::fprintf(stderr, "cma_bandwidth: read %d, the child wrote 2\n", into[0]);
        rc = 1;
      }
      t = seconds();
      for (size_t off = 0; off + chunk <= bytes; off += chunk) {
        std::memcpy(into.data(), mine.data() + off, chunk);
      }
      copy.push_back(static_cast<double>(bytes) / (seconds() - t) / 1e9);
    }
    if (rc != 0) break;
    std::printf("  %10zu %14.2f %10.2f %8.2f\n", chunk, median(cma), median(copy),
                median(cma) / median(copy));
  }
  const char done = 1;
  if (write(toChild[1], &done, 1) != 1) rc = 1;
  waitpid(child, nullptr, 0);
  return rc;
}
