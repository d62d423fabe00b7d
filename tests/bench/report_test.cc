// The -J document and the plot that reads it.
#include "bench/perf/report.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "tests/support/skip.h"

namespace braid::bench {
namespace {

std::vector<ReportRow> sampleRows(bool withBaseline) {
  std::vector<ReportRow> rows;
  for (size_t size = 8; size <= (size_t{1} << 22); size *= 4) {
    ReportRow r;
    r.row.bytes = size;
    r.row.count = size / 4;
    r.row.type = "float";
    r.row.op = "sum";
    r.row.root = -1;
    double seconds = 5e-6 + size / 4e9;
    r.row.outOfPlace.timeUs = seconds * 1e6;
    r.row.outOfPlace.algBw = size / 1e9 / seconds;
    r.row.outOfPlace.busBw = r.row.outOfPlace.algBw * 1.5;
    r.row.inPlace = r.row.outOfPlace;
    if (withBaseline) {
      Baseline b;
      b.available = size > 8;
      b.timeUs = r.row.outOfPlace.timeUs * 1.3;
      b.busBw = r.row.outOfPlace.busBw / 1.3;
      r.row.baseline = b;
    }
    r.algoChosen = size < 65536 ? "oneshot" : "ring";
    rows.push_back(r);
  }
  return rows;
}

RunInfo sampleInfo(const char* algo) {
  RunInfo info;
  info.collective = "all_reduce";
  info.ranks = 4;
  info.launcher = "braidrun";
  info.host = "testhost";
  info.date = utcNow();
  info.transport = "shm";
  info.algo = algo;
  return info;
}

TEST(PerfReport, DocumentHasParametersAndRows) {
  auto rows = sampleRows(true);
  nlohmann::json doc = makeReport(sampleInfo("auto"), rows, 0, 1.25);
  EXPECT_EQ(doc["collective"], "all_reduce");
  EXPECT_EQ(doc["ranks"], 4);
  EXPECT_EQ(doc["dtype"], "float");
  EXPECT_EQ(doc["op"], "sum");
  EXPECT_EQ(doc["algo"], "auto");
  EXPECT_EQ(doc["transport"], "shm");
  EXPECT_EQ(doc["params"]["iters"], 20);
  EXPECT_EQ(doc["avg_busbw"], 1.25);
  ASSERT_EQ(doc["rows"].size(), rows.size());
  const auto& first = doc["rows"][0];
  EXPECT_EQ(first["size"], 8);
  EXPECT_EQ(first["count"], 2);
  EXPECT_EQ(first["algo"], "oneshot");
  EXPECT_TRUE(first["baseline"].is_null());
  EXPECT_EQ(first["out_of_place"]["wrong"], 0);
  const auto& second = doc["rows"][1];
  EXPECT_EQ(second["baseline"]["name"], "mpi");
  EXPECT_NEAR(second["baseline"]["ratio"].get<double>(), 1.3, 1e-9);
  EXPECT_EQ(utcNow().size(), 20u);
}

TEST(PerfReport, PlacementFiguresAndTheirClass) {
  auto rows = sampleRows(false);
  rows[0].placementBeforeNs = 61;
  rows[0].placementAfterNs = 330;
  RunInfo info = sampleInfo("auto");
  info.placement = {3, 7, 61, 330};
  nlohmann::json doc = makeReport(info, rows, 0, 1.0);
  EXPECT_EQ(doc["placement"]["cpus"], nlohmann::json({3, 7}));
  EXPECT_EQ(doc["placement"]["round_trip_ns_start"], 61.0);
  EXPECT_EQ(doc["placement"]["class"], "same L3");
  EXPECT_EQ(doc["rows"][0]["placement_ns"]["after"], 330.0);
  EXPECT_TRUE(doc["rows"][1]["placement_ns"]["before"].is_null()) << "not measured: null";
  EXPECT_STREQ(placementClass(331), "apart");
  EXPECT_STREQ(placementClass(3793), "sharing a CPU");
  EXPECT_STREQ(placementClass(-1), "n/a");
}

bool haveMatplotlib() {
  return std::system("/usr/bin/python3 -c 'import matplotlib' >/dev/null 2>&1") == 0;
}

std::string tempPath(const std::string& name) {
  const char* dir = std::getenv("TMPDIR");
  return fmt::format("{}/braid_plot_{}_{}", dir ? dir : "/tmp", getpid(), name);
}

TEST(PerfReport, PlotWritesAPng) {
  if (access(BRAID_PLOT_PATH, X_OK) != 0) BRAID_SKIP_MISSING("no braid-plot at " BRAID_PLOT_PATH);
  if (!haveMatplotlib()) BRAID_SKIP_MISSING("python3-matplotlib is not installed");
  const std::string a = tempPath("a.json"), b = tempPath("b.json"), png = tempPath("out.png");
  writeReport(a, makeReport(sampleInfo("ring"), sampleRows(true), 0, 1.0));
  writeReport(b, makeReport(sampleInfo("oneshot"), sampleRows(false), 0, 1.0));
  std::string cmd =
      fmt::format("{} {} {} {} --title 'plot test' >/dev/null", BRAID_PLOT_PATH, png, a, b);
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::ifstream in(png, std::ios::binary);
  char magic[8] = {};
  in.read(magic, sizeof(magic));
  EXPECT_EQ(std::string(magic + 1, 3), "PNG");
  in.seekg(0, std::ios::end);
  EXPECT_GT(in.tellg(), 10000);
  std::remove(a.c_str());
  std::remove(b.c_str());
  std::remove(png.c_str());
}

TEST(PerfReport, PlotNamesABadFile) {
  if (access(BRAID_PLOT_PATH, X_OK) != 0) BRAID_SKIP_MISSING("no braid-plot at " BRAID_PLOT_PATH);
  const std::string bad = tempPath("bad.json"), png = tempPath("bad.png"),
                    err = tempPath("bad.err");
  std::ofstream(bad) << "{\"rows\": [1, 2,";
  std::string cmd = fmt::format("{} {} {} 2>{}", BRAID_PLOT_PATH, png, bad, err);
  EXPECT_NE(std::system(cmd.c_str()), 0);
  std::ifstream in(err);
  std::string message((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(message.find(bad + ": not valid JSON"), std::string::npos) << message;
  std::remove(bad.c_str());
  std::remove(err.c_str());
}

}  // namespace
}  // namespace braid::bench
