// The per-op cost of what every communicator keeps for diagnosis: the status board (always on)
// and the flight recorder (BRAID_FLIGHT_OPS), one thread, no contention.
//   build/bench/micro_record
#include <benchmark/benchmark.h>

#include <string>

#include "comm/detail/flight_recorder.h"
#include "comm/detail/status_board.h"
#include "common/ticks.h"

namespace {

void StatusBoardStartAndEnd(benchmark::State& state) {
  std::string why;
  auto board = braid::comm::StatusBoard::open("micro-record-bench", 0, 2, 1, &why);
  if (!board) {
    state.SkipWithError(why.c_str());
    return;
  }
  braid::comm::OpDesc d;
  d.count = 2;
  for (auto _ : state) {
    ++d.seq;
    board->started(d, braid::Algorithm::kRing);
    board->ended(d, true, d.issuedTick);
  }
}
BENCHMARK(StatusBoardStartAndEnd);

void FlightRecorderIssueStartEnd(benchmark::State& state) {
  braid::comm::FlightRecorder recorder(2000);
  braid::comm::OpDesc d;
  d.count = 2;
  for (auto _ : state) {
    ++d.seq;
    d.issuedTick = braid::readTick();  // as CommState::issue does
    d.recorded = recorder.issued(d);
    recorder.started(d, braid::Algorithm::kRing);
    recorder.ended(d, "");
  }
}
BENCHMARK(FlightRecorderIssueStartEnd);

}  // namespace

BENCHMARK_MAIN();
