#include "trainer/ps/message.h"

namespace braid::trainer::ps {

const char* psKindName(PsKind kind) {
  switch (kind) {
    case PsKind::kPull:
      return "pull";
    case PsKind::kPush:
      return "push";
    case PsKind::kEpochStats:
      return "epoch stats";
    case PsKind::kDone:
      return "done";
    case PsKind::kServerLost:
      return "server lost";
    case PsKind::kParams:
      return "parameters";
    case PsKind::kRejected:
      return "rejected";
    case PsKind::kServerFailed:
      return "server failed";
  }
  return "unknown";
}

}  // namespace braid::trainer::ps
