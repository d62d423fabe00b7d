// Where every rank of a communicator on this host stands, for the stuck-rank report. One small
// POSIX shared-memory segment per communicator and host (named by the job id and host key) with
// one record per rank,
// written only by its rank: at each op's start and end a few relaxed stores (its number, kind,
// size, algorithm, state, the last one completed, and the time-stamp counter the flight recorder
// read at the op's issue or end: the board reads no clock of its own on that path, so its cost is
// the stores alone), and only while it waits, once per idle period, what it waits for (the
// engine's text) and since when. Any rank reads every record (a seqlock per record), so a report
// names the rank that is behind and the op it stopped in, even while that rank is frozen. Ranks on
// other hosts are on their hosts' boards, whose lines the status server brings (status_server.h).
//
// A diagnostic: if the segment cannot be made, the communicator works without one (open()
// returns nullptr and the report says why). Internal to comm/. Thread-safe as described.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "braid/braid.hpp"
#include "comm/detail/op_plan.h"
#include "common/ticks.h"

namespace braid::comm {

/// One rank's line of a report, as a board reads it (and as the status server carries it).
struct StatusLine {
  int rank = -1;
  bool known = false;     ///< its record was read (else `text` says why not)
  uint64_t progress = 0;  ///< how far it got (comparable across hosts): the lowest is behind
  std::string text;       ///< "(pid 12): in allreduce #2 (...) for 3.0 s; ..." (no rank prefix)
};

class StatusBoard {
 public:
  /// The board `name` (the job id and host) for `size` ranks (made by the first rank to open it), this rank's
  /// record reset. The last of the `localRanks` ranks of this host to open it removes its name
  /// (each keeps its mapping), so a rank killed later leaves nothing in /dev/shm. nullptr (and
  /// *why) when shared memory is not available.
  static std::unique_ptr<StatusBoard> open(const std::string& name, int rank, int size,
                                           int localRanks, std::string* why);
  ~StatusBoard();
  StatusBoard(const StatusBoard&) = delete;
  StatusBoard& operator=(const StatusBoard&) = delete;

  /// This rank's op `d` starts with `algorithm` (collectives; "for how long" counts from
  /// d.issuedTick); `d` must stay alive until ended(d). Then it ends (ok or not) at `tick` (0:
  /// the time is unknown, BRAID_FLIGHT_OPS=0). Called by the thread that runs the op.
  void started(const OpDesc& d, Algorithm algorithm) {
    ++ops_;
    current_ = &d;
    currentAlgorithm_ = algorithm;
  }
  /// The running op runs as `algorithm` after all (FlightRecorder::ranAs).
  void ranAs(Algorithm algorithm) { currentAlgorithm_ = algorithm; }
  void ended(const OpDesc& d, bool ok, int64_t tick) {
    if (!ok) return failed(d);
    const bool p2p = d.coll == Collective::kSend || d.coll == Collective::kRecv;
    if (!p2p && d.seq + 1 > doneColls_) {
      doneColls_ = d.seq + 1;
      endWords_.doneColls->store(doneColls_, std::memory_order_relaxed);
    }
    endWords_.endTick->store(tick, std::memory_order_relaxed);
    endWords_.ended->store(ops_, std::memory_order_release);
    current_ = nullptr;
  }
  /// What the running op waits for now (the engine's "waiting to receive from peer rank 2 on
  /// channel 0"), and since when: the op's description goes on the board with it.
  void waiting(const std::string& what);

  /// The lines of the ranks on this rank's host (hosts[q] == hosts[rank]; `hosts[r]` names rank
  /// r's host): what each runs or last completed, for how long, what it waits for.
  std::vector<StatusLine> lines(const std::vector<std::string>& hosts) const;
  /// The report: one line per rank 0..size-1 from `lines` (of any hosts), `missing(q)` for a
  /// rank without one; the known rank(s) with the lowest collective number marked "<- behind".
  static std::string format(int size, const std::vector<StatusLine>& lines,
                            const std::function<std::string(int)>& missing);
  /// format() of this host's lines, the other hosts' ranks listed as elsewhere.
  std::string report(const std::vector<std::string>& hosts) const;

  struct Record;  // the shared layout (status_board.cc)

 private:
  StatusBoard(int rank, int size, std::string name, void* base, size_t bytes);
  Record& record(int r) const;
  void failed(const OpDesc& d);  // ended(d, false, ...): described, then ended
  // Writes the op's description (and `text` with the time, when given) under the version;
  // `group`: a group of sends and receives rather than `d`.
  void describe(const OpDesc& d, Algorithm algorithm, bool failed, const std::string* text,
                bool group);

  int rank_, size_;
  std::string name_;
  void* base_;
  size_t bytes_;
  TickClock clock_;  // turns the records' ticks into seconds
  // The owner's own copies (never read by others): what it last wrote.
  Record* mine_;  // record(rank_)
  struct EndWords {  // the words of mine_ an op's end writes (inline above)
    std::atomic<uint64_t>* ended;
    std::atomic<int64_t>* endTick;
    std::atomic<uint64_t>* doneColls;
  } endWords_;
  uint64_t version_ = 0, ops_ = 0, doneColls_ = 0;
  const OpDesc* current_ = nullptr;  // the op started and not yet ended
  Algorithm currentAlgorithm_ = Algorithm::kAuto;
  OpDesc lastFailed_;  // the last op ended as failed (one failure is ended twice)
};

}  // namespace braid::comm
