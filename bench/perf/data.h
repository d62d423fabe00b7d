// Seed-based validation data, as nccl-tests: every rank fills its input from a deterministic
// function of (rank, index, seed) and computes the expected output itself, so no gather is
// needed. Values are small integers (and, for prod, 1 or 2) so every sum and product is exact in
// every type, half and bfloat16 included, up to 56 ranks.
#pragma once

#include <cstddef>
#include <cstdint>

#include "bench/format/colls.h"
#include "braid/braid.hpp"

namespace braid::bench {

/// Rank `rank`'s input value at global element `index` for `op` (small non-negative integers).
int64_t inputValue(int rank, uint64_t index, uint64_t seed, RedOp op, int nranks);

/// Writes inputValue(rank, indexBase + i, ...) as `type` into buf[i] for i < count.
void fillInput(void* buf, DataType type, size_t count, int rank, uint64_t indexBase, uint64_t seed,
               RedOp op, int nranks);

/// Fills a buffer with a pattern no correct result equals (so stale output is caught).
void fillPoison(void* buf, DataType type, size_t count);

/// What one rank checks after one run of a collective.
struct CheckSpec {
  const CollInfo* coll = nullptr;
  Counts counts;
  int rank = 0;
  int nranks = 1;
  int root = 0;  ///< broadcast / reduce
  DataType type = DataType::kFloat32;
  RedOp op = RedOp::kSum;  ///< ignored where the collective has no op
  uint64_t seed = 0;
};

/// Fills the send buffer for a run (`send` holds counts.sendCount elements).
void fillSend(const CheckSpec& spec, void* send);

/// Counts the elements of this rank's receive buffer (counts.recvCount elements) that differ
/// from the expected value; 0 on ranks that receive nothing (reduce's non-roots).
int64_t countWrong(const CheckSpec& spec, const void* recv);

/// Bit conversions used for half and bfloat16 (round to nearest even).
uint16_t floatToHalfBits(float value);
float halfBitsToFloat(uint16_t bits);
uint16_t floatToBfloat16Bits(float value);
float bfloat16BitsToFloat(uint16_t bits);

}  // namespace braid::bench
