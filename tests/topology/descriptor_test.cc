// Rank descriptors: the one-line form round-trips, and bad lines name the field.
#include <gtest/gtest.h>

#include <cstdlib>

#include "common/error.h"
#include "topology/topology.h"

namespace braid::topology {
namespace {

RankDescriptor sample() {
  RankDescriptor d;
  d.host = "node a=b%c/0e1f-boot id";
  d.hostname = "node a, #1 [x]";
  d.machine = "0e1f-boot id=%";
  d.cpus = "0,1,2,5";
  d.numa = 1;
  d.gpu = 3;
  d.packages = 2;
  d.numaNodes = 2;
  d.cores = 64;
  d.pus = 128;
  d.l2Bytes = 1 << 20;
  d.l3Bytes = 32u << 20;
  d.l3Count = 8;
  d.fromHwloc = true;
  d.devices.push_back({DeviceKind::kGpu, "NVIDIA H100 80GB HBM3", "0000:1b:00.0", 0, 0});
  d.devices.push_back({DeviceKind::kNic, "mlx5_0", "0000:2a:00.0", 1, 50});
  d.devices.push_back({DeviceKind::kNic, "eth,0;=%", "", -1, 1.25});
  d.devices.push_back({DeviceKind::kOther, "", "", -1, 0});
  return d;
}

TEST(Descriptor, RoundTrips) {
  RankDescriptor d = sample();
  std::string line = serializeDescriptor(d);
  EXPECT_EQ(line.find('\n'), std::string::npos);
  EXPECT_EQ(parseDescriptor(line), d);
  RankDescriptor empty;
  empty.host = "";
  EXPECT_EQ(parseDescriptor(serializeDescriptor(empty)), empty);
  RankDescriptor local = localDescriptor();
  EXPECT_EQ(parseDescriptor(serializeDescriptor(local)), local);
}

TEST(Descriptor, MachineIsTheKernelsWhateverTheHost) {
  ::setenv("BRAID_HOSTNAME", "posing-host", 1);
  const RankDescriptor posing = localDescriptor();
  ::unsetenv("BRAID_HOSTNAME");
  const RankDescriptor plain = localDescriptor();
  EXPECT_EQ(posing.host, "posing-host");
  EXPECT_NE(plain.host, posing.host);
  EXPECT_EQ(plain.machine, posing.machine);  // one kernel: one machine
  EXPECT_EQ(plain.machine, machineFingerprint());
  EXPECT_NE(plain.host.find(plain.machine), std::string::npos) << plain.host;
}

TEST(Descriptor, UnknownFieldsAreIgnored) {
  std::string line = serializeDescriptor(sample()) + " future_field=42";
  EXPECT_EQ(parseDescriptor(line), sample());
}

void expectFieldError(const std::string& line, const std::string& field) {
  try {
    parseDescriptor(line);
    ADD_FAILURE() << "no error for: " << line;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidUsage);
    EXPECT_NE(std::string(e.what()).find("field '" + field + "'"), std::string::npos) << e.what();
  }
}

TEST(Descriptor, BadLinesNameTheField) {
  expectFieldError("", "version");
  expectFieldError("braid-rank/9 host=a", "version");
  expectFieldError("braid-rank/1 hostname=x", "host");
  expectFieldError("braid-rank/1 host=a numa=x", "numa");
  expectFieldError("braid-rank/1 host=a cores=1.5", "cores");
  expectFieldError("braid-rank/1 host=a l3=-4", "l3");
  expectFieldError("braid-rank/1 host=a dev=gpu,x", "dev");
  expectFieldError("braid-rank/1 host=a dev=tpu,x,,0,0", "dev");
  expectFieldError("braid-rank/1 host=a dev=nic,x,,0,fast", "dev");
  expectFieldError("braid-rank/1 host=%ZZ", "host");
  expectFieldError("braid-rank/1 host=a novalue", "?");
  // Counts and indices within what a topology file takes (fuzz/corpus/topology_file/regress_*).
  expectFieldError("braid-rank/1 host=a pus=33554432", "pus");
  expectFieldError("braid-rank/1 host=a packages=-1", "packages");
  expectFieldError("braid-rank/1 host=a gpu=-2", "gpu");
}

TEST(Descriptor, GraphOfDescriptorsDumpsToALoadableFile) {
  RankDescriptor a = parseDescriptor("braid-rank/1 host=a pus=16777216 cores=0 gpu=16777216");
  RankDescriptor b = sample();
  ClusterGraph g = buildGraph({a, b, a});
  EXPECT_EQ(parseGraph(formatGraph(g)), g);
}

}  // namespace
}  // namespace braid::topology
