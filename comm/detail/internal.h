// Creation of communicators from a given store: for ranks-as-threads tests and language bindings
// that bring their own rendezvous (PyTorch). Not part of the public API.
#pragma once

#include <memory>
#include <vector>

#include "braid/braid.hpp"
#include "comm/bootstrap/store.h"

namespace braid {

struct CommFactory {
  /// Collective over `size` ranks sharing `store` (keys are prefixed with `prefix`, so several
  /// communicators may share one store). `advertiseAddress` is where other hosts reach this rank.
  static Communicator fromStore(std::shared_ptr<bootstrap::Store> store, int rank, int size,
                                const Options& options, const std::string& prefix = "braid",
                                const std::string& advertiseAddress = "127.0.0.1");
  /// Node index per rank as the communicator recorded it at creation (for tests and tools).
  static std::vector<int> nodeOf(const Communicator& comm);
};

}  // namespace braid
