// The one driver behind every *_perf binary: parse flags, join the job, sweep sizes x types x
// ops x roots, time out-of-place and in-place runs, validate, print nccl-tests' table, write JSON.
#pragma once

#include "bench/format/colls.h"
#include "braid/braid.hpp"

namespace braid::bench {

/// The collective under test: its descriptor plus how to run it with each API. `root` is ignored
/// where the collective has none; `op` where it has none.
struct CollRunner {
  const CollInfo& info;
  /// One op with the blocking API.
  void (*run)(Communicator& comm, const void* send, void* recv, size_t count, DataType type,
              RedOp op, int root);
  /// One op with the non-blocking API.
  Request (*start)(Communicator& comm, const void* send, void* recv, size_t count, DataType type,
                   RedOp op, int root);
};

/// The whole program; returns the exit code: 0 on success, 1 when any element was wrong or an
/// error happened (its message, naming the rank, goes to stderr), 2 on bad flags.
int benchMain(int argc, char** argv, const CollRunner& runner);
/// The same for one of the five collectives (runners.cc).
int benchMain(int argc, char** argv, Collective coll);

}  // namespace braid::bench
