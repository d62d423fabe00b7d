// The point-to-point links of a parameter-server job: one 2-rank communicator per (server,
// worker) pair. braid breaks a whole communicator at its first failure, so a worker that dies
// must break nothing but its own links: the servers go on over the others (README.md).
#pragma once

#include <map>
#include <memory>
#include <string>

#include "braid/braid.hpp"
#include "braid/store.hpp"
#include "trainer/ps/layout.h"
#include "trainer/ps/message.h"

namespace braid::trainer::ps {

/// The link between this rank and one peer (a server's to a worker, or a worker's to a server).
/// In the link's communicator the server is rank 0 and the worker rank 1.
class PsLink {
 public:
  PsLink(int self, int peer, Communicator comm, double timeoutSeconds);

  int self() const { return self_; }
  int peer() const { return peer_; }
  Request sendAsync(PsMessage& m);
  Request recvAsync(PsMessage& m);
  /// Waits for `r` until the link's timeout; rethrows a failure as Error naming this rank, the
  /// peer's rank, `op` and the message size (braid's own text speaks of link ranks 0 and 1).
  void wait(Request& r, const char* op, const PsMessage& m);
  /// The same message for an error `e` of this link.
  std::string describe(const Error& e, const char* op, size_t bytes) const;
  void abort() { comm_.abort(); }
  double timeoutSeconds() const { return timeout_; }

 private:
  int self_, peer_;
  Communicator comm_;
  double timeout_;
};

/// Every link of this rank: a server has one per worker, a worker one per server.
class PsLinks {
 public:
  /// Collective over `world` (all ranks healthy): rank 0 serves a TCP store on MASTER_ADDR (or
  /// 127.0.0.1) at a free port it broadcasts; every rank joins its pairs in (server, worker)
  /// order, so no two ranks wait for each other in a cycle; the store closes after a barrier.
  PsLinks(Communicator& world, const PsLayout& layout);

  PsLink& to(int peerRank) { return *links_.at(peerRank); }
  const std::map<int, std::unique_ptr<PsLink>>& all() const { return links_; }

 private:
  std::map<int, std::unique_ptr<PsLink>> links_;
};

}  // namespace braid::trainer::ps
