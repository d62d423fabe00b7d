// The adaptive active window of a wait (comm/engine/active_window.h) and the count of ranks that
// share a machine's CPUs (create::machineShare), which together decide how a wait idles.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "comm/detail/create.h"
#include "comm/engine/active_window.h"

namespace braid {
namespace {

using comm::ActiveWindow;
using std::chrono::microseconds;

TEST(ActiveWindow, WaitsInsideTheWindowKeepIt) {
  ActiveWindow w(microseconds(2000), /*adapts=*/true);
  for (int i = 0; i < 100; ++i) w.ended(microseconds(10), /*slept=*/false);
  EXPECT_EQ(w.window(), microseconds(2000));
}

TEST(ActiveWindow, WaitsLongerThanAnyWindowShrinkItToTheFloor) {
  ActiveWindow w(microseconds(2000), /*adapts=*/true);
  w.ended(microseconds(8000), true);
  EXPECT_EQ(w.window(), microseconds(1000));
  w.ended(microseconds(8000), true);
  EXPECT_EQ(w.window(), microseconds(500));
  for (int i = 0; i < 40; ++i) w.ended(microseconds(8000), true);
  EXPECT_EQ(w.window(), ActiveWindow::kShortest);
}

TEST(ActiveWindow, ShortWaitsThatSleptGrowItBackToTheLongest) {
  ActiveWindow w(microseconds(2000), /*adapts=*/true);
  for (int i = 0; i < 40; ++i) w.ended(microseconds(8000), true);
  ASSERT_EQ(w.window(), ActiveWindow::kShortest);
  // A wait of 30 us slept past a 1 us window; the longest window would have caught it.
  int rounds = 0;
  while (w.window() < microseconds(2000) && rounds < 100) {
    w.ended(microseconds(30), true);
    ++rounds;
  }
  EXPECT_EQ(w.window(), microseconds(2000));
  EXPECT_LE(rounds, 12);  // doubling: 1 us to 2 ms in 11 steps
  w.ended(microseconds(2000), true);  // exactly the longest still counts as caught
  EXPECT_EQ(w.window(), microseconds(2000));
}

TEST(ActiveWindow, ZeroNeverSpins) {
  ActiveWindow w(microseconds(0), true);
  w.ended(microseconds(30), true);
  w.ended(microseconds(8000), true);
  EXPECT_EQ(w.window(), microseconds(0));
}

TEST(ActiveWindow, WithACoreOfItsOwnTheWindowStays) {
  ActiveWindow w(microseconds(2000), /*adapts=*/false);
  for (int i = 0; i < 40; ++i) w.ended(microseconds(8000), true);
  EXPECT_EQ(w.window(), microseconds(2000));
}

create::Meeting meetingOf(const std::vector<std::string>& hosts,
                          const std::vector<std::string>& machines,
                          const std::vector<std::string>& cpus) {
  create::Meeting m;
  m.hosts = hosts;
  for (size_t q = 0; q < hosts.size(); ++q) {
    topology::RankDescriptor d;
    d.host = hosts[q];
    d.machine = machines[q];
    d.cpus = cpus[q];
    m.descriptors.push_back(d);
  }
  return m;
}

TEST(MachineShare, NamespaceHostsOfOneMachineShareItsCores) {
  // 4 hosts x 2 ranks posing as separate hosts (BRAID_HOSTNAME), one kernel, 2 CPUs.
  std::vector<std::string> hosts, machines, cpus;
  for (int q = 0; q < 8; ++q) {
    hosts.push_back("h" + std::to_string(q / 2));
    machines.push_back("boot-1");
    cpus.push_back("0,1");
  }
  const auto m = meetingOf(hosts, machines, cpus);
  for (int r = 0; r < 8; ++r) {
    const auto share = create::machineShare(m, r);
    EXPECT_EQ(share.ranks, 8);
    EXPECT_EQ(share.cpus, 2);
  }
}

TEST(MachineShare, SeparateMachinesCountApart) {
  const auto m = meetingOf({"a", "a", "b", "b"}, {"boot-a", "boot-a", "boot-b", "boot-b"},
                           {"0", "1", "0", "1"});
  const auto share = create::machineShare(m, 2);
  EXPECT_EQ(share.ranks, 2);
  EXPECT_EQ(share.cpus, 2);  // one core each: not oversubscribed
}

TEST(MachineShare, BoundRanksAndUnknownMachines) {
  // mpirun binding one rank per core: 2 ranks, 2 CPUs.
  auto m = meetingOf({"a", "a"}, {"boot", "boot"}, {"0", "1"});
  EXPECT_EQ(create::machineShare(m, 0).cpus, 2);
  // A peer naming no machine (an older braid) counts by host.
  m = meetingOf({"a", "a", "b"}, {"", "boot", "boot"}, {"0", "0", "0"});
  EXPECT_EQ(create::machineShare(m, 0).ranks, 2);
  EXPECT_EQ(create::machineShare(m, 1).ranks, 3);  // rank 0 by host; rank 2 by machine
}

}  // namespace
}  // namespace braid
