// What the device piece engines (cuda_pieces.h, kernel_pieces.h) share: they are deferred (the
// runner moves at most one piece per lane per sweep and posts slots only after finish()), and
// their errors name the op through the runner attached once the communicator has one.
#pragma once

#include "comm/engine/program_runner.h"

namespace braid::comm::device {

class DevicePieces : public PieceEngine {
 public:
  const char* where() const override { return " on the device"; }
  /// The runner whose what() names the op in errors.
  void attach(const ProgramRunner* runner) { runner_ = runner; }

 protected:
  DevicePieces() : PieceEngine(true) {}
  const ProgramRunner* runner_ = nullptr;
};

}  // namespace braid::comm::device
