// The flight recorder (comm/detail/flight_recorder.h): what it keeps, its JSON, and the dumps a
// failing communicator writes to BRAID_DUMP_DIR, merged by tools/trace/braid-trace, which must
// name the collective number where the ranks diverged and who called what.
#include "comm/detail/flight_recorder.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "tests/kit/communicators.h"

namespace braid {
namespace {

using comm::FlightRecorder;
using comm::OpDesc;

OpDesc coll(uint64_t seq, Collective c = Collective::kAllReduce) {
  OpDesc d;
  d.coll = c;
  d.count = 10 + seq;
  d.seq = seq;
  return d;
}

OpDesc p2p(Collective c, int peer, uint64_t seq) {
  OpDesc d;
  d.coll = c;
  d.root = peer;
  d.seq = seq;
  d.count = 3;
  return d;
}

// Issued as the communicator does: the op carries its place.
OpDesc issue(FlightRecorder& rec, OpDesc d) {
  d.recorded = rec.issued(d);
  return d;
}

TEST(FlightRecorder, KeepsTheLastNWithTheirStates) {
  FlightRecorder rec(3);
  std::vector<OpDesc> ops;
  for (uint64_t s = 0; s < 5; ++s) ops.push_back(issue(rec, coll(s)));
  rec.started(ops[3], Algorithm::kRing);
  rec.ended(ops[3], "");
  rec.started(ops[4], Algorithm::kOneShot);
  rec.ended(ops[4], "boom");
  rec.ended(ops[4], "");   // only the first end counts
  rec.ended(ops[0], "");   // long gone: ignored
  rec.ended(coll(2), "");  // never issued here (no place): ignored
  const auto entries = rec.entries();
  ASSERT_EQ(entries.size(), 3u);
  EXPECT_EQ(entries[0].desc.seq, 2u);
  EXPECT_EQ(entries[0].state, FlightRecorder::State::kIssued);
  EXPECT_EQ(entries[1].state, FlightRecorder::State::kCompleted);
  EXPECT_EQ(entries[1].algorithm, Algorithm::kRing);
  EXPECT_GT(entries[1].endedNs, 0);
  EXPECT_GE(entries[1].endedNs, entries[1].issuedNs);
  EXPECT_EQ(entries[2].state, FlightRecorder::State::kFailed);
  EXPECT_EQ(entries[2].error, "boom");
}

TEST(FlightRecorder, EachOpIsFoundByItsPlace) {
  FlightRecorder rec(10);
  issue(rec, coll(0));
  issue(rec, p2p(Collective::kSend, 1, 0));
  const OpDesc recv = issue(rec, p2p(Collective::kRecv, 1, 0));
  rec.ended(recv, "");
  const auto entries = rec.entries();
  EXPECT_EQ(entries[0].state, FlightRecorder::State::kIssued);  // collective #0: not it
  EXPECT_EQ(entries[1].state, FlightRecorder::State::kIssued);  // the send: not it
  EXPECT_EQ(entries[2].state, FlightRecorder::State::kCompleted);
}

TEST(FlightRecorder, CapacityZeroRecordsNothing) {
  FlightRecorder rec(0);
  const OpDesc d = issue(rec, coll(0));
  EXPECT_EQ(d.recorded, 0u);
  rec.ended(d, "x");
  EXPECT_EQ(rec.size(), 0u);
}

TEST(FlightRecorder, JsonIsValidAndEscapesErrors) {
  FlightRecorder rec(4);
  const OpDesc b = issue(rec, coll(7, Collective::kBroadcast));
  rec.ended(b, "rank 1: \"quoted\"\nsecond line\t\x01");
  issue(rec, p2p(Collective::kSend, 2, 5));
  const auto j = nlohmann::json::parse(rec.json(1, 3, "why \"it\" failed"));
  EXPECT_EQ(j["rank"], 1);
  EXPECT_EQ(j["size"], 3);
  EXPECT_EQ(j["reason"], "why \"it\" failed");
  ASSERT_EQ(j["entries"].size(), 2u);
  EXPECT_EQ(j["entries"][0]["coll"], "broadcast");
  EXPECT_EQ(j["entries"][0]["state"], "failed");
  EXPECT_EQ(j["entries"][0]["error"], "rank 1: \"quoted\"\nsecond line\t\x01");
  EXPECT_EQ(j["entries"][1]["kind"], "p2p");
  EXPECT_EQ(j["entries"][1]["peer"], 2);
  EXPECT_EQ(j["entries"][1]["root"], -1);
}

std::string tempDir(const char* name) {
  auto dir = std::filesystem::temp_directory_path() /
             (std::string("braid-flight-") + name + "-" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  return dir.string();
}

std::string run(const std::string& command) {
  std::string out;
  FILE* p = popen(command.c_str(), "r");
  if (p == nullptr) return "popen failed";
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  pclose(p);
  return out;
}

TEST(FlightDump, ADivergingRankIsNamedByBraidTrace) {
  const std::string dir = tempDir("diverge");
  ::setenv("BRAID_DUMP_DIR", dir.c_str(), 1);
  Options options;
  options.timeoutSeconds = 20;
  // Two good all-reduces, then rank 2 calls a broadcast where ranks 0 and 1 all-reduce.
  auto errors = testing::runRanks(3, options, [&](Communicator& c) {
    std::vector<float> buf(64, 1.0f);
    for (int i = 0; i < 2; ++i) {
      c.allReduce(buf.data(), buf.data(), buf.size(), DataType::kFloat32, RedOp::kSum);
    }
    if (c.rank() == 2) {
      c.broadcast(buf.data(), buf.data(), buf.size(), DataType::kFloat32, 0);
    } else {
      c.allReduce(buf.data(), buf.data(), buf.size(), DataType::kFloat32, RedOp::kSum);
    }
  });
  ::unsetenv("BRAID_DUMP_DIR");
  for (int r = 0; r < 3; ++r) {
    EXPECT_TRUE(errors[r]) << "rank " << r << " did not fail";
    const std::string path = dir + "/rank-" + std::to_string(r) + ".json";
    ASSERT_TRUE(std::filesystem::exists(path)) << path;
    std::ifstream f(path);
    const auto j = nlohmann::json::parse(f);
    EXPECT_EQ(j["rank"], r);
    ASSERT_GE(j["entries"].size(), 3u);
    EXPECT_EQ(j["entries"][0]["state"], "completed");
    EXPECT_EQ(j["entries"][2]["coll"], r == 2 ? "broadcast" : "allreduce");
  }
  const std::string out = run(std::string(BRAID_PYTHON) + " " + BRAID_TRACE_TOOL + " " + dir +
                              " --chrome " + dir + "/trace.json 2>&1");
  EXPECT_NE(out.find("collective #2: the ranks disagree: ranks 0, 1 called allreduce 64 x "
                     "float sum; rank 2 called broadcast 64 x float root 0"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("rank 2: last completed collective #1"), std::string::npos) << out;
  std::ifstream chrome(dir + "/trace.json");
  const auto trace = nlohmann::json::parse(chrome);
  EXPECT_GE(trace["traceEvents"].size(), 3u * 3u) << "3 ops x 3 ranks, plus the process names";
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace braid
