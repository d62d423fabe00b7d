// Point-to-point channels between ranks: the one public header of transport/.
//
// A channel is one direction from rank A to rank B with K slots of slotBytes each. The sender
// takes a free slot (tryAcquire), fills it, and posts it with a fixed-size header (post); the
// receiver peeks the oldest posted slot (tryPeek), consumes it, and frees it (release). Where the
// slot lives and who moves the bytes is the transport's business (shm: slots in shared memory
// written by the sender's CPU; tcp: a socket and a progress thread; ucx: UCX tagged messages into
// pre-posted receive slots, driven by a progress thread).
//
// Every call here is non-blocking. A caller with nothing to do sleeps on the endpoint's doorbell:
//   uint32_t ticket = ep.prepareSleep();   // announce
//   ... check the channels once more ...   // no lost wake-up between check and sleep
//   ep.sleep(ticket, until);               // returns when anything may have changed, or at until
// Any post or release by a peer (or the tcp progress thread) rings the doorbell.
//
// Thread-safety: one thread at a time per endpoint (the communicator serialises), except
// signalAbort(), which any thread may call.
// transport never includes comm.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "braid/deadline.hpp"
#include "common/error.h"

namespace braid::transport {

/// Which mechanism carries a peer's channels.
enum class Kind : uint8_t {
  kSelf = 0,
  kShm = 1,
  kTcp = 2,
  kUcx = 3,
  kCudaIpc = 4,  ///< device slots over CUDA IPC (transport/cuda_ipc, device collectives only)
  kOfi = 5,      ///< libfabric RDM endpoints (transport/ofi), provider from BRAID_OFI_PROVIDER
  kVerbs = 6,    ///< ibverbs RC queue pairs (transport/verbs), device from BRAID_VERBS_DEVICE
};
const char* kindName(Kind kind);
/// Parses a backend's name ("shm", "tcp", "ucx", "ofi", "verbs", "cuda_ipc"); false on an unknown
/// name. A known name may still be unavailable in this build: see kindAvailable().
bool parseKind(const std::string& name, Kind* out);
/// Whether this build can connect peers of `kind` (kUcx needs UCX at configure time, kOfi
/// libfabric and a usable provider, kVerbs libibverbs and an active RDMA port). When not,
/// *why (if given) receives a one-line reason.
bool kindAvailable(Kind kind, std::string* why = nullptr);
/// Checks a BRAID_TRANSPORT / --transport value: "" and "auto" give "" (the best kind per peer);
/// an available host-memory kind's name is returned as is; anything else is kInvalidUsage
/// ("unknown transport 'x' ...: choose shm, tcp, ucx, ofi or verbs", "transport 'ucx' ... is not
/// available: <why>", or that cuda_ipc carries device buffers only).
std::string checkForcedKind(const std::string& name);
/// The kind of each of `rank`'s peers (kSelf for itself), given every rank's host key (equal
/// for ranks that share memory). `forced` empty: the best backend that is available and reaches
/// the peer (shm on one host; between hosts ofi with a hardware provider, else ucx when this
/// build has it, else tcp); "auto" too.
/// Else a kind name (BRAID_TRANSPORT, checked as checkForcedKind does) for every peer:
/// kInvalidUsage when that kind cannot reach a peer (shm to another host), naming the peer and
/// both hosts. `deviceMemory`: among the backends whose slots are device memory (cuda_ipc, which
/// reaches the ranks of one host; `forced` must then be empty), for a device communicator.
std::vector<Kind> chooseKinds(int rank, const std::vector<std::string>& hosts,
                              const std::string& forced, bool deviceMemory = false);

/// One line per host-memory backend, best first: whether this build and machine have it (why
/// not), whether chooseKinds picks it by itself (why not), and its details (ofi: the provider;
/// verbs: the device, port and GID). For braid-topo and diagnostics.
std::string describeBackends();

/// The fixed-size header every message carries; opaque to the transport (comm encodes it).
struct MessageMeta {
  uint64_t words[4] = {0, 0, 0, 0};
};

/// Sender side of one channel (one peer, one channel index).
class SendChannel {
 public:
  virtual ~SendChannel() = default;
  /// A free slot of slotBytes() bytes, or nullptr when all slots are in flight. Calling it again
  /// before post() returns the same slot.
  virtual void* tryAcquire() = 0;
  /// Publishes the slot returned by tryAcquire() with `bytes` (<= slotBytes()) payload bytes.
  virtual void post(size_t bytes, const MessageMeta& meta) = 0;
  virtual size_t slotBytes() const = 0;
  virtual int peer() const = 0;
  /// How long a cache line the receiver writes takes to reach this thread's core, in ns, as last
  /// measured (transport/line_latency.h); 0 when unknown or not shared memory. Long (another
  /// die or socket): a payload written into a slot with ordinary stores crosses line by line,
  /// so the caller may fill slots with streaming stores instead. Cheap (no measuring here).
  virtual uint32_t receiverLineNanos() const { return 0; }
};

/// Receiver side of one channel.
class RecvChannel {
 public:
  virtual ~RecvChannel() = default;
  /// The oldest posted and not yet released message (same pointer until release()), or nullptr.
  /// *bytes and *meta receive its size and header (either may be nullptr: not wanted).
  virtual const void* tryPeek(size_t* bytes, MessageMeta* meta) = 0;
  /// Frees the slot returned by tryPeek() for the sender to reuse.
  virtual void release() = 0;
  virtual int peer() const = 0;
};

/// How this rank connects to every other rank of the job.
struct EndpointConfig {
  int rank = 0;
  int size = 1;
  std::vector<Kind> peerKinds;   ///< size entries; peerKinds[rank] == kSelf
  int channels = 2;              ///< channel indices per peer pair (one per schedule lane)
  int slots = 8;                 ///< K: slots per channel
  size_t slotBytes = 128 << 10;  ///< bytes per slot (payload)
  std::string jobId;             ///< unique per communicator; names shm segments and kv keys
  std::string secret;            ///< per-job secret; tcp handshakes must present it
  std::string advertiseAddress;  ///< IPv4 address other hosts reach this rank at (tcp)
  double timeoutSeconds = 60;    ///< for the connection phase
  int device = -1;  ///< CUDA device ordinal of a device-memory endpoint (cuda_ipc peers); else -1
};

/// The rendezvous transports need (comm's bootstrap store implements it).
class KeyValue {
 public:
  virtual ~KeyValue() = default;
  virtual void set(const std::string& key, const std::string& value) = 0;
  /// Blocks until `key` is set or the deadline passes (throws kTimeout naming the key).
  virtual std::string get(const std::string& key, Deadline deadline) = 0;
};

/// All channels of one rank in one communicator, plus its doorbell.
class Endpoint {
 public:
  virtual ~Endpoint() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual Kind peerKind(int peer) const = 0;
  virtual int channels() const = 0;
  /// Channels to and from `peer` (peer != rank), channel index in [0, channels()).
  virtual SendChannel& send(int peer, int channel) = 0;
  virtual RecvChannel& recv(int peer, int channel) = 0;

  /// Announces that the caller is about to sleep; returns a ticket for sleep().
  virtual uint32_t prepareSleep() = 0;
  /// Sleeps until a post/release/abort rang the doorbell after prepareSleep(), or until `until`.
  /// Spurious wake-ups are allowed. Ends the announcement made by prepareSleep().
  virtual void sleep(uint32_t ticket, Clock::time_point until) = 0;
  /// Wakes this rank's own sleeper, if one sleeps: another thread of this rank published work
  /// for it (a point-to-point op joining a running group). Cheap when nobody sleeps.
  virtual void wake() = 0;

  /// False once `peer` is known gone (its process died, its connection closed).
  virtual bool peerAlive(int peer) = 0;
  /// Tells every peer this rank has failed (reason is a short text); rings their doorbells.
  /// Safe from any thread, idempotent.
  virtual void signalAbort(const std::string& reason) = 0;
  /// The first abort any peer signalled to this rank: {peer rank, reason}.
  virtual std::optional<std::pair<int, std::string>> peerAbort() = 0;
};

/// Connects this rank to all peers per config, using `kv` to exchange addresses. Collective over
/// all ranks of the job; throws Error (kTimeout naming the missing peer, kSystemError, ...).
std::unique_ptr<Endpoint> connect(const EndpointConfig& config, KeyValue& kv);

}  // namespace braid::transport
