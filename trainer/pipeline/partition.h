// Splitting a model's top-level layers into contiguous pipeline stages of balanced cost.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "trainer/nn/sequential.h"
#include "trainer/train/flat_range.h"

namespace braid::trainer {

/// Stage s runs layers [bounds[s], bounds[s+1]); bounds has stages + 1 entries, from 0 to the
/// number of layers, every stage non-empty.
using StageBounds = std::vector<size_t>;

/// The contiguous split of `costs` (one per layer, >= 0) into `stages` non-empty stages whose
/// largest stage cost is the smallest possible, and among those the one whose smallest stage
/// cost is the largest (exact, by dynamic programming); then the earliest boundaries. Throws
/// kInvalidUsage naming both numbers when stages < 1 or stages > costs.size() (every stage needs a
/// layer).
StageBounds partitionLayers(const std::vector<double>& costs, int stages);

/// A slice [begin, end) of the flat parameter buffer (empty when begin == end).
using ParamRange = FlatRange;

/// Each top-level layer's parameters: layers register contiguously in forward order, so layer
/// i's run from its paramBegin() to the next layer's that has parameters (or `numParams`).
std::vector<ParamRange> layerParamRanges(Sequential& net, size_t numParams);

/// The parameters of layers [first, last): the union of their ranges (contiguous).
ParamRange stageParamRange(const std::vector<ParamRange>& layers, size_t first, size_t last);

/// "--partition params": each layer's parameter count as its cost.
std::vector<double> paramCosts(const std::vector<ParamRange>& layers);

/// "[0, 2) [2, 6)" for logs and errors.
std::string formatBounds(const StageBounds& bounds);

}  // namespace braid::trainer
