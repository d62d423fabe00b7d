#include "trainer/pipeline/partition.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <limits>

#include "common/error.h"

namespace braid::trainer {

namespace {

/// The split of layers [0, n) into k non-empty stages whose score is best, where a split's score
/// folds its stages' costs (prefix differences) with `fold` starting from `none`, `better(a, b)`
/// says score a beats b, `unset` loses to every score, and a stage may cost at most `cap`.
/// Dynamic programming over (stages, layers); among equal scores the earliest boundaries.
template <typename Fold, typename Better>
StageBounds bestSplit(const std::vector<double>& prefix, size_t k, double cap, double none,
                      double unset, Fold fold, Better better) {
  const size_t n = prefix.size() - 1;
  // score[j][i]: the best score of layers [0, i) in j stages; from[j][i]: where the last of
  // those stages starts.
  std::vector<std::vector<double>> score(k + 1, std::vector<double>(n + 1, unset));
  std::vector<std::vector<size_t>> from(k + 1, std::vector<size_t>(n + 1, 0));
  score[0][0] = none;
  for (size_t j = 1; j <= k; ++j) {
    for (size_t i = j; i <= n; ++i) {
      for (size_t start = j - 1; start < i; ++start) {
        const double cost = prefix[i] - prefix[start];
        if (cost > cap || score[j - 1][start] == unset) continue;
        const double candidate = fold(score[j - 1][start], cost);
        if (score[j][i] == unset || better(candidate, score[j][i])) {
          score[j][i] = candidate;
          from[j][i] = start;
        }
      }
    }
  }
  StageBounds bounds(k + 1, 0);
  bounds[k] = n;
  for (size_t j = k; j > 0; --j) bounds[j - 1] = from[j][bounds[j]];
  return bounds;
}

}  // namespace

StageBounds partitionLayers(const std::vector<double>& costs, int stages) {
  const size_t n = costs.size();
  BRAID_ENFORCE(stages >= 1 && static_cast<size_t>(stages) <= n, ErrorCode::kInvalidUsage,
                "--stages {}: the model has {} top-level layers and every stage needs at least "
                "one (use 1..{})",
                stages, n, n);
  std::vector<double> prefix(n + 1, 0.0);
  for (size_t i = 0; i < n; ++i) prefix[i + 1] = prefix[i] + costs[i];
  const auto k = static_cast<size_t>(stages);
  constexpr double kInf = std::numeric_limits<double>::infinity();
  auto largest = [](double a, double b) { return std::max(a, b); };
  auto smallest = [](double a, double b) { return std::min(a, b); };
  // First the smallest largest stage; then, among the splits that reach it, the one whose
  // smallest stage is largest (so a parameter-free layer does not become a stage of its own
  // while a neighbour could take it).
  const StageBounds first = bestSplit(prefix, k, kInf, 0.0, kInf, largest, std::less<double>());
  double cap = 0;
  for (size_t s = 0; s < k; ++s) cap = std::max(cap, prefix[first[s + 1]] - prefix[first[s]]);
  return bestSplit(prefix, k, cap, kInf, -kInf, smallest, std::greater<double>());
}

std::vector<ParamRange> layerParamRanges(Sequential& net, size_t numParams) {
  std::vector<ParamRange> ranges(net.size());
  size_t end = numParams;
  for (size_t i = net.size(); i-- > 0;) {
    const size_t begin = net.layer(i).paramBegin();
    if (begin == Layer::kNoParams) {
      ranges[i] = {end, end};
    } else {
      ranges[i] = {begin, end};
      end = begin;
    }
  }
  return ranges;
}

ParamRange stageParamRange(const std::vector<ParamRange>& layers, size_t first, size_t last) {
  BRAID_ENFORCE(first < last && last <= layers.size(), ErrorCode::kInvalidUsage,
                "stage layers [{}, {}) of {}", first, last, layers.size());
  return {layers[first].begin, layers[last - 1].end};
}

std::vector<double> paramCosts(const std::vector<ParamRange>& layers) {
  std::vector<double> costs;
  for (const ParamRange& r : layers) costs.push_back(static_cast<double>(r.size()));
  return costs;
}

std::string formatBounds(const StageBounds& bounds) {
  std::string text;
  for (size_t s = 0; s + 1 < bounds.size(); ++s) {
    text += fmt::format("{}[{}, {})", s ? " " : "", bounds[s], bounds[s + 1]);
  }
  return text;
}

}  // namespace braid::trainer
