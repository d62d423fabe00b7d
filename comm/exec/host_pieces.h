// The piece engine of host memory: copies and reduces each piece at once with the CPU kernels
// (kernels/kernels.h), for the one engine (comm/engine/executor.h).
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "comm/engine/program_runner.h"

namespace braid::comm {

/// Whether the host engine fills outgoing slots with streaming stores (BRAID_STREAM_SLOTS).
enum class SlotStreaming : uint8_t {
  kAuto,    ///< when the receiver's core is far (Piece::receiverLineNanos > kFarLineNanos)
  kNever,   ///< "0"
  kAlways,  ///< "1": every sending piece, whatever its size (how the tests drive that path)
};

/// A receiver whose lines take longer than this to arrive shares no cache with this core: on the
/// dev VM ~25-45 ns with a shared L3, ~150 ns across dies (transport/line_latency.h).
constexpr uint32_t kFarLineNanos = 100;
/// Under kAuto, pieces smaller than this are filled with ordinary stores whatever the receiver: a
/// few lines cross as fast either way, and the receiver of a small message may be polling them
/// already.
constexpr size_t kStreamSlotMinBytes = 4096;

/// Moves a piece now; results bound for a large output are formed in cache and streamed out, and
/// payloads bound for a far receiver are streamed into their slot (see SlotStreaming).
/// `deferred`: the runner drives it as it drives the device engine (one piece per lane per
/// sweep, slots posted and released only after finish()), so the host tests check that protocol
/// on machines without a GPU (BRAID_DEFERRED_PIECES=1; the memory moves at once either way).
class HostPieces final : public PieceEngine {
 public:
  explicit HostPieces(bool deferred = false, SlotStreaming slots = SlotStreaming::kAuto)
      : PieceEngine(deferred), slotStreaming_(slots) {}
  void move(const Piece& piece, const ExecArgs& args) override;

  /// Whether `piece`'s slot payload is written with streaming stores.
  bool streamsSlot(const Piece& piece) const;

 private:
  /// A sending prim's piece whose slot payload is streamed: the result is formed in scratch
  /// (in cache) and copied into the slot, and into the output where the prim writes one.
  void moveStreamingSlot(const Piece& piece, const ExecArgs& args);

  SlotStreaming slotStreaming_;
  std::vector<char> scratch_;  // one piece, for results that are streamed to the output
};

/// BRAID_STREAM_SLOTS: unset or "auto", "0" or "1"; anything else is kInvalidUsage naming it.
SlotStreaming slotStreamingFromEnv();

}  // namespace braid::comm
