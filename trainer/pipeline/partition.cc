#include "trainer/pipeline/partition.h"

#include <fmt/format.h>

#include <limits>

#include "common/error.h"

namespace braid::trainer {

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
  // best[j][i]: the smallest largest-stage cost of layers [0, i) in j stages; from[j][i]: where
  // the last of those stages starts.
  std::vector<std::vector<double>> best(k + 1, std::vector<double>(n + 1, kInf));
  std::vector<std::vector<size_t>> from(k + 1, std::vector<size_t>(n + 1, 0));
  best[0][0] = 0;
  for (size_t j = 1; j <= k; ++j) {
    for (size_t i = j; i <= n; ++i) {
      for (size_t start = j - 1; start < i; ++start) {
        const double worst = std::max(best[j - 1][start], prefix[i] - prefix[start]);
        if (worst < best[j][i]) {
          best[j][i] = worst;
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
