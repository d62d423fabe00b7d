#include "trainer/ps/layout.h"

namespace braid::trainer::ps {

ShardRange shardOf(size_t numParams, int servers, int server) {
  const size_t s = static_cast<size_t>(servers), i = static_cast<size_t>(server);
  const size_t base = numParams / s, extra = numParams % s;  // the first `extra` get one more
  ShardRange r;
  r.begin = i * base + (i < extra ? i : extra);
  r.end = r.begin + base + (i < extra ? 1 : 0);
  return r;
}

}  // namespace braid::trainer::ps
