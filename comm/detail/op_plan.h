// One op plan for host and device calls: the call's description, the checks every call passes,
// its numbering, and its plan (executor arguments, message header, schedule spec chosen by the
// tuner, or the one-step point-to-point program). communicator.cc and comm/device/op.cc add only
// what is theirs (null buffers and the barrier; device pointers).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "braid/braid.hpp"
#include "comm/detail/tuner.h"
#include "comm/engine/program_runner.h"
#include "comm/schedule/schedule.h"

namespace braid::comm {

/// One call's arguments.
struct OpDesc {
  Collective coll = Collective::kAllReduce;
  const void* input = nullptr;
  void* output = nullptr;
  size_t count = 0;  ///< as the API takes it (recvCount for reduceScatter and scatter, sendCount
                     ///< for allGather and gather, per peer for allToAll); allToAllv: the
                     ///< elements this rank sends (it runs even at 0: its peers confirm with it)
  DataType dtype = DataType::kFloat32;
  RedOp op = RedOp::kSum;
  int root = -1;                   ///< broadcast/reduce root, or the peer of send/recv
  int tag = 0;                     ///< send/recv: matched in posting order, must agree
  bool anySource = false;          ///< recv from any source (root -1): matched by tag at run time
  uint64_t seq = 0;                ///< assigned at issue time
  uint64_t collectivesBefore = 0;  ///< send/recv: collectives issued before it
  uint64_t recorded = 0;           ///< its place in the flight recorder (1-based; 0: none)
  int64_t issuedTick = 0;          ///< readTick() at issue when recorded (0: no time taken)
  std::shared_ptr<const PeerLayout> layout =
      nullptr;  ///< allToAllv: this rank's counts and displacements
};

/// allToAllv's op: the four arrays (`size` entries each) copied into its layout; count = the
/// elements this rank sends. Throws kInvalidUsage naming the rank when an array is null.
OpDesc allToAllvOp(const void* in, const size_t* sendCounts, const size_t* sendDispls, void* out,
                   const size_t* recvCounts, const size_t* recvDispls, DataType type, int rank,
                   int size);

/// allToAllv's buffer extents in elements (the furthest end of any block; 0 when all counts are
/// 0). False when an end overflows.
bool layoutExtents(const PeerLayout& layout, size_t* inCount, size_t* outCount);

/// Whether this rank reads its input / writes its output for `d`.
bool readsInput(const OpDesc& d, int rank);
bool writesOutput(const OpDesc& d, int rank);

/// The checks of every call: data type, reduction op, byte size overflow, root or peer, and
/// allToAllv's layout (one entry per rank, the own block's send and receive counts equal, in
/// place only with equal send and receive layouts). Sets the buffers' byte sizes. Throws
/// kInvalidUsage naming rank, collective and size; touches nothing.
void validateOp(const OpDesc& d, int rank, int size, size_t* inBytes, size_t* outBytes);
/// Throws kInvalidUsage when this rank's send and receive buffers (both used, not null) overlap
/// without being in place. After the caller's own buffer checks.
void requireNoOverlap(const OpDesc& d, int rank, size_t inBytes, size_t outBytes);

/// Sequence numbers of one communicator: collectives in one count, send and recv per peer.
struct OpNumbering {
  explicit OpNumbering(int size = 0) : send(size, 0), recv(size, 0) {}
  uint64_t coll = 0;
  std::vector<uint64_t> send, recv;
  /// Recvs from any source, numbered apart (for records and errors only: the runner checks each
  /// recv against the count of recvs that started reading that peer, ProgramRunner::startRecv).
  uint64_t anyRecv = 0;
  /// Gives `d` its number (and, point-to-point, the collectives before it); returns the counter
  /// to advance once the op is accepted.
  uint64_t* number(OpDesc& d);
};

/// What the executor runs for one numbered op with count > 0, or a barrier (a one-byte max
/// all-reduce whose buffers the caller sets).
struct Plan {
  ExecArgs args;
  ScheduleSpec spec;  ///< collectives (program is built from it by the caller or planOp)
  RankProgram p2p;    ///< send/recv: one step on channel 0
  bool isP2p = false;
  size_t inBytes = 0;  ///< this rank's input buffer, for errors
};

/// Plans `d` as both paths do: `tuner` picks the family and lanes for collectives (spec.nodeOf
/// is the caller's to set); slotBytes is the transport's slot payload. Outputs of streamBytes or
/// more are streamed.
Plan planOp(const OpDesc& d, int rank, int size, const TunerConfig& tuner, size_t slotBytes,
            double timeoutSeconds, size_t streamBytes);

}  // namespace braid::comm
