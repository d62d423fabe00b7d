#include <cstring>

#include "braid/braid.hpp"

namespace braid {

const char* algorithmName(Algorithm algo) {
  switch (algo) {
    case Algorithm::kAuto:
      return "auto";
    case Algorithm::kRing:
      return "ring";
    case Algorithm::kOneShot:
      return "oneshot";
    case Algorithm::kChain:
      return "chain";
    case Algorithm::kTree:
      return "tree";
    case Algorithm::kHier:
      return "hier";
  }
  return "?";
}

bool parseAlgorithm(const std::string& name, Algorithm* out) {
  static const std::pair<const char*, Algorithm> kNames[] = {
      {"auto", Algorithm::kAuto},       {"ring", Algorithm::kRing},
      {"oneshot", Algorithm::kOneShot}, {"direct", Algorithm::kOneShot},
      {"chain", Algorithm::kChain},     {"tree", Algorithm::kTree},
      {"hier", Algorithm::kHier}};
  for (auto& [text, algo] : kNames) {
    if (strcasecmp(name.c_str(), text) == 0) {
      *out = algo;
      return true;
    }
  }
  return false;
}

const char* collectiveName(Collective coll) {
  switch (coll) {
    case Collective::kAllReduce:
      return "allreduce";
    case Collective::kReduceScatter:
      return "reducescatter";
    case Collective::kAllGather:
      return "allgather";
    case Collective::kBroadcast:
      return "broadcast";
    case Collective::kReduce:
      return "reduce";
    case Collective::kSend:
      return "send";
    case Collective::kRecv:
      return "recv";
    case Collective::kBarrier:
      return "barrier";
  }
  return "?";
}

}  // namespace braid
