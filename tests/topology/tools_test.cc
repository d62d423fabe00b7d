// Smoke runs of braid-topo and braid-sim: their tables parse and say something sensible.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace {

struct Outcome {
  int code = -1;
  std::string out;
};

// Runs `command` (bounded by timeout(1)), capturing stdout (and stderr when asked).
Outcome run(const std::string& command, bool withStderr = false) {
  std::string full = "timeout 60 " + command + (withStderr ? " 2>&1" : " 2>/dev/null");
  Outcome r;
  FILE* pipe = popen(full.c_str(), "r");
  if (!pipe) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) r.out.append(buf, n);
  int status = pclose(pipe);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  std::string line;
  while (std::getline(in, line)) out.push_back(line);
  return out;
}

std::vector<std::string> fieldsOf(const std::string& line) {
  std::vector<std::string> out;
  std::stringstream in(line);
  std::string w;
  while (in >> w) out.push_back(w);
  return out;
}

const std::string kTopo = BRAID_TOPO_PATH;
const std::string kSim = BRAID_SIM_PATH;
const std::string kExamples = BRAID_TOPO_EXAMPLES;

TEST(BraidTopo, DecisionTableForAFile) {
  Outcome r = run(kTopo + " --topo " + kExamples + "/cluster_64x8_gpu.topo --collective allreduce");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("512 ranks on 64 node(s)"), std::string::npos) << r.out;
  std::map<size_t, std::string> algo;
  for (const std::string& line : lines(r.out)) {
    if (line.empty() || line[0] == '#') continue;
    auto f = fieldsOf(line);
    if (f.size() != 7 || f[0].find_first_not_of("0123456789") != std::string::npos) continue;
    algo[std::stoull(f[0])] = f[1];
    EXPECT_GT(std::stod(f[4]), 0) << line;
  }
  ASSERT_EQ(algo.size(), 28u) << r.out;  // 8 B .. 1 GiB
  EXPECT_EQ(algo[8], "tree");
  EXPECT_EQ(algo[size_t(1) << 30], "hier");
}

TEST(BraidTopo, DiscoversThisHost) {
  Outcome r = run(kTopo + " -n 2 --collective broadcast -b 8 -e 1M -f 16");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("discovered on this host"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("2 ranks on 1 node(s)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("# broadcast"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("oneshot"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("chain"), std::string::npos) << r.out;
}

TEST(BraidTopo, ExplainsOneSize) {
  Outcome r =
      run(kTopo + " --topo " + kExamples + "/host_1x4.topo --collective allreduce --explain 64M");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("chosen"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("excluded"), std::string::npos) << r.out;
}

TEST(BraidTopo, BadFileNamesLineAndField) {
  std::string path = "/tmp/braid_tools_test_bad.topo";
  FILE* f = fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr);
  fputs("braid-topology 1\nnode a ranks=2 nic=fast\n", f);
  fclose(f);
  Outcome r = run(kTopo + " --topo " + path, true);
  std::remove(path.c_str());
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("line 2: field 'nic'"), std::string::npos) << r.out;
}

TEST(BraidSim, PrintsTheNcclTestsTable) {
  Outcome r = run(kSim + " --topo " + kExamples +
                  "/hosts_2x2_1gbit.topo --collective allreduce -b 8 -e 64M -f 2");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("# nThread 1 nGpus 1 minBytes 8 maxBytes 67108864"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("out-of-place"), std::string::npos);
  EXPECT_NE(r.out.find("# Avg bus bandwidth"), std::string::npos);
  size_t expect = 8, rows = 0;
  double lastTime = 0;
  for (const std::string& line : lines(r.out)) {
    if (line.empty() || line[0] == '#') continue;
    auto f = fieldsOf(line);
    ASSERT_EQ(f.size(), 13u) << line;  // size count type redop root, 2 x (time algbw busbw wrong)
    EXPECT_EQ(std::stoull(f[0]), expect) << line;
    EXPECT_EQ(std::stoull(f[1]), expect / 4) << line;
    EXPECT_EQ(f[2], "float");
    EXPECT_EQ(f[3], "sum");
    EXPECT_EQ(f[4], "-1");
    double time = std::stod(f[5]), algbw = std::stod(f[6]), busbw = std::stod(f[7]);
    EXPECT_GE(time, lastTime) << line;
    EXPECT_EQ(f[8], "N/A");
    EXPECT_EQ(f[5], f[9]);  // in-place predicted as out-of-place
    if (expect >= 4096) {
      EXPECT_NEAR(algbw, expect / (time * 1e3), 0.01 + algbw * 0.01) << line;
      EXPECT_NEAR(busbw, algbw * 1.5, 0.02 + busbw * 0.01) << line;  // 2(n-1)/n, n = 4
    }
    // Over a 1 Gbit/s link (0.125 GB/s) no all-reduce of 4 ranks beats ~0.17 GB/s busbw.
    EXPECT_LT(busbw, 0.2) << line;
    lastTime = time;
    expect *= 2;
    ++rows;
  }
  EXPECT_EQ(rows, 24u);
}

TEST(BraidSim, RanksSubsetAlgoColumnAndOtherCollectives) {
  Outcome r =
      run(kSim + " --topo " + kExamples +
          "/cluster_64x8_gpu.topo -g 64 --collective broadcast -b 1M -e 4M -f 2 --show-algo");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("64 ranks on 8 node(s)"), std::string::npos) << r.out;
  int rows = 0;
  for (const std::string& line : lines(r.out)) {
    if (line.empty() || line[0] == '#') continue;
    auto f = fieldsOf(line);
    ASSERT_EQ(f.size(), 16u) << line;
    EXPECT_EQ(f[3], "none");
    EXPECT_EQ(f[4], "0");
    EXPECT_TRUE(f[13] == "chain" || f[13] == "oneshot") << line;
    ++rows;
  }
  EXPECT_EQ(rows, 3);
}

TEST(BraidSim, ForcedAlgorithmThatCannotRunFails) {
  Outcome r = run(kSim + " --topo " + kExamples + "/host_1x4.topo --algo chain", true);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("cannot run allreduce"), std::string::npos) << r.out;
}

TEST(BraidSim, InfoLogExplainsEachSizeClassOnce) {
  // 1 MiB .. 2 MiB in 64 KiB steps: 17 sizes in two power-of-two classes.
  Outcome r = run("env BRAID_DEBUG=INFO " + kSim + " --topo " + kExamples +
                      "/hosts_2x2_1gbit.topo -b 1M -e 2M -i 64K",
                  true);
  ASSERT_EQ(r.code, 0) << r.out;
  int logged = 0;
  for (const std::string& line : lines(r.out)) {
    if (line.find("tuner: allreduce of") != std::string::npos) {
      ++logged;
      EXPECT_NE(line.find("CHOSEN"), std::string::npos) << line;
      EXPECT_NE(line.find("excluded"), std::string::npos) << line;
    }
  }
  EXPECT_EQ(logged, 2) << r.out;
}

}  // namespace
