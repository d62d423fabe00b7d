// Argument checks and planning of device collectives, with a mock pointer classifier (no GPU):
// which buffers are accepted, what the errors say, and that plans match the host path's.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "comm/detail/op_rules.h"
#include "comm/device/gather_kv.h"
#include "comm/device/op.h"
#include "comm/device/pointer.h"
#include "comm/device/ticket_order.h"
#include "comm/engine/header.h"

namespace braid::comm::device {
namespace {

/// Classifies by address range: [0x1000, 0x2000) host, [0x10000, 0x20000) pinned,
/// [0x100000, 0x200000) device 0, [0x200000, 0x300000) device 1, [0x300000, 0x400000) managed.
class MockClassifier final : public PointerClassifier {
 public:
  PointerInfo classify(const void* p) const override {
    const auto a = reinterpret_cast<uintptr_t>(p);
    if (a >= 0x100000 && a < 0x200000) return {MemoryKind::kDevice, 0};
    if (a >= 0x200000 && a < 0x300000) return {MemoryKind::kDevice, 1};
    if (a >= 0x300000 && a < 0x400000) return {MemoryKind::kManaged, -1};
    if (a >= 0x10000 && a < 0x20000) return {MemoryKind::kHostPinned, -1};
    return {MemoryKind::kHost, -1};
  }
};

void* at(uintptr_t a) { return reinterpret_cast<void*>(a); }

DeviceOp allReduce(uintptr_t in, uintptr_t out, size_t count) {
  DeviceOp d;
  d.coll = Collective::kAllReduce;
  d.input = at(in);
  d.output = at(out);
  d.count = count;
  return d;
}

std::string invalidUsage(const DeviceOp& d, int rank, int size, int device) {
  try {
    validateOp(d, rank, size, device, MockClassifier());
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidUsage) << e.what();
    return e.what();
  }
  return "";
}

TEST(DeviceArgs, AcceptsDeviceAndManagedBuffers) {
  MockClassifier m;
  EXPECT_NO_THROW(validateOp(allReduce(0x100000, 0x140000, 1000), 0, 2, 0, m));
  EXPECT_NO_THROW(validateOp(allReduce(0x100000, 0x100000, 1000), 1, 2, 0, m)) << "in-place";
  EXPECT_NO_THROW(validateOp(allReduce(0x300000, 0x340000, 1000), 0, 2, 1, m)) << "managed";
  EXPECT_NO_THROW(validateOp(allReduce(0x200000, 0x240000, 1000), 0, 2, 1, m));
  EXPECT_NO_THROW(validateOp(allReduce(0, 0, 0), 0, 2, 0, m)) << "count 0 takes null buffers";
}

TEST(DeviceArgs, RejectsHostMemoryNamingTheBuffer) {
  std::string msg = invalidUsage(allReduce(0x1000, 0x140000, 100), 3, 4, 0);
  EXPECT_NE(msg.find("rank 3"), std::string::npos) << msg;
  EXPECT_NE(msg.find("send buffer of 400 bytes is host memory"), std::string::npos) << msg;
  msg = invalidUsage(allReduce(0x100000, 0x10000, 100), 0, 4, 0);
  EXPECT_NE(msg.find("receive buffer of 400 bytes is pinned host memory"), std::string::npos)
      << msg;
}

TEST(DeviceArgs, RejectsAnotherDevicesMemory) {
  std::string msg = invalidUsage(allReduce(0x200000, 0x240000, 10), 0, 2, 0);
  EXPECT_NE(msg.find("is on CUDA device 1, but this communicator uses device 0"), std::string::npos)
      << msg;
}

TEST(DeviceArgs, RejectsNullOverlapRootPeerAndTypes) {
  EXPECT_NE(invalidUsage(allReduce(0, 0x140000, 10), 0, 2, 0).find("send buffer is null"),
            std::string::npos);
  EXPECT_NE(invalidUsage(allReduce(0x100000, 0x100004, 10), 0, 2, 0).find("overlap"),
            std::string::npos);
  DeviceOp b = allReduce(0x100000, 0x140000, 10);
  b.coll = Collective::kBroadcast;
  b.root = 2;
  EXPECT_NE(invalidUsage(b, 0, 2, 0).find("root 2 is outside 0..1"), std::string::npos);
  DeviceOp s = allReduce(0x100000, 0, 10);
  s.coll = Collective::kSend;
  s.root = 1;
  EXPECT_NE(invalidUsage(s, 1, 2, 0).find("peer 1 must be another rank"), std::string::npos);
  DeviceOp t = allReduce(0x100000, 0x140000, 10);
  t.dtype = static_cast<DataType>(42);
  EXPECT_NE(invalidUsage(t, 0, 2, 0).find("unknown data type"), std::string::npos);
  t = allReduce(0x100000, 0x140000, 10);
  t.op = static_cast<RedOp>(9);
  EXPECT_NE(invalidUsage(t, 0, 2, 0).find("unknown reduction op"), std::string::npos);
  t = allReduce(0x100000, 0x140000, size_t(1) << 62);
  EXPECT_NE(invalidUsage(t, 0, 2, 0).find("overflows"), std::string::npos);
  t = allReduce(0x100000, 0x140000, 10);
  t.coll = Collective::kBarrier;
  EXPECT_NE(invalidUsage(t, 0, 2, 0).find("barrier"), std::string::npos);
}

TEST(DeviceArgs, OnlyTheBuffersARankUsesAreChecked) {
  MockClassifier m;
  DeviceOp b = allReduce(0x1000, 0x140000, 10);  // host send buffer, not read off the root
  b.coll = Collective::kBroadcast;
  b.root = 0;
  EXPECT_NO_THROW(validateOp(b, 1, 2, 0, m));
  EXPECT_FALSE(invalidUsage(b, 0, 2, 0).empty());
  DeviceOp r = allReduce(0x100000, 0x1000, 10);  // host receive buffer, written only at the root
  r.coll = Collective::kReduce;
  r.root = 0;
  EXPECT_NO_THROW(validateOp(r, 1, 2, 0, m));
  EXPECT_FALSE(invalidUsage(r, 0, 2, 0).empty());
  DeviceOp g = allReduce(0x100000 + 3 * 40, 0x100000, 10);  // allGather in place for rank 3
  g.coll = Collective::kAllGather;
  EXPECT_TRUE(isInPlace(g, 3));
  EXPECT_NO_THROW(validateOp(g, 3, 4, 0, m));
}

TEST(DevicePlan, MatchesTheHostHeaderAndBuildsPrograms) {
  TunerConfig tuner;
  tuner.nranks = 4;
  tuner.slotBytes = 1 << 20;
  tuner.slots = 4;
  tuner.channels = 2;
  for (Collective c : {Collective::kAllReduce, Collective::kReduceScatter, Collective::kAllGather,
                       Collective::kBroadcast, Collective::kReduce}) {
    DeviceOp d = allReduce(0x100000, 0x180000, 1001);
    d.coll = c;
    d.root = (c == Collective::kBroadcast || c == Collective::kReduce) ? 1 : -1;
    d.op = RedOp::kMax;
    d.seq = 7;
    comm::Plan p = comm::planOp(d, 2, 4, tuner, 1 << 20, 5.0, /*streamBytes=*/SIZE_MAX);
    EXPECT_FALSE(p.isP2p);
    EXPECT_FALSE(p.args.streamOutput) << "device outputs are never streamed";
    EXPECT_EQ(p.args.header.seq, 7u);
    EXPECT_EQ(p.args.header.coll, c);
    EXPECT_EQ(p.args.header.count, 1001u);
    EXPECT_EQ(p.args.header.pieceBytes, 1u << 20);
    EXPECT_EQ(p.args.header.family, p.spec.family);
    EXPECT_EQ(p.args.header.root, d.root);
    EXPECT_EQ(p.args.header.op, reduces(c) ? RedOp::kMax : RedOp::kSum);
    EXPECT_EQ(p.args.elemsPerPiece, (1u << 20) / 4);
    EXPECT_EQ(p.args.timeoutSeconds, 5.0);
    EXPECT_FALSE(buildProgram(p.spec, 2).lanes.empty()) << collectiveName(c);
  }
  DeviceOp s = allReduce(0x100000, 0, 5);
  s.coll = Collective::kRecv;
  s.root = 3;
  comm::Plan p = comm::planOp(s, 2, 4, tuner, 1 << 20, 5.0, SIZE_MAX);
  EXPECT_EQ(p.args.header.coll, Collective::kSend) << "p2p headers say send on both sides";
  ASSERT_TRUE(p.isP2p);
  ASSERT_EQ(p.p2p.lanes.size(), 1u);
  EXPECT_EQ(p.p2p.lanes[0].steps[0].prim, Prim::kRecv);
  EXPECT_EQ(p.p2p.lanes[0].steps[0].recvPeer, 3);
}

TEST(DeviceTickets, StreamsPassOnlyTicketsWhosePredecessorsFinished) {
  InOrderTickets t;
  EXPECT_EQ(t.finish(1), 1u);
  // A failure ends the queued ops (3, 4) before the running one (2) reports.
  EXPECT_EQ(t.finish(3), 1u) << "2 may still write its output";
  EXPECT_EQ(t.finish(4), 1u);
  EXPECT_EQ(t.finish(2), 4u);
  EXPECT_EQ(t.finish(6), 4u);
  EXPECT_EQ(t.finish(5), 6u);
  EXPECT_EQ(t.done(), 6u);
  EXPECT_EQ(t.finish(7), 7u);
}

TEST(DeviceRendezvous, PackUnpackRoundTripsAndRejectsGarbage) {
  std::map<std::string, std::string> in = {
      {"job/cuda_ipc/0", std::string("a:b\0c", 5)}, {"k", ""}, {"", "v"}};
  std::map<std::string, std::string> out;
  GatherKeyValue::unpack(GatherKeyValue::pack(in), &out);
  EXPECT_EQ(out, in);
  for (const char* bad : {"3:ab", "x:a1:b", "1:a", "99999999999999:a"}) {
    std::map<std::string, std::string> m;
    EXPECT_THROW(GatherKeyValue::unpack(bad, &m), Error) << bad;
  }
}

TEST(DevicePointer, KindNames) {
  EXPECT_STREQ(memoryKindName(MemoryKind::kDevice), "device memory");
  EXPECT_STREQ(memoryKindName(MemoryKind::kManaged), "managed memory");
}

}  // namespace
}  // namespace braid::comm::device
