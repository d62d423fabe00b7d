// CPU-side logic of the CUDA IPC transport: the slot ring state machine (in plain memory, one
// and two threads), the control segment layout, and peer record serialization.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <set>
#include <thread>
#include <vector>

#include "common/error.h"
#include "transport/cuda_ipc/control.h"
#include "transport/cuda_ipc/record.h"

namespace braid::transport::cuda_ipc {
namespace {

struct Ring {
  explicit Ring(uint32_t k) : descs(k), slots(k) {}
  RingControl control{};
  std::vector<SlotDesc> descs;
  uint32_t slots;
  RingSender sender() { return RingSender(&control, descs.data(), slots); }
  RingReceiver receiver() { return RingReceiver(&control, descs.data(), slots); }
};

MessageMeta meta(uint64_t v) {
  MessageMeta m;
  m.words[0] = v;
  m.words[3] = ~v;
  return m;
}

TEST(CudaIpcRing, EmptyRingHasNothingToPeekAndAllSlotsFree) {
  Ring r(4);
  auto s = r.sender();
  auto q = r.receiver();
  SlotDesc d;
  EXPECT_EQ(q.tryPeek(&d), -1);
  EXPECT_EQ(s.tryAcquire(), 0);
  EXPECT_EQ(s.tryAcquire(), 0) << "acquire before post returns the same slot";
}

TEST(CudaIpcRing, FillsKSlotsThenBlocksUntilReleased) {
  Ring r(3);
  auto s = r.sender();
  auto q = r.receiver();
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(s.tryAcquire(), i);
    s.post(100 + i, meta(i));
  }
  EXPECT_EQ(s.tryAcquire(), -1) << "all K slots in flight";
  SlotDesc d;
  ASSERT_EQ(q.tryPeek(&d), 0);
  EXPECT_EQ(d.bytes, 100u);
  EXPECT_EQ(d.meta.words[0], 0u);
  EXPECT_EQ(q.tryPeek(&d), 0) << "peek before release returns the same slot";
  EXPECT_EQ(s.tryAcquire(), -1);
  q.release();
  EXPECT_EQ(s.tryAcquire(), 0) << "the released slot comes back, in ring order";
  ASSERT_EQ(q.tryPeek(&d), 1);
  EXPECT_EQ(d.bytes, 101u);
}

TEST(CudaIpcRing, WrapsManyTimesInOrder) {
  Ring r(2);
  auto s = r.sender();
  auto q = r.receiver();
  for (uint64_t i = 0; i < 1000; ++i) {
    ASSERT_EQ(s.tryAcquire(), int64_t(i % 2));
    s.post(i, meta(i));
    SlotDesc d;
    ASSERT_EQ(q.tryPeek(&d), int64_t(i % 2));
    ASSERT_EQ(d.bytes, i);
    ASSERT_EQ(d.meta.words[3], ~i);
    q.release();
  }
  EXPECT_EQ(r.control.head, 1000u);
  EXPECT_EQ(r.control.tail, 1000u);
}

TEST(CudaIpcRing, TwoThreadsPassEveryMessageOnceInOrder) {
  Ring r(4);
  constexpr uint64_t kMessages = 20000;
  std::vector<uint64_t> payload(4);  // stands in for the device slots
  std::atomic<bool> failed{false};
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  std::thread producer([&] {
    auto s = r.sender();
    for (uint64_t i = 0; i < kMessages && !failed;) {
      int64_t slot = s.tryAcquire();
      if (slot < 0) {
        if (std::chrono::steady_clock::now() > deadline) failed = true;
        std::this_thread::yield();
        continue;
      }
      payload[slot] = i * 3;
      s.post(8, meta(i));
      ++i;
    }
  });
  auto q = r.receiver();
  for (uint64_t i = 0; i < kMessages && !failed;) {
    SlotDesc d;
    int64_t slot = q.tryPeek(&d);
    if (slot < 0) {
      if (std::chrono::steady_clock::now() > deadline) failed = true;
      std::this_thread::yield();
      continue;
    }
    if (d.meta.words[0] != i || payload[slot] != i * 3) {
      ADD_FAILURE() << "message " << i << ": got header " << d.meta.words[0] << ", payload "
                    << payload[slot];
      failed = true;
      break;
    }
    q.release();
    ++i;
  }
  producer.join();
  EXPECT_FALSE(failed) << "ring stalled";
}

TEST(CudaIpcLayout, RegionsAreDisjointAndAligned) {
  for (uint32_t n : {1u, 2u, 3u, 8u}) {
    Layout l;
    l.nranks = n;
    l.channels = 2;
    l.slots = 4;
    std::vector<char> mem(l.totalBytes() + 4096);
    void* base =
        reinterpret_cast<void*>((reinterpret_cast<uintptr_t>(mem.data()) + 4095) / 4096 * 4096);
    EXPECT_EQ(l.totalBytes() % 4096, 0u);
    EXPECT_GE(l.ringsOffset(), l.ranksOffset() + n * sizeof(RankControl));
    std::set<size_t> rings;
    for (uint32_t s = 0; s < n; ++s)
      for (uint32_t r = 0; r < n; ++r)
        for (int c = 0; c < 2; ++c) rings.insert(l.ring(s, r, c));
    EXPECT_EQ(rings.size(), size_t(n) * n * 2);
    EXPECT_EQ(*rings.rbegin(), l.ringCount() - 1);
    auto* lastDesc = l.descs(base, l.ringCount() - 1) + l.slots;
    EXPECT_LE(reinterpret_cast<char*>(lastDesc), static_cast<char*>(base) + l.totalBytes());
    EXPECT_EQ(reinterpret_cast<uintptr_t>(l.control(base, 1)) % 128, 0u);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(l.rank(base, 1)) % 64, 0u);
  }
}

TEST(CudaIpcInbox, OffsetsCoverEachSenderChannelSlotOnce) {
  PeerRecord r;
  r.rank = 2;
  r.nranks = 4;
  r.channels = 2;
  r.slots = 3;
  r.slotBytes = 256;
  std::set<uint64_t> seen;
  for (int s = 0; s < 4; ++s) {
    if (s == 2) continue;
    for (int c = 0; c < 2; ++c)
      for (int k = 0; k < 3; ++k) {
        uint64_t off = inboxOffset(r, s, c, k);
        EXPECT_EQ(off % 256, 0u);
        EXPECT_LT(off, inboxBytes(4, 2, 3, 256));
        seen.insert(off);
      }
  }
  EXPECT_EQ(seen.size(), 3u * 2 * 3);
  EXPECT_EQ(inboxBytes(1, 2, 3, 256), 0u);
}

PeerRecord sample() {
  PeerRecord r;
  r.rank = 3;
  r.nranks = 8;
  r.pid = 123456;
  r.processNonce = 0xdeadbeefcafef00dull;
  r.device = 1;
  r.channels = 2;
  r.slots = 4;
  r.slotBytes = 1 << 20;
  r.slotBase = 0x7f0000001000ull;
  for (size_t i = 0; i < r.handle.size(); ++i) r.handle[i] = static_cast<uint8_t>(i * 7 + 1);
  r.segment = "/braid-cipc-abc";
  return r;
}

TEST(CudaIpcRecord, RoundTrips) {
  const PeerRecord r = sample();
  const PeerRecord back = decodeRecord(encodeRecord(r), "rank 3");
  EXPECT_EQ(back.rank, r.rank);
  EXPECT_EQ(back.nranks, r.nranks);
  EXPECT_EQ(back.pid, r.pid);
  EXPECT_EQ(back.processNonce, r.processNonce);
  EXPECT_EQ(back.device, r.device);
  EXPECT_EQ(back.channels, r.channels);
  EXPECT_EQ(back.slots, r.slots);
  EXPECT_EQ(back.slotBytes, r.slotBytes);
  EXPECT_EQ(back.slotBase, r.slotBase);
  EXPECT_EQ(back.handle, r.handle);
  EXPECT_EQ(back.segment, r.segment);
  PeerRecord empty;
  EXPECT_EQ(decodeRecord(encodeRecord(empty), "x").segment, "");
}

void expectInternal(const std::string& text, const std::string& fragment) {
  try {
    decodeRecord(text, "rank 5");
    ADD_FAILURE() << "accepted: " << text.substr(0, 40);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInternal);
    EXPECT_NE(std::string(e.what()).find("rank 5"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(CudaIpcRecord, RejectsMalformedText) {
  const std::string good = encodeRecord(sample());
  expectInternal("", "not a cuda_ipc record");
  expectInternal("cipc0:" + good.substr(6), "not a cuda_ipc record");
  expectInternal(good.substr(0, good.size() / 2), "truncated");
  expectInternal(good + "00", "trailing");
  std::string bad = good;
  bad[10] = 'z';
  expectInternal(bad, "bad character");
}

TEST(CudaIpcRecord, ProcessNonceIsStableAndNonZero) {
  EXPECT_NE(processNonce(), 0u);
  EXPECT_EQ(processNonce(), processNonce());
}

}  // namespace
}  // namespace braid::transport::cuda_ipc
