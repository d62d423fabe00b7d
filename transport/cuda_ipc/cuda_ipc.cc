#include "transport/cuda_ipc/cuda_ipc.h"

#include <cuda_runtime_api.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <vector>

#include "common/log.h"
#include "transport/cuda_ipc/control.h"
#include "transport/cuda_ipc/record.h"
#include "transport/peer_key.h"
#include "transport/process.h"

namespace braid::transport::cuda_ipc {
namespace {

void check(cudaError_t err, int rank, const char* call) {
  if (err != cudaSuccess) {
    fail(ErrorCode::kCudaError, "rank {}: cuda_ipc: {} failed: {} ({})", rank, call,
         cudaGetErrorString(err), int(err));
  }
}

std::string segmentName(const std::string& jobId) {
  std::string name = "/braid-cipc-";
  for (char c : jobId) name += (std::isalnum(static_cast<unsigned char>(c)) ? c : '_');
  return name.substr(0, 200);
}

// Process-wide table of opened IPC handles: one mapping per handle, reference-counted.
struct HandleTable {
  std::mutex mutex;
  std::map<std::array<uint8_t, kIpcHandleBytes>, std::pair<void*, int>> byHandle;
  std::map<void*, std::array<uint8_t, kIpcHandleBytes>> byPtr;
};
HandleTable& handles() {
  static HandleTable* table = new HandleTable;  // never destroyed: used from destructors
  return *table;
}

class IpcSend final : public SendChannel {
 public:
  IpcSend(int peer, RingSender ring, char* slots, size_t slotBytes, RankControl* receiver)
      : peer_(peer), ring_(ring), slots_(slots), slotBytes_(slotBytes), receiver_(receiver) {}
  void* tryAcquire() override {
    // A receiver that is freeing its inbox takes no more writes (peerAlive then says it is gone).
    if (atom(receiver_->closing).load(std::memory_order_acquire) != 0) return nullptr;
    int64_t i = ring_.tryAcquire();
    return i < 0 ? nullptr : slots_ + i * slotBytes_;
  }
  void post(size_t bytes, const MessageMeta& meta) override {
    ring_.post(bytes, meta);
    ringDoorbellIfSleeping(receiver_->bell);
  }
  size_t slotBytes() const override { return slotBytes_; }
  int peer() const override { return peer_; }

 private:
  int peer_;
  RingSender ring_;
  char* slots_;
  size_t slotBytes_;
  RankControl* receiver_;
};

class IpcRecv final : public RecvChannel {
 public:
  IpcRecv(int peer, RingReceiver ring, const char* slots, size_t slotBytes, Doorbell* bell)
      : peer_(peer), ring_(ring), slots_(slots), slotBytes_(slotBytes), bell_(bell) {}
  const void* tryPeek(size_t* bytes, MessageMeta* meta) override {
    SlotDesc d;
    int64_t i = ring_.tryPeek(&d);
    if (i < 0) return nullptr;
    BRAID_ENFORCE(d.bytes <= slotBytes_, ErrorCode::kRemoteError,
                  "cuda_ipc recv from peer rank {}: message of {} bytes exceeds the slot size {}",
                  peer_, d.bytes, slotBytes_);
    if (bytes != nullptr) *bytes = d.bytes;
    if (meta != nullptr) *meta = d.meta;
    return slots_ + i * slotBytes_;
  }
  void release() override {
    ring_.release();
    ringDoorbellIfSleeping(*bell_);
  }
  int peer() const override { return peer_; }

 private:
  int peer_;
  RingReceiver ring_;
  const char* slots_;
  size_t slotBytes_;
  Doorbell* bell_;  // the sender's
};

}  // namespace

CudaIpcTransport::CudaIpcTransport(const EndpointConfig& config, KeyValue& kv)
    : rank_(config.rank),
      size_(config.size),
      channels_(config.channels),
      slots_(config.slots),
      device_(config.device),
      slotBytes_(config.slotBytes) {
  BRAID_ENFORCE(device_ >= 0, ErrorCode::kInvalidUsage,
                "rank {}: cuda_ipc: no CUDA device given (EndpointConfig::device is {})", rank_,
                device_);
  BRAID_ENFORCE(size_ >= 1 && rank_ >= 0 && rank_ < size_ && channels_ >= 1 && config.slots >= 2 &&
                    config.slotBytes >= 16 && config.slotBytes % 16 == 0,
                ErrorCode::kInvalidUsage,
                "rank {}: cuda_ipc: bad configuration (size {}, channels {}, slots {}, slot bytes "
                "{}; slots >= 2 and slot bytes a multiple of 16 needed)",
                rank_, size_, channels_, config.slots, config.slotBytes);
  layout_.nranks = size_;
  layout_.channels = channels_;
  layout_.slots = config.slots;
  try {
    check(cudaSetDevice(device_), rank_, "cudaSetDevice");
    // Rank 0 makes and initialises the control segment before it publishes its record.
    segmentBytes_ = layout_.totalBytes();
    if (rank_ == 0) {
      segmentName_ = segmentName(config.jobId);
      int fd = shm_open(segmentName_.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
      if (fd < 0) failErrno(fmt::format("rank 0: cuda_ipc: shm_open('{}')", segmentName_), errno);
      if (ftruncate(fd, static_cast<off_t>(segmentBytes_)) != 0) {
        int e = errno;
        close(fd);
        shm_unlink(segmentName_.c_str());
        failErrno("rank 0: cuda_ipc: ftruncate of the control segment", e);
      }
      segment_ = mmap(nullptr, segmentBytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
      close(fd);
      if (segment_ == MAP_FAILED) {
        segment_ = nullptr;
        shm_unlink(segmentName_.c_str());
        failErrno("rank 0: cuda_ipc: mmap of the control segment", errno);
      }
      SegmentHeader* h = layout_.header(segment_);
      h->nranks = size_;
      h->channels = channels_;
      h->slots = config.slots;
      atom(h->magic).store(kSegmentMagic, std::memory_order_release);
    }

    PeerRecord& mine = mine_;
    mine.rank = rank_;
    mine.nranks = size_;
    mine.pid = static_cast<uint64_t>(getpid());
    mine.processNonce = processNonce();
    mine.device = device_;
    mine.channels = channels_;
    mine.slots = config.slots;
    mine.slotBytes = config.slotBytes;
    mine.segment = segmentName_;
    const uint64_t bytes = inboxBytes(size_, channels_, config.slots, config.slotBytes);
    if (bytes > 0) {
      check(cudaMalloc(&inbox_, bytes), rank_, "cudaMalloc of the inbox");
      cudaIpcMemHandle_t handle;
      check(cudaIpcGetMemHandle(&handle, inbox_), rank_, "cudaIpcGetMemHandle");
      static_assert(sizeof handle == kIpcHandleBytes);
      std::memcpy(mine.handle.data(), &handle, kIpcHandleBytes);
      mine.slotBase = reinterpret_cast<uint64_t>(inbox_);
    }
    keyPrefix_ = config.jobId + "/cuda_ipc/";
    kv.set(keyPrefix_ + std::to_string(rank_), encodeRecord(mine));
  } catch (...) {
    cleanup();
    throw;
  }
}

Doorbell* CudaIpcTransport::ownDoorbell() { return segment_ != nullptr ? &self()->bell : nullptr; }

size_t CudaIpcTransport::index(int peer, int channel) const {
  BRAID_ENFORCE(peer >= 0 && peer < size_ && peer != rank_ && channel >= 0 && channel < channels_,
                ErrorCode::kInternal, "rank {}: cuda_ipc: no channel {} to peer rank {}", rank_,
                channel, peer);
  return size_t(peer) * channels_ + channel;
}

SendChannel& CudaIpcTransport::send(int peer, int channel) {
  return *sends_.at(index(peer, channel));
}
RecvChannel& CudaIpcTransport::recv(int peer, int channel) {
  return *recvs_.at(index(peer, channel));
}

void CudaIpcTransport::connectPeers(KeyValue& kv, Deadline deadline) {
  const PeerRecord& mine = mine_;
  check(cudaSetDevice(device_), rank_, "cudaSetDevice");
  std::vector<PeerRecord> peers(size_);
  for (int p = 0; p < size_; ++p) {
    if (p == rank_) {
      peers[p] = mine;
      continue;
    }
    const std::string who = fmt::format("rank {} (seen by rank {})", p, rank_);
    peers[p] = decodeRecord(getPeerKey(kv, keyPrefix_ + std::to_string(p), deadline, rank_, p,
                                       "cuda_ipc", "publish its inbox"),
                            who);
    const PeerRecord& r = peers[p];
    BRAID_ENFORCE(r.rank == uint32_t(p) && r.nranks == uint32_t(size_) &&
                      r.channels == uint32_t(channels_) && r.slots == uint32_t(slots_) &&
                      r.slotBytes == slotBytes_,
                  ErrorCode::kInternal,
                  "rank {}: cuda_ipc: peer rank {} has a different geometry (rank {}, size {}, "
                  "channels {}, slots {}, slot bytes {}; here size {}, channels {}, slots {}, "
                  "slot bytes {})",
                  rank_, p, r.rank, r.nranks, r.channels, r.slots, r.slotBytes, size_, channels_,
                  slots_, slotBytes_);
  }

  if (rank_ != 0) {
    segmentName_ = peers[0].segment;
    int fd = shm_open(segmentName_.c_str(), O_RDWR, 0);
    if (fd < 0) {
      failErrno(fmt::format("rank {}: cuda_ipc: shm_open('{}') of rank 0's control segment", rank_,
                            segmentName_),
                errno);
    }
    struct stat st {};
    if (fstat(fd, &st) != 0 || size_t(st.st_size) != segmentBytes_) {
      close(fd);
      fail(ErrorCode::kInternal, "rank {}: cuda_ipc: control segment '{}' has {} bytes, not {}",
           rank_, segmentName_, size_t(st.st_size), segmentBytes_);
    }
    segment_ = mmap(nullptr, segmentBytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (segment_ == MAP_FAILED) {
      segment_ = nullptr;
      failErrno(fmt::format("rank {}: cuda_ipc: mmap of the control segment", rank_), errno);
    }
    BRAID_ENFORCE(
        atom(layout_.header(segment_)->magic).load(std::memory_order_acquire) == kSegmentMagic,
        ErrorCode::kInternal, "rank {}: cuda_ipc: control segment '{}' is not ours", rank_,
        segmentName_);
  }
  RankControl* me = self();
  me->pid = mine.pid;
  me->pidNamespace = pidNamespace();
  // The last rank to map the segment unlinks its name (nothing else needs it).
  if (atom(layout_.header(segment_)->attached).fetch_add(1) + 1 == uint32_t(size_)) {
    shm_unlink(segmentName_.c_str());
  }

  // Map every peer's inbox and build the channels.
  peerPids_.resize(size_);
  peerSameProcess_.resize(size_);
  std::vector<char*> peerInbox(size_, nullptr);
  for (int p = 0; p < size_; ++p) {
    if (p == rank_) continue;
    const PeerRecord& r = peers[p];
    peerPids_[p] = r.pid;
    peerSameProcess_[p] = r.processNonce == mine.processNonce;
    if (peerSameProcess_[p]) {
      // A thread of this process: the pointer is valid here (UVA); peer access if another GPU.
      if (r.device != device_) {
        cudaError_t err = cudaDeviceEnablePeerAccess(r.device, 0);
        if (err == cudaErrorPeerAccessAlreadyEnabled) {
          cudaGetLastError();
        } else {
          check(err, rank_, "cudaDeviceEnablePeerAccess");
        }
      }
      peerInbox[p] = reinterpret_cast<char*>(r.slotBase);
    } else {
      peerInbox[p] = static_cast<char*>(openIpcHandle(r.handle.data(), rank_, p));
      opened_.push_back(peerInbox[p]);
    }
  }
  sends_.resize(size_t(size_) * channels_);
  recvs_.resize(size_t(size_) * channels_);
  for (int p = 0; p < size_; ++p) {
    if (p == rank_) continue;
    for (int c = 0; c < channels_; ++c) {
      const size_t out = layout_.ring(rank_, p, c), in = layout_.ring(p, rank_, c);
      sends_[index(p, c)] = std::make_unique<IpcSend>(
          p, RingSender(layout_.control(segment_, out), layout_.descs(segment_, out), slots_),
          peerInbox[p] + inboxOffset(peers[p], rank_, c, 0), slotBytes_, layout_.rank(segment_, p));
      recvs_[index(p, c)] = std::make_unique<IpcRecv>(
          p, RingReceiver(layout_.control(segment_, in), layout_.descs(segment_, in), slots_),
          static_cast<const char*>(inbox_) + inboxOffset(mine, p, c, 0), slotBytes_,
          &layout_.rank(segment_, p)->bell);
    }
  }
  BRAID_INFO("rank {}: cuda_ipc: connected {} ranks on device {}, {} x {} slots of {} B", rank_,
             size_, device_, channels_, slots_, slotBytes_);
}

void CudaIpcTransport::cleanup() {
  if (segment_ != nullptr) {
    // Peers stop writing into the inbox before it is freed (they then see this rank as gone).
    atom(self()->closing).store(1, std::memory_order_release);
    for (int p = 0; p < size_; ++p) {
      if (p != rank_) ringDoorbell(layout_.rank(segment_, p)->bell);
    }
  }
  for (void* p : opened_) closeIpcHandle(p);
  opened_.clear();
  if (inbox_ != nullptr) {
    int previous = -1;
    if (cudaGetDevice(&previous) != cudaSuccess) previous = -1;
    cudaSetDevice(device_);
    cudaFree(inbox_);
    if (previous >= 0 && previous != device_) cudaSetDevice(previous);
    inbox_ = nullptr;
  }
  if (segment_ != nullptr) {
    munmap(segment_, segmentBytes_);
    segment_ = nullptr;
  }
  if (rank_ == 0 && !segmentName_.empty()) shm_unlink(segmentName_.c_str());  // ENOENT is fine
}

CudaIpcTransport::~CudaIpcTransport() { cleanup(); }

bool CudaIpcTransport::peerAlive(int peer) {
  if (peer == rank_) return true;
  RankControl* r = layout_.rank(segment_, peer);
  if (atom(r->closing).load(std::memory_order_acquire) != 0) return false;
  if (peerSameProcess_.at(peer)) return true;
  return !processGone(peerPids_[peer], r->pidNamespace);  // another pid namespace: alive
}

void CudaIpcTransport::signalAbort(const std::string& reason) {
  RankControl* me = self();
  uint32_t expected = 0;
  if (atom(me->abortState).compare_exchange_strong(expected, 1)) {
    const size_t n = std::min(reason.size(), kReasonBytes - 1);
    std::memcpy(me->reason, reason.data(), n);
    me->reason[n] = '\0';
    atom(me->abortState).store(2, std::memory_order_release);
  }
  for (int p = 0; p < size_; ++p) {
    if (p != rank_) ringDoorbell(layout_.rank(segment_, p)->bell);
  }
}

std::optional<std::pair<int, std::string>> CudaIpcTransport::peerAbort() {
  for (int p = 0; p < size_; ++p) {
    if (p == rank_) continue;
    RankControl* r = layout_.rank(segment_, p);
    if (atom(r->abortState).load(std::memory_order_acquire) == 2) {
      return std::make_pair(p, std::string(r->reason, strnlen(r->reason, kReasonBytes)));
    }
  }
  return std::nullopt;
}

void* openIpcHandle(const void* handle, int rank, int peer) {
  HandleTable& t = handles();
  std::array<uint8_t, kIpcHandleBytes> key;
  std::memcpy(key.data(), handle, kIpcHandleBytes);
  std::lock_guard<std::mutex> lock(t.mutex);
  auto it = t.byHandle.find(key);
  if (it != t.byHandle.end()) {
    it->second.second++;
    return it->second.first;
  }
  cudaIpcMemHandle_t h;
  std::memcpy(&h, handle, kIpcHandleBytes);
  void* ptr = nullptr;
  cudaError_t err = cudaIpcOpenMemHandle(&ptr, h, cudaIpcMemLazyEnablePeerAccess);
  if (err != cudaSuccess) {
    cudaGetLastError();
    fail(ErrorCode::kCudaError,
         "rank {}: cuda_ipc: cudaIpcOpenMemHandle of peer rank {}'s inbox failed: {} ({})", rank,
         peer, cudaGetErrorString(err), int(err));
  }
  t.byHandle.emplace(key, std::make_pair(ptr, 1));
  t.byPtr.emplace(ptr, key);
  return ptr;
}

void closeIpcHandle(void* ptr) {
  HandleTable& t = handles();
  std::lock_guard<std::mutex> lock(t.mutex);
  auto p = t.byPtr.find(ptr);
  if (p == t.byPtr.end()) return;
  auto h = t.byHandle.find(p->second);
  if (--h->second.second == 0) {
    cudaIpcCloseMemHandle(ptr);
    t.byHandle.erase(h);
    t.byPtr.erase(p);
  }
}

}  // namespace braid::transport::cuda_ipc
