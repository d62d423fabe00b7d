// What a parameter server and a worker both know about the run, set up collectively first.
#pragma once

#include <cstdint>
#include <cstdio>

#include "braid/braid.hpp"
#include "trainer/ps/layout.h"
#include "trainer/ps/links.h"
#include "trainer/train/options.h"

namespace braid::trainer::ps {

struct PsContext {
  Communicator& world;  ///< used only while every rank is alive: setup, and servers among them
  const TrainOptions& options;
  PsLayout layout;
  PsLinks& links;
  std::FILE* out;  ///< rank 0's console (nullptr elsewhere)
  size_t numParams = 0;
  uint64_t layoutHash = 0;      ///< ParamStore::layoutHash() of the model
  int64_t trainSamples = 0;     ///< after --limit-train
  int64_t batchesPerEpoch = 0;  ///< each worker's (= a DDP rank's with as many ranks as workers)
  int64_t startPosition = 0;    ///< batches each worker has done before (a resumed run: > 0)

  int rank() const { return world.rank(); }
  bool async() const { return options.psMode == "async"; }
};

}  // namespace braid::trainer::ps
