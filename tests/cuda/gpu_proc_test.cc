// Device collectives with ranks as processes on one GPU (CUDA IPC handles between them). The
// parent never touches CUDA (children are forked; CUDA does not survive fork): a probe child
// says whether a GPU exists, rank 0's child makes the rendezvous id and passes it on by pipe.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "tests/cuda/collective_check.h"
#include "tests/cuda/device_case.h"
#include "tests/cuda/gpu_util.h"
#include "tests/kit/processes.h"
#include "tests/support/skip.h"

namespace braid {
namespace {

constexpr int kSkip = 77;

using testing::waitChild;

bool gpuInAChild() {
  pid_t pid = fork();
  if (pid == 0) _exit(cudatest::gpuCount() > 0 ? 0 : kSkip);
  return waitChild(pid, Deadline::after(60)) == 0;
}

/// Runs `body` (returns "" on success) as rank r of n in n forked processes.
void runProcesses(int n, const std::function<std::string(DeviceCommunicator&)>& body) {
  std::vector<int> pipes(2 * n);
  for (int r = 0; r < n; ++r) ASSERT_EQ(pipe(&pipes[2 * r]), 0);
  std::vector<pid_t> pids;
  for (int r = 0; r < n; ++r) {
    pids.push_back(testing::forkChild([&, r] {
      int code = 0;
      try {
        UniqueId id;
        if (r == 0) {
          id = Communicator::uniqueId();
          for (int q = 1; q < n; ++q) {
            if (write(pipes[2 * q + 1], id.bytes.data(), id.bytes.size()) !=
                ssize_t(id.bytes.size()))
              _exit(3);
          }
        } else if (read(pipes[2 * r], id.bytes.data(), id.bytes.size()) !=
                   ssize_t(id.bytes.size())) {
          _exit(3);
        }
        Options options;
        options.timeoutSeconds = 30;
        Communicator host = Communicator::fromUniqueId(id, r, n, options);
        DeviceCommunicator dc = DeviceCommunicator::create(host, 0, options);
        std::string err = body(dc);
        dc.synchronize();
        if (!err.empty()) {
          fprintf(stderr, "%s", err.c_str());
          code = 1;
        }
      } catch (const std::exception& e) {
        fprintf(stderr, "rank %d: %s\n", r, e.what());
        code = 2;
      }
      return code;
    }));
  }
  const Deadline deadline = Deadline::after(240);
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(waitChild(pids[r], deadline), 0) << "rank " << r << " (its stderr says why)";
  }
  for (int fd : pipes) close(fd);
}

class DeviceProcesses : public ::testing::TestWithParam<int> {};

TEST_P(DeviceProcesses, EveryCollectiveTypeAndOpMatchesTheReference) {
  if (!gpuInAChild()) BRAID_SKIP_NO_DEVICE("no CUDA device");
  runProcesses(GetParam(), [](DeviceCommunicator& dc) {
    return cudatest::checkDeviceCollectives(dc, {1, 1001}, true) +
           cudatest::checkDeviceCollectives(dc, {300007}, false) +
           cudatest::checkDeviceExchanges(dc);
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, DeviceProcesses, ::testing::Values(2, 3, 4, 8));

}  // namespace
}  // namespace braid
