#include "comm/detail/op_rules.h"

#include <cstdint>

namespace braid::comm {

Collective shapeOf(Collective coll) {
  if (coll == Collective::kAllToAllv) return Collective::kAllToAll;
  return isScheduled(coll) ? coll : Collective::kAllReduce;
}

int completionExchanges(Collective coll) {
  if (coll == Collective::kAllToAllv) return 2;
  return isRooted(coll) ? 1 : 0;
}

bool overlaps(const void* a, size_t aBytes, const void* b, size_t bBytes) {
  auto pa = reinterpret_cast<uintptr_t>(a), pb = reinterpret_cast<uintptr_t>(b);
  return pa < pb + bBytes && pb < pa + aBytes;
}

void bufferCounts(Collective coll, size_t count, int size, size_t* in, size_t* out) {
  *in = *out = count;
  if (coll == Collective::kReduceScatter || coll == Collective::kScatter ||
      coll == Collective::kAllToAll)
    *in = count * size;
  if (coll == Collective::kAllGather || coll == Collective::kGather ||
      coll == Collective::kAllToAll)
    *out = count * size;
}

bool isInPlace(Collective coll, const void* input, const void* output, size_t count, int rank,
               size_t elemBytes) {
  const char* in = static_cast<const char*>(input);
  const char* out = static_cast<const char*>(output);
  switch (coll) {
    case Collective::kReduceScatter:
    case Collective::kScatter:
      return in + rank * count * elemBytes == out;
    case Collective::kAllGather:
    case Collective::kGather:
      return out + rank * count * elemBytes == in;
    default:
      return in == out;
  }
}

}  // namespace braid::comm
