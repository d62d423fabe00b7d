// braid's C++ API: communicators and collectives on host memory (and CUDA device memory below).
// Installed as <braid/braid.hpp> with the vocabulary it uses (types, error, deadline); the C API is
// <braid/braid.h>.
//
// Ordering: every rank must call the same collectives in the same order with matching
// (count, dtype, op, root); a mismatch is detected and reported as ErrorCode::kMismatch on
// every rank, never wrong data. Blocking and non-blocking calls on one communicator are executed
// in the order they were issued. A Communicator may be used from several threads, but calls are
// serialised in the order they take its lock; abort() may be called from any thread at any time.
//
// Errors: every failure throws braid::Error whose message names this rank, the peer, the
// collective and its size. After an error other than kInvalidUsage the communicator is broken:
// later calls fail with the same error.
#pragma once

#include <array>
#include <braid/deadline.hpp>
#include <braid/error.hpp>
#include <braid/store.hpp>
#include <braid/types.hpp>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace braid {

/// Parses an algorithm name (see algorithmName in braid/types.hpp); false on an unknown one.
inline bool parseAlgorithm(const std::string& name, Algorithm* out) {
  return parseAlgorithm(name.c_str(), out);
}

/// NCCL-style opaque id: rank 0 makes one with Communicator::uniqueId() and hands it to the other
/// ranks out of band (MPI_Bcast, a file, ...). It holds rank 0's store address and job secret.
struct UniqueId {
  std::array<char, 128> bytes{};
};

/// Knobs; every field has an environment override (named beside it) and a sane default.
struct Options {
  double timeoutSeconds = 0;  ///< BRAID_TIMEOUT; 0 = from environment (default 60)
  std::string transport;      ///< BRAID_TRANSPORT: "" = best per peer, "shm", "ucx", "tcp"
  Algorithm algorithm = Algorithm::kAuto;  ///< BRAID_ALGO
  size_t chunkBytes = 0;                   ///< BRAID_CHUNK: slot size, 0 = default (128K)
  int channels = 0;                        ///< BRAID_CHANNELS: lanes in parallel, 0 = default
  /// BRAID_DETERMINISTIC=1: reductions (all-reduce, reduce-scatter, reduce) reduce every element
  /// over the ranks' contributions in rank order, so results have the same bits whatever the
  /// algorithm, chunk, lanes or transport (at the cost of a scratch copy of large buffers).
  bool deterministic = false;
  /// This rank's host identity for grouping ranks into nodes (shm within a node, tcp between
  /// them; the hierarchical all-reduce's node layout). Overrides BRAID_HOSTNAME and the host
  /// fingerprint; "" = from those. Lets ranks in one process pose as several hosts.
  std::string hostName;
  /// The job secret every rank must share: peers' connections present it, and creation fails
  /// on every rank, naming the peer, when one rank's differs. "" = BRAID_SECRET (braidrun sets
  /// it), else a fixed insecure default with a warning. fromUniqueId uses the id's secret.
  std::string secret;
  /// The IPv4 address other hosts reach this rank at (tcp transport). "" = for fromStore
  /// 127.0.0.1 (ranks of one host), for the others this end of the store connection.
  std::string advertiseAddress;
  /// The prefix of every key this communicator's creation puts in its store, so several
  /// communicators can be created over one store (in turn or at once). "" = "braid".
  std::string storePrefix;
};

/// Where ranks on other hosts reach this one: BRAID_HOST_ADDR, else the first non-loopback IPv4
/// address that is up, else 127.0.0.1. What fromEnvironment and uniqueId advertise; a caller of
/// fromStore whose ranks span hosts passes it as Options::advertiseAddress.
std::string hostAddress();

/// Host memory that the ranks of one host can map into each other (like NCCL's ncclMemAlloc):
/// an all-reduce whose input and output on every rank lie in such buffers, between processes of
/// one host, reads its peers' inputs and writes their outputs directly (the mapped single copy,
/// from BRAID_MAPPED_COPY_BYTES, default 256 KiB), instead of copying through slots. Zeroed,
/// page-aligned, at least `bytes` (0 gives one page). Any other memory works as before. Free with
/// memFree. Throws braid::Error (kSystemError) when the system refuses the memory.
void* memAlloc(size_t bytes);
/// Frees a memAlloc buffer (kInvalidUsage for any other pointer). Peers that mapped it keep
/// their mapping (at most 32 per communicator, the least recently used given up first) until their
/// communicator is destroyed, so its memory goes back to the system then: reuse buffers rather
/// than allocate one per call.
void memFree(void* p);

class Request;
struct CommState;

/// What a receive got: the rank that sent it and its payload in bytes.
struct RecvResult {
  int source = -1;
  size_t bytes = 0;
};

/// A group of ranks that run collectives together.
class Communicator {
 public:
  /// From torchrun's variables RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR,
  /// MASTER_PORT (and BRAID_SECRET from braidrun); under mpirun (OMPI_COMM_WORLD_*, built with
  /// MPI) from MPI. Collective: every rank must call it. Throws kInvalidUsage naming a missing or
  /// malformed variable.
  static Communicator fromEnvironment(const Options& options = {});
  /// From an id made by rank 0's uniqueId(); collective over `size` ranks.
  static Communicator fromUniqueId(const UniqueId& id, int rank, int size,
                                   const Options& options = {});
  /// Makes a fresh id and starts the rendezvous service in this process (which must then join as
  /// a rank of that communicator, conventionally rank 0, and outlive the rendezvous).
  static UniqueId uniqueId();
  /// Over a rendezvous store the caller provides (braid/store.hpp: braid's own, or an adapter to
  /// another framework's); collective over `size` ranks. Ranks that are threads of one process
  /// share one makeInMemoryStore(). Only creation uses the store; the caller keeps it alive as
  /// long as it likes.
  static Communicator fromStore(std::shared_ptr<Store> store, int rank, int size,
                                const Options& options = {});

  Communicator(Communicator&&) noexcept;
  Communicator& operator=(Communicator&&) noexcept;
  ~Communicator();

  int rank() const;
  int size() const;

  // Blocking collectives. In-place when send == recv (for allGather: send == recv +
  // rank*count*elemsize; for reduceScatter: send + rank*recvCount*elemsize == recv).
  void allReduce(const void* send, void* recv, size_t count, DataType type, RedOp op);
  void reduceScatter(const void* send, void* recv, size_t recvCount, DataType type, RedOp op);
  void allGather(const void* send, void* recv, size_t sendCount, DataType type);
  void broadcast(const void* send, void* recv, size_t count, DataType type, int root);
  void reduce(const void* send, void* recv, size_t count, DataType type, RedOp op, int root);
  /// Block q (count elements at send + q*count) goes to rank q, whose block from this rank lands
  /// at recv + rank*count; both buffers hold size()*count elements. In place when send == recv
  /// (MPI_IN_PLACE: each block is replaced by the peer's).
  void allToAll(const void* send, void* recv, size_t count, DataType type);
  /// Per-peer splits, in elements, size() entries each: sendCounts[q] elements at
  /// send + sendDispls[q] go to rank q, recvCounts[q] from rank q land at recv + recvDispls[q].
  /// The counts of a pair must agree (this rank's sendCounts[q] is q's recvCounts[rank]);
  /// receive blocks must not overlap. In place when send == recv, which needs equal send and
  /// receive counts and displacements (MPI_IN_PLACE uses the receive ones for both). The arrays
  /// are copied: they need not outlive the call.
  void allToAllv(const void* send, const size_t* sendCounts, const size_t* sendDispls, void* recv,
                 const size_t* recvCounts, const size_t* recvDispls, DataType type);
  /// Every rank's sendCount elements to the root, rank q's at recv + q*sendCount (recv: the
  /// root's, size()*sendCount elements; unused elsewhere). In place at the root when
  /// send == recv + root*sendCount*elemsize (its own block already there, as MPI_IN_PLACE).
  void gather(const void* send, void* recv, size_t sendCount, DataType type, int root);
  /// The root's block q (recvCount elements at send + q*recvCount) to rank q's recv (send: the
  /// root's, size()*recvCount elements; unused elsewhere). In place at the root when
  /// recv == send + root*recvCount*elemsize (its own block stays, as MPI_IN_PLACE).
  void scatter(const void* send, void* recv, size_t recvCount, DataType type, int root);
  /// Point-to-point: the n-th recv from a peer (counting the recvs from any source it matched)
  /// meets the peer's n-th send to this rank (posting order, as MPI and NCCL), and their `tag`s
  /// (0..2^31-1) must agree: a difference fails both with kMismatch naming the two tags (tags
  /// check, they do not reorder; only recvAnySource chooses by tag).
  void send(const void* buf, size_t count, DataType type, int peer, int tag = 0);
  void recv(void* buf, size_t count, DataType type, int peer, int tag = 0);
  /// Receives from any source (MPI_ANY_SOURCE): the first message with this `tag` that any peer
  /// sends this rank, of at most `count` elements of `type` (a larger one fails with kMismatch
  /// naming both sizes; a smaller one fills the front of buf). Per peer, messages still match in
  /// posting order: a peer's next message goes to the first posted recv (from it, or from any
  /// source with its tag) that is waiting. Returns who sent it and how much. count must be > 0.
  /// Waits under the communicator's timeout (kTimeout naming the tag and size); fails at once when
  /// every peer is gone, or when a peer's failure reaches this rank.
  RecvResult recvAnySource(void* buf, size_t count, DataType type, int tag = 0);
  void barrier();

  // Non-blocking: the same, returning at once; buffers must stay valid until completion.
  Request allReduceAsync(const void* send, void* recv, size_t count, DataType type, RedOp op);
  Request reduceScatterAsync(const void* send, void* recv, size_t recvCount, DataType type,
                             RedOp op);
  Request allGatherAsync(const void* send, void* recv, size_t sendCount, DataType type);
  Request broadcastAsync(const void* send, void* recv, size_t count, DataType type, int root);
  Request reduceAsync(const void* send, void* recv, size_t count, DataType type, RedOp op,
                      int root);
  Request allToAllAsync(const void* send, void* recv, size_t count, DataType type);
  Request allToAllvAsync(const void* send, const size_t* sendCounts, const size_t* sendDispls,
                         void* recv, const size_t* recvCounts, const size_t* recvDispls,
                         DataType type);
  Request gatherAsync(const void* send, void* recv, size_t sendCount, DataType type, int root);
  Request scatterAsync(const void* send, void* recv, size_t recvCount, DataType type, int root);
  Request sendAsync(const void* buf, size_t count, DataType type, int peer, int tag = 0);
  Request recvAsync(void* buf, size_t count, DataType type, int peer, int tag = 0);
  /// recvAnySource, returning at once: Request::received() says who sent what once it is done.
  Request recvAnySourceAsync(void* buf, size_t count, DataType type, int tag = 0);
  Request barrierAsync();

  /// Tears the communicator down from any thread: calls in flight here end with kAborted, peers
  /// see a remote error naming this rank. Idempotent.
  void abort();
  /// The stuck-rank report, from any thread at any time: one line per rank of this host (the op
  /// it runs and for how long, or its last completed collective; what it waits for), the
  /// rank(s) that are behind marked. braid also logs it when a call times out, and for every
  /// communicator of the process on SIGUSR1 (unless the program handles SIGUSR1 itself).
  std::string statusReport() const;

  /// What the tuner would run for this collective and size (for benches and logs).
  Algorithm chosenAlgorithm(Collective coll, size_t bytes) const;
  /// The same when every rank's buffers come from memAlloc (`memAllocBuffers`), or whatever the
  /// buffers where every rank is a thread of this process: then the mapped single copy
  /// (kSingleCopy) replaces the tuner's choice where it runs (unless a peer's buffers cannot be
  /// mapped after all).
  Algorithm chosenAlgorithm(Collective coll, size_t bytes, bool memAllocBuffers) const;
  /// The node (host) of each rank as grouped at creation: nodeOf()[r] is rank r's node, numbered
  /// densely in the order of each node's lowest rank (by host name, see Options::hostName).
  std::vector<int> nodeOf() const;

 private:
  explicit Communicator(std::shared_ptr<CommState> state);
  std::shared_ptr<CommState> state_;
  friend class Request;
};

/// Handle for a non-blocking collective. Destroying an unfinished request waits for it (bounded
/// by the communicator's timeout) so buffers are never used after their owner gave them up.
class Request {
 public:
  Request();
  Request(Request&&) noexcept;
  Request& operator=(Request&&) noexcept;
  ~Request();
  /// True when finished (successfully or not); never blocks. Rethrows nothing.
  bool test();
  /// Blocks until finished or `deadline`; throws the collective's error, or kTimeout if the
  /// deadline passed first (the collective keeps running; wait again or abort()).
  void wait(Deadline deadline = Deadline::never());
  /// The error once finished with one (kOk while pending or on success).
  ErrorCode status() const;
  /// A receive's sender and bytes (recv: its peer and its size; recvAnySource: the matched
  /// message's). Throws kInvalidUsage when this is no receive or it has not finished well.
  RecvResult received() const;

 private:
  struct Op;
  explicit Request(std::shared_ptr<Op> op);
  std::shared_ptr<Op> op_;
  friend class Communicator;
  friend struct CommState;
};

}  // namespace braid

// ---- Device collectives (CUDA) ----------------------------------------------------------------
// Declared in every build; defined by the braid_device library, which exists where CUDA does
// (without it, DeviceCommunicator::create throws kInvalidUsage). No CUDA header is needed here.

namespace braid {

/// A CUDA stream passed opaquely: a cudaStream_t cast to void* (nullptr = the legacy default
/// stream).
struct CudaStream {
  void* handle = nullptr;
};

struct DeviceCommState;

/// Collectives on CUDA device buffers, stream-ordered like NCCL: each call checks its arguments,
/// enqueues the collective behind the work already on `stream`, makes `stream` wait for its
/// completion, and returns at once. The collective itself runs on an internal stream driven by a
/// progress thread over CUDA IPC channels, with the same schedules, message headers, mismatch
/// checks and timeouts as the host path (comm/device/README.md).
///
/// Ordering: every rank must issue the same collectives in the same order (as Communicator).
/// Calls from several threads are serialised in the order they take the communicator's lock.
/// Buffers must stay valid until the stream has passed the collective.
///
/// Errors: argument errors throw kInvalidUsage at the call, touching nothing. A failure while the
/// collective runs (timeout, dead peer, mismatch, CUDA error) cannot be thrown to the caller, who
/// has moved on: the stream is released (its output is then undefined), the error is kept, and
/// asyncError()/checkAsyncError() report it; every later call throws it.
class DeviceCommunicator {
 public:
  /// Collective over all ranks of `host`, which must all run on one host (CUDA IPC); each rank
  /// passes the CUDA device ordinal it uses. `host` is used only during this call (to exchange
  /// memory handles). options.chunkBytes sets the slot size (default 1 MiB), options.channels
  /// the lanes, options.algorithm forces a schedule. Throws kCudaError, kTimeout, kInvalidUsage.
  static DeviceCommunicator create(Communicator& host, int device, const Options& options = {});

  DeviceCommunicator(DeviceCommunicator&&) noexcept;
  DeviceCommunicator& operator=(DeviceCommunicator&&) noexcept;
  /// Waits (bounded by the timeout) for enqueued collectives, then frees everything.
  ~DeviceCommunicator();

  int rank() const;
  int size() const;
  int device() const;

  // In-place rules as Communicator. All buffers: device memory on device() (or managed).
  void allReduce(const void* send, void* recv, size_t count, DataType type, RedOp op,
                 CudaStream stream);
  void reduceScatter(const void* send, void* recv, size_t recvCount, DataType type, RedOp op,
                     CudaStream stream);
  void allGather(const void* send, void* recv, size_t sendCount, DataType type, CudaStream stream);
  void broadcast(const void* send, void* recv, size_t count, DataType type, int root,
                 CudaStream stream);
  void reduce(const void* send, void* recv, size_t count, DataType type, RedOp op, int root,
              CudaStream stream);
  void send(const void* buf, size_t count, DataType type, int peer, CudaStream stream);
  void recv(void* buf, size_t count, DataType type, int peer, CudaStream stream);
  /// All-to-all, allToAllv (counts and displacements are host arrays of size() entries, read
  /// during the call), gather and scatter, as Communicator's.
  void allToAll(const void* send, void* recv, size_t count, DataType type, CudaStream stream);
  void allToAllv(const void* send, const size_t* sendCounts, const size_t* sendDispls, void* recv,
                 const size_t* recvCounts, const size_t* recvDispls, DataType type,
                 CudaStream stream);
  void gather(const void* send, void* recv, size_t sendCount, DataType type, int root,
              CudaStream stream);
  void scatter(const void* send, void* recv, size_t recvCount, DataType type, int root,
               CudaStream stream);

  /// The first error of an enqueued collective (kOk when none); never blocks.
  ErrorCode asyncError() const;
  /// Throws that error, if any.
  void checkAsyncError() const;
  /// Blocks until every collective enqueued so far has finished on the progress side (not the
  /// caller's streams), bounded by the timeout; then checkAsyncError().
  void synchronize();
  /// Ends collectives in flight with kAborted (their streams are released); any thread.
  void abort();

 private:
  explicit DeviceCommunicator(std::shared_ptr<DeviceCommState> state);
  std::shared_ptr<DeviceCommState> state_;
};

}  // namespace braid
