#include "comm/detail/tuner.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <map>
#include <mutex>
#include <set>
#include <tuple>

#include "common/error.h"
#include "common/log.h"

namespace braid::comm {

struct TunerModel::Cache {
  using Key = std::tuple<int, size_t, size_t, int, int, int, bool, uintptr_t, size_t, bool>;
  std::mutex mutex;
  std::map<Key, Choice> decisions;
  std::set<std::pair<int, int>> logged;  // (shape, size class) already explained in the log
};

TunerModel::Cache& cacheOf(const TunerModel& model) { return *model.cache_; }

namespace {

// Up to this many bytes per peer the one-exchange direct schedule beat the 2(n-1)-step ring on
// 2..16 shared-memory ranks (bench/RESULTS.md); the model must beat this rule clearly to change
// a single-node decision.
constexpr size_t kDirectMaxBytes = 32 << 10;
// From this many bytes per peer an all-to-all across nodes runs pairwise (measured on the
// namespace cluster with shallow switch queues, bench/RESULTS.md).
constexpr size_t kPairwiseMinBytes = size_t(4) << 20;
constexpr double kSingleNodeMargin = 1.5;
// Among near-equal candidates keep the configured lanes and the slot-sized chunk.
constexpr double kTieMargin = 1.01;
constexpr size_t kCacheLimit = 4096;
constexpr double kInf = std::numeric_limits<double>::infinity();

std::string bytesText(size_t bytes) {
  if (bytes >= (1u << 30) && bytes % (1u << 30) == 0) return fmt::format("{} GiB", bytes >> 30);
  if (bytes >= (1u << 20) && bytes % (1u << 20) == 0) return fmt::format("{} MiB", bytes >> 20);
  if (bytes >= (1u << 10) && bytes % (1u << 10) == 0) return fmt::format("{} KiB", bytes >> 10);
  return fmt::format("{} B", bytes);
}

std::string usText(double us) {
  if (!std::isfinite(us)) return "-";
  return us < 100 ? fmt::format("{:.2f} us", us) : fmt::format("{:.1f} us", us);
}

// The model for `config`: its own when it describes nranks ranks, else one node of shm ranks
// (shared per rank count, so its cache lives as long as the process).
const TunerModel& modelFor(const TunerConfig& config) {
  if (config.model && config.model->graph().size() == config.nranks) return *config.model;
  if (config.model) {
    static std::once_flag warned;
    std::call_once(warned, [&] {
      BRAID_WARN(
          "tuner: the topology describes {} ranks but the communicator has {}; assuming "
          "one node",
          config.model->graph().size(), config.nranks);
    });
  }
  static std::mutex mutex;
  static std::map<int, std::shared_ptr<const TunerModel>> defaults;
  std::lock_guard<std::mutex> lock(mutex);
  auto& slot = defaults[config.nranks];
  if (!slot) slot = makeTunerModel(topology::uniformGraph(1, config.nranks));
  return *slot;
}

bool singleShmNode(const topology::ClusterGraph& g) {
  if (g.nodes.size() != 1) return false;
  for (const topology::RankInfo& r : g.ranks) {
    if (!g.hasGpuLink || r.gpu < 0) return true;
  }
  return false;
}

std::string singleCopyWhy(const TunerConfig& config) {
  return config.singleCopyWhy ? *config.singleCopyWhy : "peer memory access not tested";
}

// Direct exchanges and single copy run on one lane.
bool oneLane(Algorithm family) {
  return family == Algorithm::kOneShot || family == Algorithm::kSingleCopy ||
         family == Algorithm::kRankOrder;
}

std::vector<int> laneOptions(Algorithm family, int channels) {
  if (oneLane(family)) return {1};
  std::vector<int> out;
  for (int l = 1; l < channels; l *= 2) out.push_back(l);
  out.push_back(channels);
  return out;
}

std::vector<size_t> chunkOptions(Algorithm family, size_t slot, bool pick) {
  std::vector<size_t> out{slot};
  if (pick &&
      (family == Algorithm::kChain || family == Algorithm::kTree || family == Algorithm::kHier)) {
    for (size_t c : {slot / 2, slot / 4}) {
      if (c >= 4096 && c % 8 == 0) out.push_back(c);
    }
  }
  return out;
}

struct Decision {
  std::vector<CandidateReport> reports;  // cheapest first, chosen marked
  Choice choice;
};

Decision evaluate(const TunerConfig& config, const TunerModel& model, Collective shape,
                  size_t inputBytes) {
  const int n = config.nranks;
  auto supports = config.supports ? config.supports : &familySupports;
  const size_t perPeer = directBytesPerPeer(shape, inputBytes, n);
  const size_t capacity = config.slotBytes * config.slots;
  const topology::ClusterGraph& graph = model.graph();
  const int nodes = static_cast<int>(graph.nodes.size());
  const int maxLocal = graph.maxLocalRanks();
  const Collective coll = shape;
  const size_t bytes = modelBytes(shape, inputBytes, n);
  auto price = [&](Algorithm f, int lanes, size_t chunk) {
    return model.cost().predict(coll, bytes, {f, lanes, chunk});
  };
  Decision d;

  if (onlyDirect(shape)) {
    // Gather and scatter have one schedule, the direct family's (lanes per peer, so no per-peer
    // size limit); all-to-all two: direct and the pairwise exchange, chosen by the model.
    std::vector<Algorithm> families{Algorithm::kOneShot};
    if (supports(Algorithm::kPairwise, shape)) families.push_back(Algorithm::kPairwise);
    std::string names;
    for (Algorithm f : families) names += fmt::format("{}{}", names.empty() ? "" : ", ", algorithmName(f));
    const bool forced = config.forced != Algorithm::kAuto;
    if (forced) {
      BRAID_ENFORCE(std::find(families.begin(), families.end(), config.forced) != families.end(),
                    ErrorCode::kInvalidUsage,
                    "algorithm '{}' (BRAID_ALGO) cannot run {}; choose one of: auto, {}",
                    algorithmName(config.forced), collectiveName(shape), names);
      families = {config.forced};
    }
    for (Algorithm f : families) {
      const topology::Prediction p = price(f, 1, config.slotBytes);
      const std::string why = forced               ? "forced by BRAID_ALGO: "
                              : families.size() == 1 ? "the only schedule of " +
                                                           std::string(collectiveName(shape)) + ": "
                                                     : "";
      d.reports.push_back({f, 1, config.slotBytes, p.timeUs, "", why + p.detail, false});
    }
    // Direct (listed first) unless pairwise is clearly cheaper: with 2 ranks they are one thing.
    CandidateReport* winner = &d.reports.front();
    for (CandidateReport& r : d.reports)
      if (r.predictedUs * kTieMargin < winner->predictedUs) winner = &r;
    // Across nodes, large blocks go pairwise whatever the model says: direct has every rank's
    // blocks converge on each NIC at once, and a switch port with a shallow buffer drops them
    // (incast), which the model does not price (bench/RESULTS.md, "all-to-all: direct or
    // pairwise").
    if (!forced && nodes > 1 && perPeer >= kPairwiseMinBytes) {
      for (CandidateReport& r : d.reports) {
        if (r.family != Algorithm::kPairwise) continue;
        if (&r != winner) r.detail += " (kept: the measured incast rule)";
        winner = &r;
      }
    }
    winner->chosen = true;
    d.choice = {winner->family, 1, config.slotBytes,
                std::isfinite(winner->predictedUs) ? winner->predictedUs : 0};
    std::stable_sort(d.reports.begin(), d.reports.end(),
                     [](const CandidateReport& a, const CandidateReport& b) {
                       return a.predictedUs < b.predictedUs;
                     });
    return d;
  }

  if (config.deterministic && reduces(shape) && n > 1) {
    // Only the families that reduce in rank order (reduceMany over every rank's contribution):
    // oneshot while it fits the slots (small), single copy where chosen, else rank order.
    const bool small = perPeer <= std::min(kDirectMaxBytes, capacity);
    const bool singleCopy = config.singleCopy && nodes == 1 &&
                            supports(Algorithm::kSingleCopy, shape) &&
                            inputBytes >= config.singleCopyMinBytes;
    Algorithm family = small ? Algorithm::kOneShot
                       : singleCopy ? Algorithm::kSingleCopy
                                    : Algorithm::kRankOrder;
    std::string why = "BRAID_DETERMINISTIC=1: reductions in rank order";
    if (config.forced != Algorithm::kAuto) {
      family = config.forced;
      BRAID_ENFORCE(family == Algorithm::kOneShot || family == Algorithm::kSingleCopy ||
                        family == Algorithm::kRankOrder,
                    ErrorCode::kInvalidUsage,
                    "algorithm '{}' (BRAID_ALGO) does not reduce in rank order, which "
                    "BRAID_DETERMINISTIC=1 asks for; choose auto, oneshot, singlecopy or rankorder",
                    algorithmName(family));
      why = "forced by BRAID_ALGO, " + why;
    }
    BRAID_ENFORCE(supports(family, shape), ErrorCode::kInvalidUsage,
                  "algorithm '{}' (BRAID_ALGO) cannot run {}", algorithmName(family),
                  collectiveName(shape));
    BRAID_ENFORCE(family != Algorithm::kOneShot || perPeer <= capacity, ErrorCode::kInvalidUsage,
                  "algorithm 'oneshot' (BRAID_ALGO) moves at most {} bytes per peer (slots x "
                  "chunk); this {} needs {}",
                  capacity, collectiveName(shape), perPeer);
    BRAID_ENFORCE(family != Algorithm::kSingleCopy || (config.singleCopy && nodes == 1),
                  ErrorCode::kInvalidUsage,
                  "algorithm 'singlecopy' (BRAID_ALGO) needs every rank on one host, each allowed "
                  "to read the others' memory; here: {}",
                  nodes > 1 ? "the ranks are on several hosts" : singleCopyWhy(config));
    const topology::Prediction p = price(family, 1, config.slotBytes);
    d.choice = {family, 1, config.slotBytes, std::isfinite(p.timeUs) ? p.timeUs : 0};
    d.reports.push_back({family, 1, config.slotBytes, p.timeUs, "", why + ": " + p.detail, true});
    return d;
  }

  if (config.forced != Algorithm::kAuto) {
    const Algorithm family = config.forced;
    BRAID_ENFORCE(supports(family, shape), ErrorCode::kInvalidUsage,
                  "algorithm '{}' (BRAID_ALGO) cannot run {}; choose one of: {}",
                  algorithmName(config.forced), collectiveName(shape),
                  isRooted(shape) ? "chain, oneshot" : "ring, oneshot");
    BRAID_ENFORCE(family != Algorithm::kSingleCopy || (config.singleCopy && nodes == 1),
                  ErrorCode::kInvalidUsage,
                  "algorithm 'singlecopy' (BRAID_ALGO) needs every rank on one host, each allowed "
                  "to read the others' memory; here: {}",
                  nodes > 1 ? "the ranks are on several hosts" : singleCopyWhy(config));
    BRAID_ENFORCE(family != Algorithm::kOneShot || perPeer <= capacity, ErrorCode::kInvalidUsage,
                  "algorithm 'oneshot' (BRAID_ALGO) moves at most {} bytes per peer (slots x "
                  "chunk); this {} needs {}",
                  capacity, collectiveName(shape), perPeer);
    // A forced hier runs on any layout: one node is its intra-node phases alone, one rank per
    // node a ring (auto only considers it for several nodes with several ranks on one).
    d.choice.family = family;
    d.choice.lanes = oneLane(family) ? 1 : config.channels;
    d.choice.chunkBytes = config.slotBytes;
    topology::Prediction p = price(family, d.choice.lanes, d.choice.chunkBytes);
    d.choice.predictedUs = std::isfinite(p.timeUs) ? p.timeUs : 0;
    d.reports.push_back({family, d.choice.lanes, d.choice.chunkBytes, p.timeUs, "",
                         "forced by BRAID_ALGO: " + p.detail, true});
    return d;
  }

  if (n == 1) {
    d.choice = {Algorithm::kOneShot, 1, config.slotBytes, 0};
    d.reports.push_back({Algorithm::kOneShot, 1, config.slotBytes, 0, "", "one rank", true});
    return d;
  }

  for (Algorithm family : {Algorithm::kOneShot, Algorithm::kRing, Algorithm::kChain,
                           Algorithm::kTree, Algorithm::kHier, Algorithm::kSingleCopy,
                           Algorithm::kRankOrder}) {
    CandidateReport r;
    r.family = family;
    r.predictedUs = kInf;
    if (!supports(family, shape)) {
      r.excluded = fmt::format("cannot run {}", collectiveName(shape));
    } else if (family == Algorithm::kOneShot && perPeer > capacity) {
      r.excluded = fmt::format("{} per peer exceed slots x chunk = {}", bytesText(perPeer),
                               bytesText(capacity));
    } else if (family == Algorithm::kHier && nodes < 2) {
      r.excluded = config.model ? "all ranks are on one node" : "node layout unknown (one node)";
    } else if (family == Algorithm::kHier && maxLocal < 2) {
      r.excluded = "one rank per node";
    } else if (family == Algorithm::kRankOrder) {
      r.excluded = "only with BRAID_DETERMINISTIC=1 (it needs a scratch copy of the buffer)";
    } else if (family == Algorithm::kSingleCopy && nodes > 1) {
      r.excluded = "ranks on several nodes";
    } else if (family == Algorithm::kSingleCopy && !config.singleCopy) {
      r.excluded = singleCopyWhy(config);
    } else if (family == Algorithm::kSingleCopy && inputBytes < config.singleCopyMinBytes) {
      r.excluded = config.singleCopyMinBytes == SIZE_MAX
                       ? std::string("only when forced or BRAID_SINGLE_COPY_BYTES is set (it "
                                     "measured slower than the ring here)")
                       : fmt::format("below {} (BRAID_SINGLE_COPY_BYTES)",
                                     bytesText(config.singleCopyMinBytes));
    }
    if (r.excluded.empty()) {
      // The configured lanes and the slot-sized chunk first; others only when clearly cheaper.
      r.lanes = oneLane(family) ? 1 : config.channels;
      r.chunkBytes = config.slotBytes;
      topology::Prediction best = price(family, r.lanes, r.chunkBytes);
      for (int lanes : laneOptions(family, config.channels)) {
        for (size_t chunk : chunkOptions(family, config.slotBytes, config.pickChunk)) {
          topology::Prediction p = price(family, lanes, chunk);
          if (p.timeUs * kTieMargin < best.timeUs) {
            best = p;
            r.lanes = lanes;
            r.chunkBytes = chunk;
          }
        }
      }
      r.predictedUs = best.timeUs;
      r.detail = best.detail;
    }
    d.reports.push_back(std::move(r));
  }
  std::stable_sort(d.reports.begin(), d.reports.end(),
                   [](const CandidateReport& a, const CandidateReport& b) {
                     return a.predictedUs < b.predictedUs;
                   });
  CandidateReport* winner = &d.reports.front();
  BRAID_ENFORCE(std::isfinite(winner->predictedUs), ErrorCode::kInternal,
                "tuner: no algorithm can run {} of {} bytes on {} ranks", collectiveName(shape),
                inputBytes, n);

  // A single node of shared-memory ranks keeps the measured rule unless the model clearly
  // disagrees.
  if (singleShmNode(graph)) {
    const bool singleCopy = config.singleCopy && supports(Algorithm::kSingleCopy, shape) &&
                            inputBytes >= config.singleCopyMinBytes;
    const Algorithm legacy = singleCopy ? Algorithm::kSingleCopy
                             : perPeer <= std::min(kDirectMaxBytes, capacity) ? Algorithm::kOneShot
                             : isRooted(shape)                              ? Algorithm::kChain
                                                                            : Algorithm::kRing;
    const int legacyLanes = oneLane(legacy) ? 1 : config.channels;
    for (CandidateReport& r : d.reports) {
      if (r.family != legacy || !r.excluded.empty()) continue;
      topology::Prediction p = price(legacy, legacyLanes, config.slotBytes);
      if (winner->predictedUs * kSingleNodeMargin > p.timeUs) {
        const bool overruled = p.timeUs > winner->predictedUs;
        r.lanes = legacyLanes;
        r.chunkBytes = config.slotBytes;
        r.predictedUs = p.timeUs;
        r.detail = p.detail + (overruled ? " (kept: the measured single-node rule)" : "");
        winner = &r;
      }
    }
  }
  winner->chosen = true;
  d.choice = {winner->family, winner->lanes, winner->chunkBytes, winner->predictedUs};
  std::stable_sort(d.reports.begin(), d.reports.end(),
                   [](const CandidateReport& a, const CandidateReport& b) {
                     return a.predictedUs < b.predictedUs;
                   });
  return d;
}

std::string oneLine(const TunerConfig& config, const TunerModel& model, Collective shape,
                    size_t inputBytes, const std::vector<CandidateReport>& reports) {
  std::string out = fmt::format("tuner: {} of {} on {} rank(s), {} node(s):", collectiveName(shape),
                                bytesText(inputBytes), config.nranks, model.graph().nodes.size());
  for (const CandidateReport& r : reports) {
    if (!r.excluded.empty()) {
      out += fmt::format(" {} excluded ({});", algorithmName(r.family), r.excluded);
    } else {
      out += fmt::format(" {}{} x{} chunk {} {}{};", r.chosen ? "CHOSEN " : "",
                         algorithmName(r.family), r.lanes, bytesText(r.chunkBytes),
                         usText(r.predictedUs), r.chosen ? fmt::format(" [{}]", r.detail) : "");
    }
  }
  out.pop_back();
  return out;
}

Decision decide(const TunerConfig& config, Collective shape, size_t inputBytes) {
  return evaluate(config, modelFor(config), shape, inputBytes);
}

}  // namespace

TunerModel::TunerModel(topology::ClusterGraph graph)
    : cost_(std::move(graph)), cache_(std::make_unique<Cache>()) {}
TunerModel::~TunerModel() = default;

std::shared_ptr<const TunerModel> makeTunerModel(topology::ClusterGraph graph) {
  return std::make_shared<const TunerModel>(std::move(graph));
}

size_t modelBytes(Collective shape, size_t inputBytes, int nranks) {
  const bool gathers = shape == Collective::kAllGather || shape == Collective::kGather;
  return gathers ? inputBytes * nranks : inputBytes;
}

size_t directBytesPerPeer(Collective shape, size_t inputBytes, int nranks) {
  const bool blocks = shape == Collective::kReduceScatter || shape == Collective::kAllToAll ||
                      shape == Collective::kScatter;
  return blocks ? inputBytes / nranks : inputBytes;
}

Choice choose(const TunerConfig& config, Collective shape, size_t inputBytes) {
  if (config.nranks == 1 && config.forced == Algorithm::kAuto) {
    return {Algorithm::kOneShot, 1, config.slotBytes, 0};
  }
  const TunerModel& model = modelFor(config);
  TunerModel::Cache& cache = cacheOf(model);
  const TunerModel::Cache::Key key{
      static_cast<int>(shape), inputBytes,
      config.slotBytes,        config.slots,
      config.channels,         static_cast<int>(config.forced),
      config.pickChunk,        reinterpret_cast<uintptr_t>(config.supports),
      config.singleCopy ? config.singleCopyMinBytes : SIZE_MAX, config.deterministic};
  {
    std::lock_guard<std::mutex> lock(cache.mutex);
    auto it = cache.decisions.find(key);
    if (it != cache.decisions.end()) return it->second;
  }
  Decision d = evaluate(config, model, shape, inputBytes);  // throws for impossible forced ones
  std::lock_guard<std::mutex> lock(cache.mutex);
  if (cache.decisions.size() >= kCacheLimit) cache.decisions.clear();
  cache.decisions.emplace(key, d.choice);
  if (logEnabled(LogLevel::kInfo, LogSubsys::kTune) &&
      cache.logged.emplace(static_cast<int>(shape), std::bit_width(inputBytes)).second) {
    BRAID_INFO("{}", oneLine(config, model, shape, inputBytes, d.reports));
  }
  return d.choice;
}

std::vector<CandidateReport> rankCandidates(const TunerConfig& config, Collective shape,
                                            size_t inputBytes) {
  return decide(config, shape, inputBytes).reports;
}

std::string explain(const TunerConfig& config, Collective shape, size_t inputBytes) {
  const TunerModel& model = modelFor(config);
  Decision d = evaluate(config, model, shape, inputBytes);
  std::string out = fmt::format(
      "{} of {} per rank on {} rank(s), {} node(s): {} x{} lanes, chunk {}, predicted {}\n",
      collectiveName(shape), bytesText(inputBytes), config.nranks, model.graph().nodes.size(),
      algorithmName(d.choice.family), d.choice.lanes, bytesText(d.choice.chunkBytes),
      usText(d.choice.predictedUs));
  for (const CandidateReport& r : d.reports) {
    if (!r.excluded.empty()) {
      out += fmt::format("  {:<8} excluded: {}\n", algorithmName(r.family), r.excluded);
      continue;
    }
    std::string ratio = r.chosen || d.choice.predictedUs <= 0
                            ? std::string(r.chosen ? "chosen" : "")
                            : fmt::format("{:.2f}x", r.predictedUs / d.choice.predictedUs);
    out += fmt::format("  {:<8} x{:<2} chunk {:>8}  {:>12}  {:<7} {}\n", algorithmName(r.family),
                       r.lanes, bytesText(r.chunkBytes), usText(r.predictedUs), ratio, r.detail);
  }
  return out;
}

}  // namespace braid::comm
