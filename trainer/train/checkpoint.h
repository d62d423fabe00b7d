// Training checkpoints of braid-train: a self-checking binary file written atomically, and the
// search for the newest complete one in a directory.
#pragma once

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "trainer/data/sampler.h"

namespace braid::trainer {

/// What must match between the run that wrote a checkpoint and the run that resumes from it.
struct CheckpointFingerprint {
  uint64_t layoutHash = 0;   ///< ParamStore::layoutHash(): parameter names, shapes, offsets
  std::string model;         ///< --model
  int32_t ranks = 0;         ///< rank count (the per-rank batches and sampler slices depend on it)
  int64_t globalBatch = 0;   ///< --batch
  std::string optimizer;     ///< optimizerKindName()
  uint64_t seed = 0;         ///< --seed: the sampler's shuffle of epoch e is drawn from seed + e
  int64_t trainSamples = 0;  ///< training samples used (after --limit-train)
};

/// The fp16 loss scaler's state (LossScaler), present only in checkpoints of --precision fp16.
struct CheckpointLossScale {
  float scale = 0;
  int64_t goodSteps = 0;     ///< good steps since the last overflow or growth
  int64_t skippedSteps = 0;  ///< steps skipped so far (the optimizer has step - skipped steps)
};

/// Everything a resumed run needs to continue bit-identically. There is no other random state:
/// the shuffle is a pure function of (seed, epoch) and the layers draw nothing while training.
struct CheckpointState {
  CheckpointFingerprint fingerprint;
  int64_t step = 0;             ///< optimizer steps completed
  SamplerState sampler;         ///< the batch the next step takes (epoch, batch within the epoch)
  std::vector<float> params;    ///< flat parameters
  std::vector<float> buffers;   ///< flat non-trained buffers (BN running statistics, rank 0's)
  std::vector<char> optimizer;  ///< Optimizer::saveState()
  std::optional<CheckpointLossScale> lossScale;  ///< fp16 only; an optional trailing section
};

/// Current file format version (kCheckpointMagic, then this).
inline constexpr uint32_t kCheckpointVersion = 1;

/// Serialises `state`: magic "BRAIDCKP", version, total length, fingerprint, step, sampler state,
/// parameters, buffers, optimizer state (host little-endian), with fp16 the optional loss-scale
/// section (tag "LSCL", scale, good steps, skipped steps), then FNV-1a 64 of all bytes before.
/// Without the section the bytes are exactly those of the format before fp16 existed.
std::vector<char> encodeCheckpoint(const CheckpointState& state);

/// Parses bytes made by encodeCheckpoint(). Throws Error(kInvalidUsage) naming `file` when the
/// magic, version, length or checksum is wrong (truncated or corrupt file).
CheckpointState decodeCheckpoint(const std::vector<char>& bytes, const std::string& file);

/// Throws Error(kInvalidUsage) naming `file` and every field of `saved` that differs from
/// `expected` (model, layout, rank count, global batch, optimizer, seed, training samples).
void checkFingerprint(const CheckpointFingerprint& saved, const CheckpointFingerprint& expected,
                      const std::string& file);

/// Writes `state` to DIR/ckpt-<step>.bin atomically (DIR/tmp-XXXXXX, fsync, rename, fsync of
/// DIR; DIR is created if missing), then deletes all but the newest `keep` ckpt-*.bin files.
/// Returns the path written. Throws Error(kSystemError) on I/O failure.
std::string writeCheckpoint(const std::string& dir, const CheckpointState& state, int keep = 2);

/// DIR's ckpt-<step>.bin files, newest (highest step) first.
std::vector<std::string> listCheckpoints(const std::string& dir);

/// A checkpoint file read whole and verified (magic, version, length, checksum).
struct LoadedCheckpoint {
  std::string path;
  std::vector<char> bytes;
};

/// The newest checkpoint in `dir` that passes decodeCheckpoint(); files that fail are named with
/// the reason on `warn` (nullptr: silently) and skipped. Throws Error(kInvalidUsage) when `dir`
/// has no checkpoint, or none that is complete (naming each refused file and why).
LoadedCheckpoint loadNewestCheckpoint(const std::string& dir, std::FILE* warn);

}  // namespace braid::trainer
