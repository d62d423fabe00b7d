// allToAll, allToAllv, gather and scatter: every type, counts 0, 1, primes and past a slot, in
// and out of place, ranks 1..16 as threads over shared memory, checked element by element against
// the kit's reference; allToAllv with uneven and zero splits; the usage errors; and ranks that
// disagree about the call failing with kMismatch on every rank.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <mutex>
#include <numeric>

#include "tests/kit/host_case.h"

namespace braid::testing {
namespace {

Options smallSlots() {
  Options options;
  options.timeoutSeconds = 30;
  options.chunkBytes = 1024;  // odd counts cross piece boundaries
  return options;
}

std::vector<CollectiveCase> matrix(int n, const std::vector<DataType>& types,
                                   const std::vector<size_t>& counts) {
  std::vector<CollectiveCase> cases;
  for (Collective coll : kExchangeCollectives) {
    for (DataType type : types) {
      for (size_t count : counts) {
        for (bool inPlace : {false, true}) {
          const int root = coll == Collective::kAllToAll ? -1 : int(count % n);
          cases.push_back({coll, type, RedOp::kSum, count, inPlace, root});
        }
      }
    }
  }
  return cases;
}

class ExchangeCollectives : public ::testing::TestWithParam<int> {};

TEST_P(ExchangeCollectives, EveryTypeCountAndPlacementMatchesTheReference) {
  const int n = GetParam();
  const std::vector<DataType> types(std::begin(kAllTypes), std::end(kAllTypes));
  runCasesOnThreads(
      n, [](int) { return smallSlots(); }, matrix(n, types, {0, 1, 2, 7, 13, 1023}));
}

INSTANTIATE_TEST_SUITE_P(Threads, ExchangeCollectives, ::testing::Values(1, 2, 3, 4, 5, 8, 11, 16),
                         [](const auto& info) { return fmt::format("{}ranks", info.param); });

TEST(ExchangeCollectivesRanks, EveryRankCountFrom1To16) {
  for (int n = 1; n <= 16; ++n) {
    SCOPED_TRACE(fmt::format("{} ranks", n));
    runCasesOnThreads(
        n, [](int) { return smallSlots(); },
        matrix(n, {DataType::kFloat32, DataType::kInt8}, {1, 37}));
  }
}

// All-to-all's two schedules, forced: direct (oneshot) and the pairwise exchange.
std::vector<CollectiveCase> allToAllOnly(const std::vector<CollectiveCase>& cases) {
  std::vector<CollectiveCase> out;
  for (const CollectiveCase& c : cases)
    if (c.coll == Collective::kAllToAll) out.push_back(c);
  return out;
}

TEST(AllToAllSchedules, DirectAndPairwiseMatchTheReference) {
  for (Algorithm algo : {Algorithm::kOneShot, Algorithm::kPairwise}) {
    for (int n : {2, 3, 4, 5, 8}) {
      SCOPED_TRACE(fmt::format("{} on {} ranks", algorithmName(algo), n));
      Options options = smallSlots();
      options.algorithm = algo;
      runCasesOnThreads(
          n, [&](int) { return options; },
          allToAllOnly(matrix(n, {DataType::kFloat32, DataType::kInt8, DataType::kFloat64},
                              {1, 2, 7, 13, 1023, 70001})));
    }
  }
}

// Blocks of several slots (default slot size) with an odd element count, both placements.
TEST(ExchangeCollectivesLarge, ManySlotsPerBlock) {
  for (int n : {2, 3, 4}) {
    SCOPED_TRACE(fmt::format("{} ranks", n));
    Options options;
    options.timeoutSeconds = 60;
    runCasesOnThreads(
        n, [&](int) { return options; },
        matrix(n, {DataType::kFloat32, DataType::kBFloat16}, {(size_t(1) << 18) + 3}));
  }
}

// The same exchanges between ranks over the network transports (threads posing as one host:
// BRAID_TRANSPORT's choice, as the mismatch matrix does).
class ExchangeCollectivesTransports : public ::testing::TestWithParam<const char*> {};

TEST_P(ExchangeCollectivesTransports, MatchTheReference) {
  for (int n : {2, 3}) {
    SCOPED_TRACE(fmt::format("{} ranks over {}", n, GetParam()));
    Options options;
    options.transport = GetParam();
    options.timeoutSeconds = 60;
    runCasesOnThreads(
        n, [&](int) { return options; },
        matrix(n, {DataType::kFloat32, DataType::kInt8}, {1, 37, 70001}));
  }
}

INSTANTIATE_TEST_SUITE_P(Threads, ExchangeCollectivesTransports, ::testing::Values("tcp", "ucx"),
                         [](const auto& info) { return std::string(info.param); });

// ---- allToAllv ----

// Elements rank `from` sends rank `to` in the uneven pattern (zero for some pairs).
size_t unevenCount(int from, int to, size_t scale) {
  if ((from + 2 * to) % 3 == 0) return 0;
  return scale * size_t(from + 1) + size_t(to) * 3 + 1;
}

struct VLayout {
  std::vector<size_t> sendCounts, sendDispls, recvCounts, recvDispls;
  size_t inCount = 0, outCount = 0;
};

// Rank r's layout with `gap` unused elements between blocks, send blocks in reverse rank order.
VLayout layoutOf(int r, int n, size_t scale, size_t gap) {
  VLayout l;
  l.sendCounts.resize(n);
  l.sendDispls.resize(n);
  l.recvCounts.resize(n);
  l.recvDispls.resize(n);
  for (int q = n - 1; q >= 0; --q) {
    l.sendCounts[q] = unevenCount(r, q, scale);
    l.sendDispls[q] = l.inCount;
    l.inCount += l.sendCounts[q] + gap;
  }
  for (int q = 0; q < n; ++q) {
    l.recvCounts[q] = unevenCount(q, r, scale);
    l.recvDispls[q] = l.outCount;
    l.outCount += l.recvCounts[q] + gap;
  }
  return l;
}

// Rank r's allToAllv checked: element i of its block for q is inputValue(r, base + i), base the
// block's displacement; what lands from q must be q's.
std::string checkAllToAllv(Communicator& comm, DataType t, size_t scale, size_t gap, bool inPlace) {
  const int r = comm.rank(), n = comm.size();
  const size_t elem = dataTypeSize(t);
  VLayout l = layoutOf(r, n, scale, gap);
  if (inPlace) {
    // MPI_IN_PLACE: one layout for both; pairs exchange equal counts (symmetric pattern).
    l = VLayout{};
    l.sendCounts.resize(n);
    l.sendDispls.resize(n);
    for (int q = 0; q < n; ++q) {
      l.sendCounts[q] = unevenCount(std::min(r, q), std::max(r, q), scale);
      l.sendDispls[q] = l.inCount;
      l.inCount += l.sendCounts[q] + gap;
    }
    l.recvCounts = l.sendCounts;
    l.recvDispls = l.sendDispls;
    l.outCount = l.inCount;
  }
  std::vector<char> in(l.inCount * elem + 1), out(l.outCount * elem + 1, char(0x5A));
  for (int q = 0; q < n; ++q)
    fillInput(t, RedOp::kSum, r, in.data() + l.sendDispls[q] * elem, l.sendCounts[q],
              l.sendDispls[q]);
  void* recv = out.data();
  if (inPlace) recv = in.data();
  comm.allToAllv(in.data(), l.sendCounts.data(), l.sendDispls.data(), recv, l.recvCounts.data(),
                 l.recvDispls.data(), t);
  for (int q = 0; q < n; ++q) {
    // Where q put its block for r in its own send buffer: its layout.
    const VLayout theirs = inPlace ? l : layoutOf(q, n, scale, gap);
    size_t theirDispl = theirs.sendDispls[r];
    if (inPlace) {
      // q's in-place layout, computed as q does.
      size_t at = 0;
      for (int p = 0; p < r; ++p) at += unevenCount(std::min(q, p), std::max(q, p), scale) + gap;
      theirDispl = at;
    }
    std::vector<char> want(l.recvCounts[q] * elem + 1);
    fillInput(t, RedOp::kSum, q, want.data(), l.recvCounts[q], theirDispl);
    const char* got = static_cast<char*>(recv) + l.recvDispls[q] * elem;
    const long bad = firstMismatch(got, want.data(), l.recvCounts[q], elem);
    if (bad >= 0) {
      return fmt::format(
          "rank {}: alltoallv {} {} scale {} gap {}: element {} of the block from "
          "rank {} ({} elements) is wrong",
          r, dataTypeName(t), inPlace ? "in-place" : "out-of-place", scale, gap, bad, q,
          l.recvCounts[q]);
    }
  }
  // The gaps between received blocks are untouched (out of place).
  if (!inPlace && gap > 0) {
    for (int q = 0; q < n; ++q) {
      const char* after = out.data() + (l.recvDispls[q] + l.recvCounts[q]) * elem;
      for (size_t b = 0; b < gap * elem; ++b)
        if (after[b] != char(0x5A))
          return fmt::format("rank {}: alltoallv wrote into the gap after rank {}'s block", r, q);
    }
  }
  return "";
}

TEST(AllToAllv, UnevenAndZeroCountsMatchTheSenders) {
  for (const auto& [n, algo] : std::vector<std::pair<int, Algorithm>>{
           {1, Algorithm::kAuto},
           {2, Algorithm::kAuto},
           {3, Algorithm::kOneShot},
           {3, Algorithm::kPairwise},
           {4, Algorithm::kAuto},
           {5, Algorithm::kOneShot},
           {5, Algorithm::kPairwise},
           {8, Algorithm::kAuto},
           {16, Algorithm::kAuto}}) {
    SCOPED_TRACE(fmt::format("{} ranks, {}", n, algorithmName(algo)));
    std::mutex mutex;
    std::vector<std::string> wrong;
    Options options = smallSlots();
    options.algorithm = algo;
    auto errors = runRanks(n, options, [&](Communicator& comm) {
      for (DataType t : kAllTypes) {
        for (size_t scale : {size_t{0}, size_t{1}, size_t{300}}) {
          for (bool inPlace : {false, true}) {
            std::string problem = checkAllToAllv(comm, t, scale, inPlace ? 0 : 2, inPlace);
            if (!problem.empty()) {
              std::lock_guard<std::mutex> lock(mutex);
              wrong.push_back(problem);
            }
          }
        }
      }
    });
    for (int r = 0; r < n; ++r) EXPECT_EQ(errorText(errors[r]), "") << "rank " << r;
    for (size_t i = 0; i < wrong.size() && i < 10; ++i) ADD_FAILURE() << wrong[i];
  }
}

TEST(AllToAllv, AllCountsZeroCompletesOnEveryRank) {
  const int n = 4;
  auto errors = runRanks(n, smallSlots(), [&](Communicator& comm) {
    std::vector<size_t> zeros(n, 0);
    comm.allToAllv(nullptr, zeros.data(), zeros.data(), nullptr, zeros.data(), zeros.data(),
                   DataType::kFloat32);
    comm.allToAllv(nullptr, zeros.data(), zeros.data(), nullptr, zeros.data(), zeros.data(),
                   DataType::kFloat32);
  });
  for (int r = 0; r < n; ++r) EXPECT_EQ(errorText(errors[r]), "") << "rank " << r;
}

TEST(ExchangeCollectivesAsync, AsyncFormsMatchTheBlockingOnes) {
  const int n = 3;
  const size_t count = 1000;
  auto errors = runRanks(n, smallSlots(), [&](Communicator& comm) {
    const int r = comm.rank();
    std::vector<float> in(count * n), a2a(count * n), gathered(count * n), scattered(count);
    for (size_t i = 0; i < in.size(); ++i) in[i] = float(r * 100000 + i);
    std::vector<size_t> counts(n, count), displs(n);
    for (int q = 0; q < n; ++q) displs[q] = q * count;
    std::vector<float> a2av(count * n);
    Request a = comm.allToAllAsync(in.data(), a2a.data(), count, DataType::kFloat32);
    Request v = comm.allToAllvAsync(in.data(), counts.data(), displs.data(), a2av.data(),
                                    counts.data(), displs.data(), DataType::kFloat32);
    Request g = comm.gatherAsync(in.data(), gathered.data(), count, DataType::kFloat32, 1);
    Request s = comm.scatterAsync(in.data(), scattered.data(), count, DataType::kFloat32, 2);
    a.wait();
    v.wait();
    g.wait();
    s.wait();
    for (int q = 0; q < n; ++q) {
      for (size_t i = 0; i < count; ++i) {
        const float fromQ = float(q * 100000 + r * count + i);
        if (a2a[q * count + i] != fromQ || a2av[q * count + i] != fromQ)
          throw std::runtime_error(fmt::format("rank {}: all-to-all element {} from {}", r, i, q));
        if (r == 1 && gathered[q * count + i] != float(q * 100000 + i))
          throw std::runtime_error(fmt::format("rank 1: gather element {} from {}", i, q));
      }
    }
    for (size_t i = 0; i < count; ++i)
      if (scattered[i] != float(2 * 100000 + r * count + i))
        throw std::runtime_error(fmt::format("rank {}: scatter element {}", r, i));
  });
  for (int r = 0; r < n; ++r) EXPECT_EQ(errorText(errors[r]), "") << "rank " << r;
}

// ---- usage errors (kInvalidUsage at the call, naming rank and collective; nothing runs) ----

TEST(ExchangeCollectivesUsage, BadRootsLayoutsAndOverlapsAreRefused) {
  auto errors = runRanks(1, smallSlots(), [&](Communicator& comm) {
    std::vector<float> a(64), b(64);
    auto expectUsage = [&](const char* what, const std::function<void()>& call,
                           const char* mentions) {
      try {
        call();
      } catch (const Error& e) {
        if (e.code() != ErrorCode::kInvalidUsage)
          throw std::runtime_error(fmt::format("{}: code {}: {}", what, int(e.code()), e.what()));
        const std::string text = e.what();
        if (text.find("rank 0") == std::string::npos || text.find(mentions) == std::string::npos)
          throw std::runtime_error(fmt::format("{}: message lacks '{}': {}", what, mentions, text));
        return;
      }
      throw std::runtime_error(fmt::format("{}: accepted", what));
    };
    expectUsage(
        "gather root", [&] { comm.gather(a.data(), b.data(), 4, DataType::kFloat32, 1); },
        "gather");
    expectUsage(
        "scatter root", [&] { comm.scatter(a.data(), b.data(), 4, DataType::kFloat32, -1); },
        "scatter");
    expectUsage(
        "alltoall overlap", [&] { comm.allToAll(a.data(), a.data() + 1, 8, DataType::kFloat32); },
        "alltoall");
    size_t c1[] = {4}, d0[] = {0}, c2[] = {5}, d1[] = {1};
    expectUsage(
        "alltoallv own counts differ",
        [&] { comm.allToAllv(a.data(), c1, d0, b.data(), c2, d0, DataType::kFloat32); },
        "alltoallv");
    expectUsage(
        "alltoallv in place with different layouts",
        [&] { comm.allToAllv(a.data(), c1, d0, a.data(), c1, d1, DataType::kFloat32); },
        "in place");
    expectUsage(
        "alltoallv null counts",
        [&] { comm.allToAllv(a.data(), nullptr, d0, b.data(), c1, d0, DataType::kFloat32); },
        "alltoallv");
  });
  EXPECT_EQ(errorText(errors[0]), "");
}

// BRAID_ALGO (Options::algorithm) forcing a family that cannot run them is refused naming it;
// oneshot (direct) and pairwise, all-to-all's schedules, run; gather refuses pairwise.
TEST(ExchangeCollectivesUsage, ForcedAlgorithmsOtherThanOneshotAndPairwiseAreRefused) {
  for (Algorithm algo : {Algorithm::kRing, Algorithm::kChain, Algorithm::kOneShot,
                         Algorithm::kPairwise}) {
    Options options = smallSlots();
    options.algorithm = algo;
    auto errors = runRanks(2, options, [&](Communicator& comm) {
      std::vector<float> in(64, 1.0f), out(64);
      comm.allToAll(in.data(), out.data(), 32, DataType::kFloat32);
    });
    for (int r = 0; r < 2; ++r) {
      if (algo == Algorithm::kOneShot || algo == Algorithm::kPairwise) {
        EXPECT_EQ(errorText(errors[r]), "") << "rank " << r;
        continue;
      }
      EXPECT_EQ(errorCode(errors[r]), ErrorCode::kInvalidUsage) << algorithmName(algo);
      EXPECT_NE(errorText(errors[r]).find("cannot run alltoall"), std::string::npos)
          << errorText(errors[r]);
    }
  }
  Options options = smallSlots();
  options.algorithm = Algorithm::kPairwise;
  auto errors = runRanks(2, options, [&](Communicator& comm) {
    std::vector<float> in(64, 1.0f), out(128);
    comm.gather(in.data(), out.data(), 64, DataType::kFloat32, 0);
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(errorCode(errors[r]), ErrorCode::kInvalidUsage);
    EXPECT_NE(errorText(errors[r]).find("cannot run gather"), std::string::npos)
        << errorText(errors[r]);
  }
}

// ---- disagreement: kMismatch on every rank, never a success on some or a timeout ----

struct Disagreement {
  const char* what;
  Collective coll, deviantColl;
  size_t count, deviantCount;
  int root, deviantRoot;
};

TEST(ExchangeCollectivesMismatch, RanksThatDisagreeFailWithANamedMismatch) {
  const Disagreement cases[] = {
      {"alltoall vs allgather", Collective::kAllToAll, Collective::kAllGather, 64, 64, -1, -1},
      {"alltoall count", Collective::kAllToAll, Collective::kAllToAll, 64, 65, -1, -1},
      {"gather vs scatter", Collective::kGather, Collective::kScatter, 64, 64, 0, 0},
      {"gather root", Collective::kGather, Collective::kGather, 64, 64, 0, 1},
      {"gather count", Collective::kGather, Collective::kGather, 1 << 16, (1 << 16) + 1, 1, 1},
      {"scatter vs broadcast", Collective::kScatter, Collective::kBroadcast, 64, 64, 0, 0},
      {"scatter count", Collective::kScatter, Collective::kScatter, 64, 63, 2, 2},
      {"gather vs reduce", Collective::kGather, Collective::kReduce, 64, 64, 1, 1},
  };
  Options options = smallSlots();
  for (int n : {2, 3, 4}) {
    int which = 0;
    for (const Disagreement& d : cases) {
      const int deviant = (which++ + 1) % n;
      const std::string what = fmt::format("{} ranks, {}, rank {} deviates", n, d.what, deviant);
      auto errors = runRanks(n, options, [&](Communicator& comm) {
        const bool odd = comm.rank() == deviant;
        const Collective coll = odd ? d.deviantColl : d.coll;
        const size_t count = odd ? d.deviantCount : d.count;
        const int root = (odd ? d.deviantRoot : d.root) % n;
        std::vector<float> in((count + 1) * n, 1.0f), out((count + 1) * n, 0.0f);
        callCollective(comm, coll, in.data(), out.data(), count, DataType::kFloat32, RedOp::kSum,
                       root < 0 ? 0 : root);
      });
      for (int r = 0; r < n; ++r) {
        EXPECT_EQ(errorCode(errors[r]), ErrorCode::kMismatch)
            << what << ": rank " << r << ": " << errorText(errors[r]);
        EXPECT_NE(errorText(errors[r]).find("rank"), std::string::npos) << what;
      }
      if (::testing::Test::HasFailure()) return;
    }
  }
}

TEST(ExchangeCollectivesMismatch, AllToAllvPairsThatDisagreeFail) {
  // Every pair exchanges 100 floats except where rank 1 and rank 2 disagree about 2 -> 1: rank 1
  // expects `expect`, rank 2 sends `sends` (a zero side meets the other's empty message).
  const struct { size_t expect, sends; } cases[] = {{101, 100}, {100, 0}, {0, 100}};
  const int n = 3;
  for (Algorithm algo : {Algorithm::kOneShot, Algorithm::kPairwise})
  for (const auto& c : cases) {
    Options options = smallSlots();
    options.algorithm = algo;
    auto errors = runRanks(n, options, [&](Communicator& comm) {
      const int r = comm.rank();
      std::vector<size_t> sendCounts(n, 100), recvCounts(n, 100), displs(n);
      for (int q = 0; q < n; ++q) displs[q] = q * 200;
      if (r == 1) recvCounts[2] = c.expect;
      if (r == 2) sendCounts[1] = c.sends;
      std::vector<float> in(n * 200), out(n * 200);
      comm.allToAllv(in.data(), sendCounts.data(), displs.data(), out.data(), recvCounts.data(),
                     displs.data(), DataType::kFloat32);
    });
    for (int r = 0; r < n; ++r)
      EXPECT_EQ(errorCode(errors[r]), ErrorCode::kMismatch)
          << algorithmName(algo) << ": rank 1 expects " << c.expect << ", rank 2 sends "
          << c.sends << ": rank " << r << ": " << errorText(errors[r]);
  }
}

// Nothing else moves: 2 ranks, every count 0 but one side's 1 element from rank 0 to rank 1.
// The pair's empty message makes it a named size mismatch well inside the timeout.
TEST(ExchangeCollectivesMismatch, ZeroAgainstOneElementIsAMismatchNotATimeout) {
  for (Algorithm algo : {Algorithm::kOneShot, Algorithm::kPairwise}) {
    for (bool receiverExpects : {true, false}) {
      Options options = smallSlots();
      options.algorithm = algo;
      options.timeoutSeconds = 20;
      const auto start = std::chrono::steady_clock::now();
      auto errors = runRanks(2, options, [&](Communicator& comm) {
        std::vector<size_t> sendCounts(2, 0), recvCounts(2, 0), displs(2, 0);
        if (comm.rank() == 0 && !receiverExpects) sendCounts[1] = 1;
        if (comm.rank() == 1 && receiverExpects) recvCounts[0] = 1;
        std::vector<float> in(2, 1.0f), out(2);
        comm.allToAllv(in.data(), sendCounts.data(), displs.data(), out.data(),
                       recvCounts.data(), displs.data(), DataType::kFloat32);
      });
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      EXPECT_LT(seconds, 10.0) << "a mismatch must not wait out the timeout";
      // Rank 1 sees the message of the wrong size; rank 0 learns it from rank 1's abort.
      EXPECT_EQ(errorCode(errors[1]), ErrorCode::kMismatch)
          << algorithmName(algo) << ", receiver expects " << receiverExpects << ": "
          << errorText(errors[1]);
      EXPECT_NE(errorText(errors[1]).find(receiverExpects ? "message of 0 bytes from peer rank 0"
                                                          : "message of 4 bytes from peer rank 0"),
                std::string::npos)
          << errorText(errors[1]);
      EXPECT_NE(errorCode(errors[0]), ErrorCode::kTimeout) << errorText(errors[0]);
    }
  }
}

}  // namespace
}  // namespace braid::testing
