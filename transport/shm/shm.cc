// Shared-memory transport.
//
// Layout: each rank r owns ONE segment, its inbox "/braid-<jobId>-<r>", that shm peers write into:
//
//   page 0    InboxHeader: identity (magic, version, rank, size, channels, slots, slotBytes, pid)
//             | Doorbell (word + sleeping flag, own 128-byte pair of lines)
//             | AbortRecord (state, peer rank, reason; first writer wins)
//             | ringOffset[size]: where the rings from each peer start (0 = not a shm peer)
//   per shm peer p (page aligned), per channel c: one ring
//             RingControl (consumed counter written by r, read by p; own 128-byte pair)
//             K slots, each: SlotHeader (seq, size, meta: 48 bytes) at a 128-byte boundary,
//             payload right after it at +64, so an 8-byte message is one pair of adjacent lines.
//
// The sender p writes payload, size and meta into slot n % K, then stores seq = n + 1 (release);
// the receiver r waits for seq == head + 1 (acquire) and, on release, stores consumed = head + 1
// (release), which the sender reads only when it believes the ring full. Both then ring the
// other's doorbell if its sleeping flag is set (see transport/doorbell.h).
//
// The segment is sparse: ftruncate allocates nothing, and slot pages are touched only once a
// message uses them. Every rank unlinks its inbox once all shm peers announced (kv
// "<jobId>/mapped/<rank>") that they mapped it; the destructor unlinks it in any case.
#include "transport/shm/shm.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>

#include "common/log.h"

namespace braid::transport::shm {

namespace {

constexpr uint64_t kMagic = 0x316d736469617262ull;  // "braidsm1"
constexpr uint32_t kVersion = 1;
constexpr size_t kReasonBytes = 120;
constexpr size_t kSlotHeaderBytes = 64;
constexpr size_t kControlBytes = 128;

struct AbortRecord {
  uint32_t state;  // 0 empty, 1 being written, 2 published
  int32_t rank;
  char reason[kReasonBytes];
};

struct SlotHeader {
  uint64_t seq;   // n + 1 once message n is in this slot
  uint64_t size;  // payload bytes
  MessageMeta meta;
  uint8_t pad[16];
};
static_assert(sizeof(SlotHeader) == kSlotHeaderBytes);

size_t roundUp(size_t value, size_t to) { return (value + to - 1) / to * to; }

size_t pageBytes() {
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return page;
}

size_t slotStride(size_t slotBytes) { return roundUp(kSlotHeaderBytes + slotBytes, 128); }
size_t ringBytes(const EndpointConfig& c) {
  return kControlBytes + static_cast<size_t>(c.slots) * slotStride(c.slotBytes);
}
size_t peerRegionBytes(const EndpointConfig& c) {
  return roundUp(static_cast<size_t>(c.channels) * ringBytes(c), pageBytes());
}

std::string sanitize(const std::string& text) {
  std::string out;
  for (char ch : text) {
    bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '-' || ch == '_' || ch == '.';
    out += ok ? ch : '_';
  }
  return out.substr(0, 200);
}

template <typename T>
std::atomic_ref<T> atom(T& value) {
  return std::atomic_ref<T>(value);
}

// Reads a peer key from kv, turning a timeout into one that names the rank, peer and step.
std::string getPeerKey(KeyValue& kv, const std::string& key, Deadline deadline, int rank, int peer,
                       const char* what) {
  try {
    return kv.get(key, deadline);
  } catch (const Error& e) {
    if (e.code() != ErrorCode::kTimeout) throw;
    fail(ErrorCode::kTimeout, "rank {}: shm connect timed out waiting for peer {} to {} (key '{}')",
         rank, peer, what, key);
  }
}

bool processGone(pid_t pid) {
  if (pid <= 0) return true;
  if (kill(pid, 0) != 0 && errno == ESRCH) return true;
  // A killed child stays a zombie until its parent reaps it; that counts as gone.
  std::ifstream stat(fmt::format("/proc/{}/stat", pid));
  std::string text;
  std::getline(stat, text);
  size_t paren = text.rfind(')');
  if (paren == std::string::npos || paren + 2 >= text.size()) return !stat.is_open();
  char state = text[paren + 2];
  return state == 'Z' || state == 'X';
}

}  // namespace

struct InboxHeader {
  uint64_t magic;
  uint32_t version;
  int32_t rank;
  int32_t size;
  int32_t channels;
  int32_t slots;
  int32_t pad0;
  uint64_t slotBytes;
  uint64_t totalBytes;
  int64_t pid;
  alignas(128) Doorbell doorbell;
  alignas(128) AbortRecord abort;
  alignas(128) uint64_t ringOffset0;  // first of `size` entries

  uint64_t* ringOffsets() { return &ringOffset0; }
};

class ShmSendChannel final : public SendChannel {
 public:
  ShmSendChannel(char* ring, const EndpointConfig& c, Doorbell* receiverBell, int peer)
      : control_(reinterpret_cast<uint64_t*>(ring)),
        slots_(ring + kControlBytes),
        stride_(slotStride(c.slotBytes)),
        slotBytes_(c.slotBytes),
        k_(static_cast<uint64_t>(c.slots)),
        bell_(receiverBell),
        peer_(peer) {}

  void* tryAcquire() override {
    if (sent_ - consumed_ >= k_) {
      consumed_ = atom(*control_).load(std::memory_order_acquire);
      if (sent_ - consumed_ >= k_) return nullptr;
    }
    return slots_ + (sent_ % k_) * stride_ + kSlotHeaderBytes;
  }

  void post(size_t bytes, const MessageMeta& meta) override {
    BRAID_ENFORCE(bytes <= slotBytes_, ErrorCode::kInvalidUsage,
                  "shm post to peer {}: {} bytes exceed the slot size {}", peer_, bytes,
                  slotBytes_);
    BRAID_ENFORCE(sent_ - consumed_ < k_, ErrorCode::kInvalidUsage,
                  "shm post to peer {} without a slot from tryAcquire()", peer_);
    auto* slot = reinterpret_cast<SlotHeader*>(slots_ + (sent_ % k_) * stride_);
    slot->size = bytes;
    slot->meta = meta;
    ++sent_;
    atom(slot->seq).store(sent_, std::memory_order_release);
    ringDoorbellIfSleeping(*bell_);
  }

  size_t slotBytes() const override { return slotBytes_; }
  int peer() const override { return peer_; }

 private:
  uint64_t* control_;  // the receiver's consumed counter
  char* slots_;
  size_t stride_;
  size_t slotBytes_;
  uint64_t k_;
  Doorbell* bell_;
  int peer_;
  uint64_t sent_ = 0;      // messages posted
  uint64_t consumed_ = 0;  // last seen value of *control_
};

class ShmRecvChannel final : public RecvChannel {
 public:
  ShmRecvChannel(char* ring, const EndpointConfig& c, Doorbell* senderBell, int peer)
      : control_(reinterpret_cast<uint64_t*>(ring)),
        slots_(ring + kControlBytes),
        stride_(slotStride(c.slotBytes)),
        slotBytes_(c.slotBytes),
        k_(static_cast<uint64_t>(c.slots)),
        bell_(senderBell),
        peer_(peer) {}

  const void* tryPeek(size_t* bytes, MessageMeta* meta) override {
    auto* slot = reinterpret_cast<SlotHeader*>(slots_ + (head_ % k_) * stride_);
    if (atom(slot->seq).load(std::memory_order_acquire) != head_ + 1) return nullptr;
    size_t size = slot->size;
    BRAID_ENFORCE(size <= slotBytes_, ErrorCode::kRemoteError,
                  "shm recv from peer {}: message of {} bytes exceeds the slot size {}", peer_,
                  size, slotBytes_);
    if (bytes != nullptr) *bytes = size;
    if (meta != nullptr) *meta = slot->meta;
    return reinterpret_cast<char*>(slot) + kSlotHeaderBytes;
  }

  void release() override {
    auto* slot = reinterpret_cast<SlotHeader*>(slots_ + (head_ % k_) * stride_);
    BRAID_ENFORCE(atom(slot->seq).load(std::memory_order_acquire) == head_ + 1,
                  ErrorCode::kInvalidUsage, "shm release from peer {} with no message peeked",
                  peer_);
    ++head_;
    atom(*control_).store(head_, std::memory_order_release);
    ringDoorbellIfSleeping(*bell_);
  }

  int peer() const override { return peer_; }

 private:
  uint64_t* control_;
  char* slots_;
  size_t stride_;
  size_t slotBytes_;
  uint64_t k_;
  Doorbell* bell_;
  int peer_;
  uint64_t head_ = 0;  // messages released
};

// A segment of the same name whose owner died (a crashed run that reused the jobId) is
// removed so that the new run can start; one of a live process is left alone.
bool ShmTransport::removeStaleSegment(const std::string& name) {
  int fd = shm_open(name.c_str(), O_RDONLY, 0);
  if (fd < 0) return errno == ENOENT;
  struct stat st {};
  bool stale = false;
  if (fstat(fd, &st) == 0 && static_cast<size_t>(st.st_size) >= sizeof(InboxHeader)) {
    void* base = mmap(nullptr, sizeof(InboxHeader), PROT_READ, MAP_SHARED, fd, 0);
    if (base != MAP_FAILED) {
      auto* h = static_cast<const InboxHeader*>(base);
      stale = h->magic == kMagic && processGone(static_cast<pid_t>(h->pid));
      munmap(base, sizeof(InboxHeader));
    }
  }
  close(fd);
  if (!stale) return false;
  BRAID_WARN("removing stale shm segment '{}' left by a dead process", name);
  return shm_unlink(name.c_str()) == 0 || errno == ENOENT;
}

std::string ShmTransport::segmentName(const std::string& jobId, int rank) {
  return fmt::format("/braid-{}-{}", sanitize(jobId), rank);
}

ShmTransport::ShmTransport(const EndpointConfig& config, KeyValue& kv)
    : config_(config),
      name_(segmentName(config.jobId, config.rank)),
      peers_(config.size),
      dead_(config.size, false) {
  const int size = config.size;
  size_t headerBytes = roundUp(offsetof(InboxHeader, ringOffset0) + 8 * size, pageBytes());
  std::vector<uint64_t> offsets(size, 0);
  size_t total = headerBytes;
  for (int p = 0; p < size; ++p) {
    if (p == config.rank || config.peerKinds[p] != Kind::kShm) continue;
    offsets[p] = total;
    total += peerRegionBytes(config);
  }

  int fd = shm_open(name_.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0 && errno == EEXIST && removeStaleSegment(name_)) {
    fd = shm_open(name_.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  }
  if (fd < 0) {
    int err = errno;
    failErrno(fmt::format("rank {}: shm_open('{}') for its inbox (jobId reused?)", config.rank,
                          name_),
              err);
  }
  if (ftruncate(fd, static_cast<off_t>(total)) != 0) {
    int err = errno;
    close(fd);
    shm_unlink(name_.c_str());
    failErrno(fmt::format("rank {}: ftruncate('{}', {} bytes)", config.rank, name_, total), err);
  }
  void* base = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int err = errno;
  close(fd);
  if (base == MAP_FAILED) {
    shm_unlink(name_.c_str());
    failErrno(fmt::format("rank {}: mmap('{}', {} bytes)", config.rank, name_, total), err);
  }
  own_ = {base, total};
  try {
    initInbox(offsets);
    kv.set(fmt::format("{}/shm/{}", config.jobId, config.rank), name_);
  } catch (...) {
    // The destructor does not run for a throwing constructor.
    munmap(own_.base, own_.bytes);
    shm_unlink(name_.c_str());
    throw;
  }
}

void ShmTransport::initInbox(const std::vector<uint64_t>& offsets) {
  const EndpointConfig& config = config_;
  auto* h = static_cast<InboxHeader*>(own_.base);
  h->magic = kMagic;
  h->version = kVersion;
  h->rank = config.rank;
  h->channels = config.channels;
  h->slots = config.slots;
  h->slotBytes = config.slotBytes;
  h->totalBytes = own_.bytes;
  h->pid = getpid();
  for (int p = 0; p < config.size; ++p) h->ringOffsets()[p] = offsets[p];
  h->size = config.size;
}

ShmTransport::~ShmTransport() {
  sends_.clear();
  recvs_.clear();
  for (auto& m : peers_) {
    if (m.base != nullptr) munmap(m.base, m.bytes);
  }
  if (own_.base != nullptr) munmap(own_.base, own_.bytes);
  if (!unlinked_) shm_unlink(name_.c_str());
}

InboxHeader* ShmTransport::header(int peer) const {
  return static_cast<InboxHeader*>(peer == config_.rank ? own_.base : peers_[peer].base);
}

void ShmTransport::mapPeers(KeyValue& kv, Deadline deadline) {
  const int rank = config_.rank;
  const int channels = config_.channels;
  sends_.resize(static_cast<size_t>(config_.size) * channels);
  recvs_.resize(static_cast<size_t>(config_.size) * channels);
  for (int p = 0; p < config_.size; ++p) {
    if (p == rank || config_.peerKinds[p] != Kind::kShm) continue;
    std::string name = getPeerKey(kv, fmt::format("{}/shm/{}", config_.jobId, p), deadline, rank,
                                  p, "publish its shm inbox");
    int fd = shm_open(name.c_str(), O_RDWR, 0);
    if (fd < 0) {
      failErrno(fmt::format("rank {}: shm_open('{}') of peer {}'s inbox", rank, name, p), errno);
    }
    struct stat st {};
    if (fstat(fd, &st) != 0) {
      int err = errno;
      close(fd);
      failErrno(fmt::format("rank {}: fstat of peer {}'s inbox '{}'", rank, p, name), err);
    }
    size_t bytes = static_cast<size_t>(st.st_size);
    void* base = bytes >= sizeof(InboxHeader)
                     ? mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
                     : MAP_FAILED;
    int err = errno;
    close(fd);
    if (base == MAP_FAILED) {
      failErrno(fmt::format("rank {}: mmap of peer {}'s inbox '{}' ({} bytes)", rank, p, name,
                            bytes),
                err);
    }
    peers_[p] = {base, bytes};
    auto* h = static_cast<InboxHeader*>(base);
    BRAID_ENFORCE(h->magic == kMagic && h->version == kVersion && h->rank == p &&
                      h->totalBytes == bytes,
                  ErrorCode::kInvalidUsage,
                  "rank {}: peer {}'s shm inbox '{}' is not a braid v{} inbox of that rank", rank,
                  p, name, kVersion);
    BRAID_ENFORCE(h->size == config_.size && h->channels == channels &&
                      h->slots == config_.slots && h->slotBytes == config_.slotBytes,
                  ErrorCode::kInvalidUsage,
                  "rank {}: peer {} disagrees on the shm config: size {} vs {}, channels {} vs {}, "
                  "slots {} vs {}, slotBytes {} vs {}",
                  rank, p, h->size, config_.size, h->channels, channels, h->slots, config_.slots,
                  h->slotBytes, config_.slotBytes);
    uint64_t toPeer = h->ringOffsets()[rank];
    BRAID_ENFORCE(toPeer != 0 && toPeer + peerRegionBytes(config_) <= bytes,
                  ErrorCode::kInvalidUsage,
                  "rank {}: uses shm towards peer {}, but peer {} does not use shm towards it", rank,
                  p, p);
    uint64_t fromPeer = header(rank)->ringOffsets()[p];
    for (int c = 0; c < channels; ++c) {
      char* out = static_cast<char*>(base) + toPeer + c * ringBytes(config_);
      char* in = static_cast<char*>(own_.base) + fromPeer + c * ringBytes(config_);
      sends_[p * channels + c] = std::make_unique<ShmSendChannel>(out, config_, &h->doorbell, p);
      recvs_[p * channels + c] = std::make_unique<ShmRecvChannel>(in, config_, &h->doorbell, p);
    }
  }
  kv.set(fmt::format("{}/mapped/{}", config_.jobId, rank), "1");
}

void ShmTransport::unlinkWhenMapped(KeyValue& kv, Deadline deadline) {
  for (int p = 0; p < config_.size; ++p) {
    if (p == config_.rank || config_.peerKinds[p] != Kind::kShm) continue;
    getPeerKey(kv, fmt::format("{}/mapped/{}", config_.jobId, p), deadline, config_.rank, p,
               "map the shm inboxes");
  }
  if (shm_unlink(name_.c_str()) != 0) {
    BRAID_WARN("rank {}: shm_unlink('{}'): {}", config_.rank, name_, strerror(errno));
  }
  unlinked_ = true;
}

Doorbell& ShmTransport::doorbell() { return header(config_.rank)->doorbell; }

SendChannel& ShmTransport::send(int peer, int channel) {
  return *sends_[peer * config_.channels + channel];
}

RecvChannel& ShmTransport::recv(int peer, int channel) {
  return *recvs_[peer * config_.channels + channel];
}

bool ShmTransport::peerAlive(int peer) {
  if (dead_[peer]) return false;
  if (peers_[peer].base == nullptr) return true;
  pid_t pid = static_cast<pid_t>(header(peer)->pid);
  if (pid == getpid()) return true;  // ranks as threads of this process
  bool dead = processGone(pid);
  if (dead) dead_[peer] = true;
  return !dead;
}

void ShmTransport::signalAbort(const std::string& reason) {
  for (int p = 0; p < config_.size; ++p) {
    if (peers_[p].base == nullptr) continue;
    InboxHeader* h = header(p);
    AbortRecord& record = h->abort;
    uint32_t expected = 0;
    if (atom(record.state).compare_exchange_strong(expected, 1, std::memory_order_acq_rel)) {
      record.rank = config_.rank;
      size_t n = std::min(reason.size(), kReasonBytes - 1);
      std::memcpy(record.reason, reason.data(), n);
      record.reason[n] = '\0';
      atom(record.state).store(2, std::memory_order_release);
    }
    ringDoorbell(h->doorbell);
  }
}

std::optional<std::pair<int, std::string>> ShmTransport::peerAbort() {
  if (own_.base == nullptr) return std::nullopt;
  AbortRecord& record = header(config_.rank)->abort;
  if (atom(record.state).load(std::memory_order_acquire) != 2) return std::nullopt;
  size_t n = strnlen(record.reason, kReasonBytes);
  return std::make_pair(static_cast<int>(record.rank), std::string(record.reason, n));
}

}  // namespace braid::transport::shm
