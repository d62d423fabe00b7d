// The per-job secret every store connection must present.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace braid::bootstrap {

/// BRAID_SECRET, or (when unset) a fixed well-known string, with one warning per process saying
/// the store then accepts any local process that knows braid.
std::string jobSecret();

/// A fresh random secret: `bytes` bytes from getrandom(), as lower-case hex.
std::string randomSecret(size_t bytes = 16);

/// SipHash-2-4 of `message` under a 128-bit key (the reference algorithm: Aumasson and Bernstein,
/// 2012); a keyed one-way function.
uint64_t sipHash24(const uint8_t (&key)[16], const std::string& message);

/// What a rank publishes in a store to show it holds `secret` without revealing it: a SipHash of
/// the secret keyed by `salt` (the job id, fresh per communicator, so a proof seen once is no use
/// in the next job), as 16 hex digits. Equal secrets give equal proofs.
std::string secretProof(const std::string& secret, const std::string& salt);

/// Compares in time that depends only on the lengths, not on where the texts differ.
bool secretsEqual(const std::string& a, const std::string& b);

}  // namespace braid::bootstrap
