// The host executor and a peer that posted its last message and left: the message becomes visible
// only together with the peer's death (the worst interleaving: it posts and exits between this
// rank's last look and its liveness check). The receive must still complete with the data; a
// receive the departed peer never posted must fail naming the peer.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <vector>

#include "comm/engine/executor.h"
#include "comm/engine/header.h"
#include "comm/exec/host_pieces.h"

namespace braid::comm {
namespace {

// Rank 0 of two; peer 1's messages (channel 0) appear only once peerAlive(1) has said "gone".
class DepartingPeerEndpoint final : public transport::Endpoint {
 public:
  class Recv final : public transport::RecvChannel {
   public:
    explicit Recv(DepartingPeerEndpoint* ep) : ep_(ep) {}
    const void* tryPeek(size_t* bytes, transport::MessageMeta* meta) override {
      if (!ep_->gone_ || next_ >= ep_->messages_.size()) return nullptr;
      *bytes = ep_->messages_[next_].size();
      *meta = ep_->meta_;
      return ep_->messages_[next_].data();
    }
    void release() override { ++next_; }
    int peer() const override { return 1; }

   private:
    DepartingPeerEndpoint* ep_;
    size_t next_ = 0;
  };
  class Send final : public transport::SendChannel {
   public:
    void* tryAcquire() override { return nullptr; }
    void post(size_t, const transport::MessageMeta&) override {}
    size_t slotBytes() const override { return 0; }
    int peer() const override { return 1; }
  };

  DepartingPeerEndpoint(std::vector<std::vector<char>> messages, transport::MessageMeta meta)
      : messages_(std::move(messages)), meta_(meta), recv_(this) {}

  int rank() const override { return 0; }
  int size() const override { return 2; }
  transport::Kind peerKind(int) const override { return transport::Kind::kShm; }
  int channels() const override { return 1; }
  transport::SendChannel& send(int, int) override { return send_; }
  transport::RecvChannel& recv(int, int) override { return recv_; }
  uint32_t prepareSleep() override { return 0; }
  void wake() override {}
  void sleep(uint32_t, Clock::time_point until) override {
    std::this_thread::sleep_until(std::min(until, Clock::now() + std::chrono::milliseconds(1)));
  }
  bool peerAlive(int peer) override {
    if (peer != 1) return true;
    gone_ = true;  // it posted, then died: both are seen from here on
    return false;
  }
  void signalAbort(const std::string&) override {}
  std::optional<std::pair<int, std::string>> peerAbort() override { return std::nullopt; }

 private:
  std::vector<std::vector<char>> messages_;
  transport::MessageMeta meta_;
  bool gone_ = false;
  Recv recv_;
  Send send_;
};

struct RecvRun {
  std::vector<float> out;
  ExecArgs args;
  RankProgram program;
};

// recv of `count` floats from peer 1 in pieces of `perPiece`.
RecvRun recvFromPeer(size_t count, size_t perPiece) {
  RecvRun r;
  r.out.assign(count, -1.0f);
  r.args.output = r.out.data();
  r.args.dtype = DataType::kFloat32;
  r.args.elemsPerPiece = perPiece;
  r.args.timeoutSeconds = 5;
  r.args.called = Collective::kRecv;
  r.args.header.coll = Collective::kSend;
  r.args.header.family = Algorithm::kOneShot;
  r.args.header.dtype = DataType::kFloat32;
  r.args.header.count = count;
  r.args.header.pieceBytes = static_cast<uint32_t>(perPiece * sizeof(float));
  Step step;
  step.prim = Prim::kRecv;
  step.recvPeer = 1;
  step.dst = {Buf::kOutput, 0};
  step.count = count;
  r.program.lanes.push_back(Lane{{step}});
  return r;
}

std::vector<char> piece(size_t first, size_t n) {
  std::vector<char> bytes(n * sizeof(float));
  for (size_t i = 0; i < n; ++i) {
    float v = float(first + i) + 0.5f;
    std::memcpy(bytes.data() + i * sizeof(float), &v, sizeof v);
  }
  return bytes;
}

TEST(DepartedPeer, WhatItPostedBeforeLeavingIsStillReceived) {
  RecvRun r = recvFromPeer(10, 4);  // pieces of 4, 4 and 2
  DepartingPeerEndpoint ep({piece(0, 4), piece(4, 4), piece(8, 2)}, encodeHeader(r.args.header));
  std::atomic<bool> aborted{false};
  Executor exec(ep, aborted, false, std::make_unique<HostPieces>());
  exec.run(r.program, r.args);
  for (size_t i = 0; i < r.out.size(); ++i) EXPECT_EQ(r.out[i], float(i) + 0.5f) << "element " << i;
}

TEST(DepartedPeer, WhatItNeverPostedFailsNamingIt) {
  RecvRun r = recvFromPeer(10, 4);
  DepartingPeerEndpoint ep({piece(0, 4)}, encodeHeader(r.args.header));  // 2 pieces missing
  std::atomic<bool> aborted{false};
  Executor exec(ep, aborted, false, std::make_unique<HostPieces>());
  try {
    exec.run(r.program, r.args);
    FAIL() << "the receive completed without the peer's last pieces";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kRemoteError) << e.what();
    EXPECT_NE(std::string(e.what()).find("peer rank 1 is gone"), std::string::npos) << e.what();
  }
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(r.out[i], float(i) + 0.5f) << "element " << i;
}

}  // namespace
}  // namespace braid::comm
