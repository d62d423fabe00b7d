// Collectives over the RDMA-shaped transports, ranks as threads: ofi (BRAID_TRANSPORT=ofi, provider
// tcp;ofi_rxm with its data as remote writes and as tagged messages, and udp;ofi_rxd) and verbs
// (BRAID_TRANSPORT=verbs with its defaults, and with 2 queue pairs per peer and 4 KiB writes so
// that slots go as several chunks over alternating queue pairs; both also over the software model
// of libibverbs, which runs everywhere): all-reduce (and the other
// scheduled collectives at a few sizes) at 2 and 4 ranks, checked element by element against the
// closed-form reference (tests/kit/host_case.h). Skips, saying why, where this build lacks the
// library or the machine the provider or an RDMA device (verbs runs in tools/rxe-vm: the
// rxe.verbs test).
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include "common/config.h"
#include "tests/kit/host_case.h"
#include "tests/support/skip.h"
#include "transport/transport.h"
#if BRAID_HAVE_VERBS
#include "transport/verbs/calls.h"
#endif

namespace braid::testing {
namespace {

// "ofi:<provider>" (data as remote writes where it offers RMA), "ofi:<provider>|tagged", "verbs",
// "verbs|qps2_chunk4k", and either with "|model" (over the model of libibverbs).
class RdmaCollectives : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    const std::string param = GetParam();
    const bool verbs = param.rfind("verbs", 0) == 0;
    transport_ = verbs ? "verbs" : "ofi";
    if (verbs) {
#if BRAID_HAVE_VERBS
      transport::verbs::useVerbsModel(param.find("|model") != std::string::npos);
#endif
      const bool tuned = param.find("|qps2_chunk4k") != std::string::npos;
      setenv("BRAID_VERBS_QPS", tuned ? "2" : "1", 1);
      setenv("BRAID_VERBS_CHUNK_BYTES", tuned ? "4096" : "1M", 1);
    } else {
      const std::string provider = param.substr(4, param.find('|') - 4);
      setenv("BRAID_OFI_PROVIDER", provider.c_str(), 1);
      if (param.find("|tagged") != std::string::npos) {
        setenv("BRAID_OFI_RMA", "off", 1);
      } else {
        unsetenv("BRAID_OFI_RMA");
      }
    }
    std::string why;
    const transport::Kind kind = verbs ? transport::Kind::kVerbs : transport::Kind::kOfi;
    if (!transport::kindAvailable(kind, &why)) {
      if (verbs ? BRAID_HAVE_VERBS : BRAID_HAVE_OFI) BRAID_SKIP_NO_DEVICE(why);
      BRAID_SKIP_MISSING(why);
    }
  }
  void TearDown() override {
#if BRAID_HAVE_VERBS
    transport::verbs::useVerbsModel(false);
#endif
  }
  std::string transport_;
};

// Sizes: empty, one element, primes, and a few MiB (float32: 786433 elements = 3 MiB + 4 B).
TEST_P(RdmaCollectives, AllReduceMatchesTheReferenceElementByElement) {
  const std::vector<size_t> counts = {0, 1, 2, 7, 13, 1021, 65537, 786433};
  for (int n : {2, 4}) {
    SCOPED_TRACE(fmt::format("{} ranks over {}", n, GetParam()));
    Options options;
    options.transport = transport_;
    options.timeoutSeconds = 60;
    std::vector<CollectiveCase> cases;
    for (DataType type : {DataType::kFloat32, DataType::kInt32}) {
      for (size_t count : counts) {
        for (bool inPlace : {false, true}) {
          cases.push_back({Collective::kAllReduce, type, RedOp::kSum, count, inPlace, -1});
        }
      }
    }
    cases.push_back({Collective::kAllReduce, DataType::kInt64, RedOp::kMax, 65537, false, -1});
    runCasesOnThreads(
        n, [&](int) { return options; }, cases);
  }
}

// The other scheduled collectives at an odd count, small slots (several pieces and rounds).
TEST_P(RdmaCollectives, EveryScheduledCollectiveMatchesTheReference) {
  for (int n : {2, 4}) {
    SCOPED_TRACE(fmt::format("{} ranks over {}", n, GetParam()));
    Options options;
    options.transport = transport_;
    options.timeoutSeconds = 60;
    options.chunkBytes = 1024;
    std::vector<CollectiveCase> cases;
    for (Collective coll : kScheduledCollectives) {
      const bool rooted = coll == Collective::kBroadcast || coll == Collective::kReduce;
      for (size_t count : {size_t{1}, size_t{1021}}) {
        cases.push_back({coll, DataType::kFloat32, RedOp::kSum, count, false, rooted ? n - 1 : -1});
      }
    }
    runCasesOnThreads(
        n, [&](int) { return options; }, cases);
  }
}

INSTANTIATE_TEST_SUITE_P(Transports, RdmaCollectives,
                         ::testing::Values("ofi:tcp;ofi_rxm", "ofi:tcp;ofi_rxm|tagged",
                                           "ofi:udp;ofi_rxd", "verbs", "verbs|qps2_chunk4k",
                                           "verbs|model", "verbs|qps2_chunk4k|model"),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& c : name)
                             c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
                           return name;
                         });

}  // namespace
}  // namespace braid::testing
