// The messages between a parameter server and a worker: a fixed header followed by one shard of
// floats (gradients to the server, parameters back), so every message of a link has the same
// size and braid's point-to-point size checks hold.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

namespace braid::trainer::ps {

enum class PsKind : int64_t {
  // worker -> server
  kPull = 1,        ///< send me your shard (no update)
  kPush = 2,        ///< the payload is a gradient computed on parameters of `version`
  kEpochStats = 3,  ///< server 0 only: this worker's epoch results in `stats`
  kDone = 4,        ///< this worker has finished; no more messages
  kServerLost = 5,  ///< server rank `peer` is gone (the job must end)
  // server -> worker
  kParams = 11,        ///< the payload is the shard at `version`
  kRejected = 12,      ///< the gradient was too stale: the payload is the shard at `version`
  kServerFailed = 13,  ///< the server ends the job; the payload holds its error text
};

const char* psKindName(PsKind kind);

/// The fixed part of every message (112 bytes: a whole number of floats).
struct PsHeader {
  PsKind kind = PsKind::kPull;
  int64_t version = 0;    ///< push: the version its parameters came from; reply: the shard's
  int64_t staleness = 0;  ///< reply to a push: versions applied between pull and push
  int64_t epoch = 0;      ///< push: the sampler position after this batch (for checkpoints)
  int64_t batch = 0;
  int64_t peer = -1;     ///< kServerLost: the server's rank
  double stats[8] = {};  ///< kEpochStats: WorkerEpoch (epoch_collector.h)
};
static_assert(sizeof(PsHeader) % sizeof(float) == 0);

/// One message buffer: the header's bytes, then the shard.
class PsMessage {
 public:
  static constexpr size_t kHeaderFloats = sizeof(PsHeader) / sizeof(float);

  explicit PsMessage(size_t shardElems) : buf_(kHeaderFloats + shardElems) {}

  PsHeader header() const {
    PsHeader h;
    std::memcpy(static_cast<void*>(&h), buf_.data(), sizeof h);
    return h;
  }
  void setHeader(const PsHeader& h) { std::memcpy(buf_.data(), &h, sizeof h); }
  std::span<float> payload() { return std::span<float>(buf_).subspan(kHeaderFloats); }
  std::span<const float> payload() const {
    return std::span<const float>(buf_).subspan(kHeaderFloats);
  }
  /// Puts `text` into the payload (cut to its size, NUL-padded) / reads it back.
  void setText(const std::string& text) {
    std::span<float> p = payload();
    std::fill(p.begin(), p.end(), 0.0f);
    std::memcpy(p.data(), text.data(), std::min(text.size(), p.size_bytes()));
  }
  std::string text() const {
    std::span<const float> p = payload();
    const char* c = reinterpret_cast<const char*>(p.data());
    return std::string(c, strnlen(c, p.size_bytes()));
  }
  float* data() { return buf_.data(); }
  size_t floats() const { return buf_.size(); }
  size_t bytes() const { return buf_.size() * sizeof(float); }

 private:
  std::vector<float> buf_;
};

}  // namespace braid::trainer::ps
