// NCCL ranks as processes: the test kit's Job (tests/kit/processes.h) with an ncclUniqueId
// shared through a file (rank 0 makes it, the others wait for it), and a check that turns a
// failed NCCL call into the child's report.
#pragma once

#include <nccl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <random>
#include <string>
#include <thread>

#include "tests/kit/processes.h"

namespace braid::nccltest {

/// A fresh path for one job's id.
/// A random part in the name: a file left by an earlier run whose pid came round again must not
/// be read as this run's id (ranks then dialled a store that was gone).
inline std::string idPath() {
  static std::atomic<int> next{0};
  static const uint64_t nonce = (uint64_t(std::random_device{}()) << 32) | std::random_device{}();
  return "/tmp/braid-nccl-id-" + std::to_string(::getpid()) + "-" + std::to_string(nonce) + "-" +
         std::to_string(next++);
}

/// Rank 0 makes the id and publishes it at `path`; the others read it (up to 60 s).
inline ncclUniqueId shareId(const std::string& path, int rank) {
  ncclUniqueId id{};
  if (rank == 0) {
    if (ncclGetUniqueId(&id) != ncclSuccess) throw std::runtime_error(ncclGetLastError(nullptr));
    std::ofstream(path + ".tmp", std::ios::binary).write(id.internal, sizeof id.internal);
    std::rename((path + ".tmp").c_str(), path.c_str());
    return id;
  }
  for (int i = 0; i < 6000; ++i) {
    std::ifstream in(path, std::ios::binary);
    if (in.read(id.internal, sizeof id.internal)) return id;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  throw std::runtime_error("no id at " + path);
}

/// Throws the call's last error when `result` is not ncclSuccess.
inline void check(ncclResult_t result, const char* what) {
  if (result != ncclSuccess) {
    throw std::runtime_error(std::string(what) + ": " + ncclGetErrorString(result) + ": " +
                             ncclGetLastError(nullptr));
  }
}
#define NCCL_CHECK(call) ::braid::nccltest::check((call), #call)

/// ncclCommInitRank of rank `rank` of n over the id at `path`.
inline ncclComm_t initRank(const std::string& path, int rank, int n) {
  ncclComm_t comm = nullptr;
  NCCL_CHECK(ncclCommInitRank(&comm, n, shareId(path, rank), rank));
  return comm;
}

/// Runs body on n rank processes; expects each to exit 0 within `seconds`.
inline void runRanks(int n, const testing::Body& body, double seconds = 120,
                     const testing::Env& env = {}) {
  testing::Job job(n, 0, env);
  job.startAll(body);
  const auto results = job.finish(seconds);
  for (int r = 0; r < n; ++r) EXPECT_EQ(results[r].exitCode, 0) << "rank " << r << ": " << results[r].describe();
}

}  // namespace braid::nccltest
