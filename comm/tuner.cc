#include "comm/tuner.h"

#include "common/error.h"

namespace braid::comm {
namespace {

// Below this many bytes per peer the one-exchange direct schedule beats the 2(n-1)-step ring
// (measured on 2..16 ranks over shm; see bench/RESULTS.md).
constexpr size_t kDirectMaxBytes = 32 << 10;

Family familyOf(Algorithm algo) {
  switch (algo) {
    case Algorithm::kRing:
      return Family::kRing;
    case Algorithm::kOneShot:
      return Family::kDirect;
    case Algorithm::kChain:
      return Family::kChain;
    case Algorithm::kTree:
      return Family::kTree;
    case Algorithm::kHier:
      return Family::kHier;
    case Algorithm::kAuto:
      break;
  }
  return Family::kRing;
}

}  // namespace

size_t directBytesPerPeer(Shape shape, size_t inputBytes, int nranks) {
  return shape == Shape::kReduceScatter ? inputBytes / nranks : inputBytes;
}

Choice choose(const TunerConfig& config, Shape shape, size_t inputBytes) {
  const size_t perPeer = directBytesPerPeer(shape, inputBytes, config.nranks);
  const size_t directCapacity = config.slotBytes * config.slots;
  Choice choice;
  choice.lanes = config.channels;
  if (config.forced != Algorithm::kAuto) {
    choice.family = familyOf(config.forced);
    BRAID_ENFORCE(
        familySupports(choice.family, shape), ErrorCode::kInvalidUsage,
        "algorithm '{}' (BRAID_ALGO) cannot run {}; choose one of: {}",
        algorithmName(config.forced), shapeName(shape),
        shape == Shape::kBroadcast || shape == Shape::kReduce ? "chain, oneshot" : "ring, oneshot");
    BRAID_ENFORCE(choice.family != Family::kDirect || perPeer <= directCapacity,
                  ErrorCode::kInvalidUsage,
                  "algorithm 'oneshot' (BRAID_ALGO) moves at most {} bytes per peer (slots x "
                  "chunk); this {} needs {}",
                  directCapacity, shapeName(shape), perPeer);
  } else if (config.nranks == 1 || perPeer <= std::min(kDirectMaxBytes, directCapacity)) {
    choice.family = Family::kDirect;
  } else {
    choice.family =
        shape == Shape::kBroadcast || shape == Shape::kReduce ? Family::kChain : Family::kRing;
  }
  if (choice.family == Family::kDirect) choice.lanes = 1;
  return choice;
}

}  // namespace braid::comm
