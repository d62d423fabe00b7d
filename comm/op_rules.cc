#include "comm/detail/op_rules.h"

#include <cstdint>

namespace braid::comm {

Collective shapeOf(Collective coll) {
  return isScheduled(coll) ? coll : Collective::kAllReduce;
}

bool needsCompletionExchange(Collective coll) { return isRooted(coll); }

bool overlaps(const void* a, size_t aBytes, const void* b, size_t bBytes) {
  auto pa = reinterpret_cast<uintptr_t>(a), pb = reinterpret_cast<uintptr_t>(b);
  return pa < pb + bBytes && pb < pa + aBytes;
}

void bufferCounts(Collective coll, size_t count, int size, size_t* in, size_t* out) {
  *in = *out = count;
  if (coll == Collective::kReduceScatter) *in = count * size;
  if (coll == Collective::kAllGather) *out = count * size;
}

bool isInPlace(Collective coll, const void* input, const void* output, size_t count, int rank,
               size_t elemBytes) {
  const char* in = static_cast<const char*>(input);
  const char* out = static_cast<const char*>(output);
  switch (coll) {
    case Collective::kReduceScatter:
      return in + rank * count * elemBytes == out;
    case Collective::kAllGather:
      return out + rank * count * elemBytes == in;
    default:
      return in == out;
  }
}

}  // namespace braid::comm
