// Shared-memory transport: creating, mapping and unlinking the inboxes, peer liveness and abort
// records. The segment layout and the ring protocol are described at the top of shm/ring.h.
#include "transport/shm/shm.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>

#include "common/log.h"
#include "transport/peer_key.h"
#include "transport/process.h"
#include "transport/shm/ring.h"

namespace braid::transport::shm {

namespace {

std::string sanitize(const std::string& text) {
  std::string out;
  for (char ch : text) {
    bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '-' || ch == '_' || ch == '.';
    out += ok ? ch : '_';
  }
  return out.substr(0, 200);
}

// Inboxes are sparse, so creating them always works, but touching a page when /dev/shm is full
// kills the process with SIGBUS (docker's default /dev/shm is 64 MiB). Say so up front, once per
// host group (from its lowest shm rank).
void warnIfShmSmall(const EndpointConfig& config, size_t inboxBytes) {
  for (int p = 0; p < config.rank; ++p) {
    if (config.peerKinds[p] == Kind::kShm) return;
  }
  int ranks = 1;
  for (Kind kind : config.peerKinds) ranks += kind == Kind::kShm ? 1 : 0;
  struct statvfs fs {};
  if (statvfs("/dev/shm", &fs) != 0) return;
  double freeMiB = static_cast<double>(fs.f_bavail) * fs.f_frsize / (1 << 20);
  double needMiB = static_cast<double>(inboxBytes) * ranks / (1 << 20);
  if (freeMiB < needMiB) {
    BRAID_WARN(
        "rank {}: /dev/shm has {:.0f} MiB free but the {} shm inboxes of this host may grow to "
        "{:.0f} MiB; if it fills, ranks die with SIGBUS (enlarge it, e.g. docker --shm-size, or "
        "use fewer channels/slots/smaller BRAID_CHUNK, or BRAID_TRANSPORT=tcp)",
        config.rank, freeMiB, ranks, needMiB);
  }
}

}  // namespace

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
      stale = h->magic == kMagic && processGone(h->pid, h->pidNamespace);
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

  warnIfShmSmall(config, total);
  int fd = shm_open(name_.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0 && errno == EEXIST && removeStaleSegment(name_)) {
    fd = shm_open(name_.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  }
  if (fd < 0) {
    int err = errno;
    failErrno(
        fmt::format("rank {}: shm_open('{}') for its inbox (jobId reused?)", config.rank, name_),
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
  h->pidNamespace = pidNamespace();
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
  if (!unlinked_) {
    // Connect did not finish: the job failed (a peer died or never came), so nobody will wait for
    // the names any more. Unlink this job's every inbox, not only ours: a peer killed between
    // creating its inbox and unlinking it would otherwise leave it in /dev/shm for good.
    shm_unlink(name_.c_str());
    for (int q = 0; q < config_.size; ++q) {
      if (q != config_.rank && config_.peerKinds[q] == Kind::kShm)
        shm_unlink(segmentName(config_.jobId, q).c_str());
    }
  }
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
    std::string name = getPeerKey(kv, fmt::format("{}/shm/{}", config_.jobId, p), deadline, rank, p,
                                  "shm", "publish its shm inbox");
    int fd = shm_open(name.c_str(), O_RDWR, 0);
    if (fd < 0) {
      int err = errno;
      BRAID_ENFORCE(
          err != ENOENT, ErrorCode::kRemoteError,
          "rank {}: peer rank {}'s shm inbox '{}' is gone before this rank mapped it (the "
          "peer failed or exited during connect)",
          rank, p, name);
      failErrno(fmt::format("rank {}: shm_open('{}') of peer rank {}'s inbox", rank, name, p), err);
    }
    struct stat st {};
    if (fstat(fd, &st) != 0) {
      int err = errno;
      close(fd);
      failErrno(fmt::format("rank {}: fstat of peer rank {}'s inbox '{}'", rank, p, name), err);
    }
    size_t bytes = static_cast<size_t>(st.st_size);
    void* base = bytes >= sizeof(InboxHeader)
                     ? mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
                     : MAP_FAILED;
    int err = errno;
    close(fd);
    if (base == MAP_FAILED) {
      failErrno(fmt::format("rank {}: mmap of peer rank {}'s inbox '{}' ({} bytes)", rank, p, name,
                            bytes),
                err);
    }
    peers_[p] = {base, bytes};
    auto* h = static_cast<InboxHeader*>(base);
    BRAID_ENFORCE(
        h->magic == kMagic && h->version == kVersion && h->rank == p && h->totalBytes == bytes,
        ErrorCode::kInvalidUsage,
        "rank {}: peer rank {}'s shm inbox '{}' is not a braid v{} inbox of that rank", rank, p,
        name, kVersion);
    BRAID_ENFORCE(
        h->size == config_.size && h->channels == channels && h->slots == config_.slots &&
            h->slotBytes == config_.slotBytes,
        ErrorCode::kInvalidUsage,
        "rank {}: peer rank {} disagrees on the shm config: size {} vs {}, channels {} vs {}, "
        "slots {} vs {}, slotBytes {} vs {}",
        rank, p, h->size, config_.size, h->channels, channels, h->slots, config_.slots,
        h->slotBytes, config_.slotBytes);
    uint64_t toPeer = h->ringOffsets()[rank];
    BRAID_ENFORCE(
        toPeer != 0 && toPeer + peerRegionBytes(config_) <= bytes, ErrorCode::kInvalidUsage,
        "rank {}: uses shm towards peer rank {}, but peer rank {} does not use shm towards it",
        rank, p, p);
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
  // Every rank unlinks every inbox it knows (its own and its shm peers') as soon as all ranks
  // that map that inbox (its ring table names them) said they mapped it. So the names are gone
  // once the first rank gets here, even if the owner dies right after.
  std::vector<bool> mapped(config_.size, false);
  mapped[config_.rank] = true;
  for (int owner = 0; owner < config_.size; ++owner) {
    if (owner != config_.rank && peers_[owner].base == nullptr) continue;
    const uint64_t* table = header(owner)->ringOffsets();
    for (int q = 0; q < config_.size; ++q) {
      if (table[q] == 0 || mapped[q]) continue;
      getPeerKey(kv, fmt::format("{}/mapped/{}", config_.jobId, q), deadline, config_.rank, q,
                 "shm", "map the shm inboxes");
      mapped[q] = true;
    }
    std::string name = segmentName(config_.jobId, owner);
    if (shm_unlink(name.c_str()) != 0 && errno != ENOENT) {
      BRAID_WARN("rank {}: shm_unlink('{}'): {}", config_.rank, name, strerror(errno));
    }
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
  const InboxHeader* h = header(peer);
  // Another pid namespace (containers sharing /dev/shm): processGone() cannot check its pid,
  // so only the caller's timeout catches that peer's death.
  if (static_cast<pid_t>(h->pid) == getpid()) return true;  // ranks as threads of this process
  bool dead = processGone(h->pid, h->pidNamespace);
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
