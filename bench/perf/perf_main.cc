// main() of every *_perf binary: CMake compiles it once per collective with BRAID_PERF_COLLECTIVE
// set to that collective's enumerator (kAllReduce, kReduceScatter, ...).
#include "bench/perf/driver.h"

int main(int argc, char** argv) {
  return braid::bench::benchMain(argc, argv, braid::Collective::BRAID_PERF_COLLECTIVE);
}
