#include "trainer/data/sampler.h"

#include <algorithm>
#include <numeric>

#include "common/error.h"
#include "trainer/data/rng.h"

namespace braid::trainer {

DistributedSampler::DistributedSampler(const SamplerOptions& options) : options_(options) {
  BRAID_ENFORCE(options.worldSize > 0, ErrorCode::kInvalidUsage,
                "DistributedSampler: world size must be positive, got {}", options.worldSize);
  BRAID_ENFORCE(options.rank >= 0 && options.rank < options.worldSize, ErrorCode::kInvalidUsage,
                "DistributedSampler: rank {} is outside 0..{}", options.rank,
                options.worldSize - 1);
  BRAID_ENFORCE(options.datasetSize >= options.worldSize, ErrorCode::kInvalidUsage,
                "DistributedSampler on rank {}: a data set of {} samples cannot give each of {} "
                "ranks a sample",
                options.rank, options.datasetSize, options.worldSize);
  batchesPerEpoch_ = batchesPerEpoch(options.globalBatch);
}

int64_t DistributedSampler::samplesPerRank() const {
  return options_.datasetSize / options_.worldSize;
}

int64_t DistributedSampler::perRankBatch(int64_t globalBatch) const {
  BRAID_ENFORCE(globalBatch > 0 && globalBatch % options_.worldSize == 0, ErrorCode::kInvalidUsage,
                "rank {}: global batch {} is not a positive multiple of the {} ranks; the "
                "per-rank batch is global batch / ranks, so pick a multiple of {}",
                options_.rank, globalBatch, options_.worldSize, options_.worldSize);
  return globalBatch / options_.worldSize;
}

int64_t DistributedSampler::batchesPerEpoch(int64_t globalBatch) const {
  const int64_t b = perRankBatch(globalBatch);
  const int64_t n = samplesPerRank();
  const int64_t count = options_.dropLastBatch ? n / b : (n + b - 1) / b;
  BRAID_ENFORCE(count > 0, ErrorCode::kInvalidUsage,
                "rank {}: global batch {} needs {} samples per rank but each of the {} ranks has "
                "only {} of the {}, and dropLastBatch leaves no batch",
                options_.rank, globalBatch, b, options_.worldSize, n, options_.datasetSize);
  return count;
}

std::vector<int64_t> DistributedSampler::permutation(uint64_t epoch) const {
  std::vector<int64_t> order(static_cast<size_t>(options_.datasetSize));
  std::iota(order.begin(), order.end(), int64_t{0});
  if (options_.shuffle) {
    Xoshiro256 rng(options_.seed + epoch);
    shuffleInPlace(order.data(), order.size(), rng);
  }
  return order;
}

std::vector<int64_t> DistributedSampler::rankIndices(uint64_t epoch) const {
  const std::vector<int64_t> order = permutation(epoch);
  const int64_t n = samplesPerRank();
  std::vector<int64_t> mine(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) mine[i] = order[options_.rank + i * options_.worldSize];
  return mine;
}

std::vector<std::vector<int64_t>> DistributedSampler::batches(uint64_t epoch,
                                                              int64_t globalBatch) const {
  const int64_t count = batchesPerEpoch(globalBatch);
  const int64_t b = perRankBatch(globalBatch);
  const std::vector<int64_t> mine = rankIndices(epoch);
  std::vector<std::vector<int64_t>> out(static_cast<size_t>(count));
  for (int64_t k = 0; k < count; ++k) {
    const int64_t end = std::min<int64_t>((k + 1) * b, static_cast<int64_t>(mine.size()));
    out[k].assign(mine.begin() + k * b, mine.begin() + end);
  }
  return out;
}

const std::vector<int64_t>& DistributedSampler::slice(uint64_t epoch) {
  if (!cached_ || cachedEpoch_ != epoch) {
    cachedSlice_ = rankIndices(epoch);
    cachedEpoch_ = epoch;
    cached_ = true;
  }
  return cachedSlice_;
}

bool DistributedSampler::next(std::vector<int64_t>& out) {
  out.clear();
  if (state_.batch >= static_cast<uint64_t>(batchesPerEpoch_)) return false;
  const std::vector<int64_t>& mine = slice(state_.epoch);
  const int64_t b = options_.globalBatch / options_.worldSize;
  const int64_t begin = static_cast<int64_t>(state_.batch) * b;
  const int64_t end = std::min<int64_t>(begin + b, static_cast<int64_t>(mine.size()));
  out.assign(mine.begin() + begin, mine.begin() + end);
  ++state_.batch;
  return true;
}

void DistributedSampler::setEpoch(uint64_t epoch) { state_ = SamplerState{epoch, 0}; }

void DistributedSampler::restore(const SamplerState& state) {
  BRAID_ENFORCE(state.batch <= static_cast<uint64_t>(batchesPerEpoch_), ErrorCode::kInvalidUsage,
                "rank {}: sampler state (epoch {}, batch {}) is past the {} batches of an epoch "
                "here ({} samples, global batch {}, {} ranks); was it saved with other settings?",
                options_.rank, state.epoch, state.batch, batchesPerEpoch_, options_.datasetSize,
                options_.globalBatch, options_.worldSize);
  state_ = state;
}

}  // namespace braid::trainer
