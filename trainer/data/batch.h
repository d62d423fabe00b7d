// Assembling a batch: copying selected samples into contiguous caller buffers.
#pragma once

#include <cstdint>
#include <span>

#include "trainer/data/dataset.h"

namespace braid::trainer {

/// Copies sample indices[i]'s image to images[i*imageSize .. (i+1)*imageSize) and its label to
/// labels[i], for every i. The buffers may be longer than needed (e.g. sized for a full batch when
/// the epoch's last batch is short); the rest is left untouched. Throws Error(kInvalidUsage)
/// naming the index, or both sizes, when an index is outside 0..count-1 or a buffer is too small;
/// nothing is written then.
void gatherBatch(const Dataset& data, std::span<const int64_t> indices, std::span<float> images,
                 std::span<int32_t> labels);

}  // namespace braid::trainer
