// The table must match nccl-tests' printf output character for character; the expected strings
// are written by hand from nccl-tests' formats.
#include "bench/format/table.h"

#include <gtest/gtest.h>

namespace braid::bench {
namespace {

Measurement m(double timeUs, double algBw, double busBw, int64_t wrong) {
  Measurement out;
  out.timeUs = timeUs;
  out.algBw = algBw;
  out.busBw = busBw;
  out.wrong = wrong;
  return out;
}

Row row(size_t bytes, size_t count, const char* type, const char* op, int root) {
  Row r;
  r.bytes = bytes;
  r.count = count;
  r.type = type;
  r.op = op;
  r.root = root;
  return r;
}

TEST(PerfTable, SmallRowMatchesNcclTests) {
  Row r = row(8, 2, "float", "sum", -1);
  r.outOfPlace = m(10.31, 0.0, 0.0, 0);
  r.inPlace = m(10.02, 0.0, 0.0, 0);
  EXPECT_EQ(formatRow(r),
            "           8             2     float     sum      -1    10.31    0.00    0.00      0"
            "    10.02    0.00    0.00      0\n");
}

TEST(PerfTable, TimeSwitchesFormatAt100And10000Us) {
  Row r = row(134217728, 33554432, "float", "sum", -1);
  r.outOfPlace = m(1234.56, 108.72, 190.26, 0);
  r.inPlace = m(12345.6, 10.87, 19.03, 0);
  EXPECT_EQ(formatRow(r),
            "   134217728      33554432     float     sum      -1   1234.6  108.72  190.26      0"
            "    12346   10.87   19.03      0\n");
  EXPECT_EQ(formatTime(99.994), "  99.99");
  EXPECT_EQ(formatTime(100.0), "  100.0");
  EXPECT_EQ(formatTime(9999.94), " 9999.9");
  EXPECT_EQ(formatTime(10000.0), "  10000");
}

TEST(PerfTable, RootNoneWrongAndUnchecked) {
  Row r = row(1024, 256, "half", "none", 3);
  r.outOfPlace = m(5.5, 0.19, 0.19, 7);
  r.inPlace = m(5.25, 0.2, 0.2, 0);
  r.inPlace.checked = false;
  EXPECT_EQ(formatRow(r),
            "        1024           256      half    none       3     5.50    0.19    0.19      7"
            "     5.25    0.20    0.20    N/A\n");
}

TEST(PerfTable, HugeWrongCountUsesPercentG) {
  Row r = row(8, 1, "double", "prod", -1);
  r.outOfPlace = m(1, 0, 0, 1234567);
  r.inPlace = m(1, 0, 0, 0);
  EXPECT_EQ(formatRow(r),
            "           8             1    double    prod      -1     1.00    0.00    0.00  "
            "1.23457e+06     1.00    0.00    0.00      0\n");
}

TEST(PerfTable, HeaderMatchesNcclTests) {
  EXPECT_EQ(formatHeader(false),
            "#                                                              out-of-place       "
            "                in-place          \n"
            "#       size         count      type   redop    root     time   algbw   busbw #wrong"
            "     time   algbw   busbw #wrong\n"
            "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)       "
            "     (us)  (GB/s)  (GB/s)       \n");
}

TEST(PerfTable, BaselineColumnsLineUp) {
  std::string header = formatHeader(true);
  EXPECT_NE(header.find("#wrong  mpi time  mpi busbw  braid/mpi\n"), std::string::npos) << header;
  Row r = row(8, 2, "float", "sum", -1);
  r.outOfPlace = m(10, 0.8, 0.8, 0);
  r.inPlace = m(10, 0.8, 0.8, 0);
  Baseline b;
  b.available = true;
  b.timeUs = 20;
  b.busBw = 0.4;
  r.baseline = b;
  std::string line = formatRow(r);
  const std::string tail = "     20.00       0.40       2.00\n";
  ASSERT_GT(line.size(), tail.size());
  EXPECT_EQ(line.substr(line.size() - tail.size()), tail) << line;
  r.baseline->available = false;
  line = formatRow(r);
  const std::string naTail = "       n/a        n/a        n/a\n";
  EXPECT_EQ(line.substr(line.size() - naTail.size()), naTail) << line;
  // Every header line and row has the same width up to the last column.
  size_t rowWidth = line.size() - 1;
  size_t second = header.find('\n') + 1;
  std::string line2 = header.substr(second, header.find('\n', second) - second);
  EXPECT_EQ(line2.size(), rowWidth) << line2;
}

TEST(PerfTable, PreambleAndFooter) {
  EXPECT_EQ(formatParamsLine(8, 134217728, 1048576, 2, 5, 20, 1, true),
            "# nThread 1 nGpus 1 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 5 "
            "iters: 20 agg iters: 1 validation: 1 graph: 0\n");
  EXPECT_EQ(formatParamsLine(33554432, 33554432, 1048576, 1, 0, 1, 1, false),
            "# nThread 1 nGpus 1 minBytes 33554432 maxBytes 33554432 step: 1048576(bytes) warmup "
            "iters: 0 iters: 1 agg iters: 1 validation: 0 graph: 0\n");
  EXPECT_EQ(formatParamsLine(8, 1024, 1048576, 4, 5, 20, 1, true, 3),  // -t 3
            "# nThread 3 nGpus 1 minBytes 8 maxBytes 1024 step: 4(factor) warmup iters: 5 "
            "iters: 20 agg iters: 1 validation: 1 graph: 0\n");
  EXPECT_EQ(formatDeviceLine(0, 12345, "hostname", 0),
            "#  Rank  0 Group  0 Pid  12345 on   hostname device  0 [cpu] host memory\n");
  EXPECT_EQ(formatDeviceLine(11, 7, "a-very-long-hostname", 3),
            "#  Rank 11 Group  0 Pid      7 on a-very-long-hostname device  3 [cpu] host memory\n");
  EXPECT_EQ(formatDeviceLine(1, 42, "vm", 0, "[0x06] NVIDIA H200"),
            "#  Rank  1 Group  0 Pid     42 on         vm device  0 [0x06] NVIDIA H200\n");
  EXPECT_EQ(formatFooter(0, 12.3456),
            "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 12.3456 \n#\n");
  EXPECT_EQ(formatFooter(3, 0.5),
            "# Out of bounds values : 3 FAILED\n# Avg bus bandwidth    : 0.5 \n#\n");
}

}  // namespace
}  // namespace braid::bench
