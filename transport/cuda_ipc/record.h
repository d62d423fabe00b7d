// What each rank publishes in the key-value store so its peers can reach its device slots: the
// process identity (to tell threads of one process, which must use the raw pointer, from other
// processes, which open the IPC handle), the device, the slot geometry and the memory handle.
#pragma once

#include <array>
#include <cstdint>
#include <string>

namespace braid::transport::cuda_ipc {

/// Bytes of a cudaIpcMemHandle_t (CUDA_IPC_HANDLE_SIZE).
inline constexpr size_t kIpcHandleBytes = 64;

struct PeerRecord {
  uint32_t rank = 0;
  uint32_t nranks = 0;
  uint64_t pid = 0;
  uint64_t processNonce = 0;  ///< random per process: equal nonces mean "same process"
  int32_t device = 0;         ///< CUDA device ordinal in the owner's process
  uint32_t channels = 0;
  uint32_t slots = 0;
  uint64_t slotBytes = 0;
  uint64_t slotBase = 0;  ///< device address of the inbox in the owner's process
  std::array<uint8_t, kIpcHandleBytes> handle{};
  std::string segment;  ///< the control segment's name (rank 0's record only)
};

/// Text form for the store (hex, versioned, length-checked).
std::string encodeRecord(const PeerRecord& record);
/// Parses encodeRecord's text; throws braid::Error(kInternal) naming `who` on anything malformed.
PeerRecord decodeRecord(const std::string& text, const std::string& who);

/// Random per-process nonce (the same value for every call in one process).
uint64_t processNonce();

/// Bytes of a rank's inbox: a row of channels x slots for each other rank.
inline uint64_t inboxBytes(uint32_t nranks, uint32_t channels, uint32_t slots, uint64_t slotBytes) {
  return uint64_t(nranks > 1 ? nranks - 1 : 0) * channels * slots * slotBytes;
}

/// Where slot `slot` from `sender` on `channel` lies in the receiver's inbox
/// ([sender without the receiver][channel][slot]).
inline uint64_t inboxOffset(const PeerRecord& receiver, int sender, int channel, int slot) {
  const uint64_t row = uint32_t(sender) > receiver.rank ? sender - 1 : sender;
  return ((row * receiver.channels + channel) * receiver.slots + slot) * receiver.slotBytes;
}

}  // namespace braid::transport::cuda_ipc
