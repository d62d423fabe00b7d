// Sharding a data set across ranks like PyTorch's DistributedSampler, with a resumable cursor.
#pragma once

#include <cstdint>
#include <vector>

namespace braid::trainer {

/// How a DistributedSampler deals out samples. All ranks must pass the same values except rank.
struct SamplerOptions {
  int64_t datasetSize = 0;  ///< samples in the data set (N)
  int rank = 0;             ///< this rank, 0..worldSize-1
  int worldSize = 1;        ///< ranks sharing the data set (R)
  int64_t globalBatch = 0;  ///< samples per step over all ranks, a multiple of worldSize (next())
  uint64_t seed = 0;        ///< shared seed; epoch e shuffles with seed + e
  bool shuffle = true;      ///< false: every epoch takes samples in file order
  bool dropLastBatch = false;  ///< true: skip the epoch's last batch when it is short
};

/// A position in the stream of batches: the next batch next() returns. Two integers, so a
/// checkpoint stores it as is.
struct SamplerState {
  uint64_t epoch = 0;
  uint64_t batch = 0;
  bool operator==(const SamplerState&) const = default;
};

/// Each epoch e, all ranks compute the same permutation of 0..N-1: a Fisher-Yates shuffle driven
/// by xoshiro256** seeded with SplitMix64(seed + e) (rng.h), so the order is identical on every
/// platform. The last N mod R entries of the permutation are dropped (PyTorch's drop_last=True),
/// so every rank gets exactly N / R samples; since the permutation changes per epoch, a different
/// tail is dropped each epoch. Rank r takes permutation positions r, r + R, r + 2R, ... (PyTorch's
/// strided split), and its batch k is its samples [k*b, (k+1)*b) with b = globalBatch / R. So the
/// union of the ranks' batch k is exactly permutation positions [k*B, (k+1)*B): an R-rank run
/// with global batch B sees the same samples per step as a 1-rank run with batch B. The last
/// batch of an epoch is shorter (the same length on every rank) unless dropLastBatch.
/// Not thread-safe; one sampler per rank.
class DistributedSampler {
 public:
  /// Throws Error(kInvalidUsage) when datasetSize < worldSize, rank is outside 0..worldSize-1,
  /// or globalBatch is not a positive multiple of worldSize.
  explicit DistributedSampler(const SamplerOptions& options);

  const SamplerOptions& options() const { return options_; }
  /// Samples each rank gets per epoch: N / R (the tail of N mod R is dropped).
  int64_t samplesPerRank() const;
  /// globalBatch / R; throws Error(kInvalidUsage) saying so when globalBatch is not a positive
  /// multiple of R.
  int64_t perRankBatch(int64_t globalBatch) const;
  /// Batches per epoch for `globalBatch` (every rank the same). Throws as perRankBatch, and when
  /// dropLastBatch leaves no batch at all.
  int64_t batchesPerEpoch(int64_t globalBatch) const;

  /// The permutation of all N indices for `epoch` (identical on every rank).
  std::vector<int64_t> permutation(uint64_t epoch) const;
  /// This rank's samplesPerRank() indices for `epoch`, in the order they are batched.
  std::vector<int64_t> rankIndices(uint64_t epoch) const;
  /// This rank's batches for `epoch`, each globalBatch / R indices (the last maybe fewer).
  /// Throws as batchesPerEpoch.
  std::vector<std::vector<int64_t>> batches(uint64_t epoch, int64_t globalBatch) const;

  /// Cursor, batching by options().globalBatch: fills `out` with this rank's batch at state() and
  /// advances to the next batch. Returns false (and empties `out`) at the end of the epoch; call
  /// setEpoch(epoch + 1) to go on.
  bool next(std::vector<int64_t>& out);
  /// Moves the cursor to the start of `epoch`.
  void setEpoch(uint64_t epoch);
  /// The cursor: the epoch and the index of the batch next() returns next.
  SamplerState state() const { return state_; }
  /// Moves the cursor to a saved state, after which next() returns exactly what it would have
  /// returned at that point. Throws Error(kInvalidUsage) when state.batch exceeds the batches
  /// per epoch (a checkpoint from another data set, batch size or rank count).
  void restore(const SamplerState& state);

 private:
  const std::vector<int64_t>& slice(uint64_t epoch);

  SamplerOptions options_;
  SamplerState state_;
  int64_t batchesPerEpoch_ = 0;
  bool cached_ = false;
  uint64_t cachedEpoch_ = 0;
  std::vector<int64_t> cachedSlice_;
};

}  // namespace braid::trainer
