// What the end-to-end tests of braid-train --strategy ps share: their command lines, on the
// trainer's test runs (tests/trainer/support/train_runs.h).
#pragma once

#include <string>

#include "tests/trainer/support/train_runs.h"

namespace braid::trainer::testruns {

class PsRun : public TrainRunTest {
 protected:
  /// braid-train with one BLAS thread on `ranks` ranks (1: without a launcher); `launcher` adds
  /// braidrun flags.
  static std::string train(int ranks, const std::string& args, const std::string& launcher = "") {
    return trainCommand(ranks, "--threads 1 " + args, launcher);
  }
};

}  // namespace braid::trainer::testruns
