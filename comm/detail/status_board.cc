#include "comm/detail/status_board.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "common/ticks.h"

namespace braid::comm {
namespace {

constexpr uint64_t kMagic = 0x3164726f62646962ull;  // "bidboard1"
constexpr size_t kTextWords = 96;                   // 768 bytes of "waiting for" text

// What the records store as "since": readTick() (one host's ranks share the counter).
int64_t tick() { return readTick(); }

enum class RankState : uint32_t { kNone = 0, kIdle = 1, kRunning = 2, kFailed = 3 };

}  // namespace

// One rank's record. Every field is an atomic word: the owner writes between two increments of
// `version` (odd while writing), readers copy and retry when the version moved.
struct StatusBoard::Record {
  std::atomic<uint64_t> version;
  std::atomic<uint64_t> pid;
  std::atomic<uint64_t> state;  // RankState
  std::atomic<uint64_t> seq;    // the current (or last) op's number
  std::atomic<uint64_t> coll, count, dtype, algorithm, p2p, peer;
  std::atomic<uint64_t> doneColls;  // collectives completed (the next one's number)
  std::atomic<int64_t> sinceNs;     // steady clock: when `state` was entered
  std::atomic<uint64_t> text[kTextWords];
};

namespace {

struct Header {
  std::atomic<uint64_t> magic;
  std::atomic<uint64_t> size;
  std::atomic<uint64_t> attached;
};

size_t boardBytes(int size) {
  return (sizeof(Header) + size_t(size) * sizeof(StatusBoard::Record) + 4095) / 4096 * 4096;
}

std::string segmentName(const std::string& jobId) {
  std::string name = "/braid-status-";
  for (char c : jobId) name += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return name.substr(0, 200);
}

// A consistent copy of a record's numbers and text.
struct Snapshot {
  uint64_t pid = 0, state = 0, seq = 0, coll = 0, count = 0, dtype = 0, algorithm = 0, p2p = 0,
           peer = 0, doneColls = 0;
  int64_t sinceNs = 0;
  std::string text;
};

bool read(const StatusBoard::Record& r, Snapshot* s) {
  for (int attempt = 0; attempt < 1000; ++attempt) {
    const uint64_t v = r.version.load(std::memory_order_acquire);
    if (v & 1) continue;
    s->pid = r.pid.load(std::memory_order_relaxed);
    s->state = r.state.load(std::memory_order_relaxed);
    s->seq = r.seq.load(std::memory_order_relaxed);
    s->coll = r.coll.load(std::memory_order_relaxed);
    s->count = r.count.load(std::memory_order_relaxed);
    s->dtype = r.dtype.load(std::memory_order_relaxed);
    s->algorithm = r.algorithm.load(std::memory_order_relaxed);
    s->p2p = r.p2p.load(std::memory_order_relaxed);
    s->peer = r.peer.load(std::memory_order_relaxed);
    s->doneColls = r.doneColls.load(std::memory_order_relaxed);
    s->sinceNs = r.sinceNs.load(std::memory_order_relaxed);
    char buf[kTextWords * 8 + 1] = {};
    for (size_t i = 0; i < kTextWords; ++i) {
      const uint64_t w = r.text[i].load(std::memory_order_relaxed);
      std::memcpy(buf + 8 * i, &w, 8);
    }
    std::atomic_thread_fence(std::memory_order_acquire);
    if (r.version.load(std::memory_order_relaxed) == v) {
      s->text = buf;
      return true;
    }
  }
  return false;  // its owner keeps writing: report it as unreadable
}

// The owner's write of a record (a seqlock: version odd meanwhile).
template <typename Fn>
void write(StatusBoard::Record& r, Fn&& fn) {
  const uint64_t v = r.version.load(std::memory_order_relaxed);
  r.version.store(v + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  fn(r);
  r.version.store(v + 2, std::memory_order_release);
}

void setText(StatusBoard::Record& r, const std::string& text) {
  char buf[kTextWords * 8] = {};
  std::memcpy(buf, text.data(), std::min(text.size(), sizeof buf - 1));
  for (size_t i = 0; i < kTextWords; ++i) {
    uint64_t w;
    std::memcpy(&w, buf + 8 * i, 8);
    r.text[i].store(w, std::memory_order_relaxed);
  }
}

// How far a rank got, in half steps: 2n once n collectives completed, 2n + 1 while in (or failed
// in) collective #n. A rank waiting in #2 is ahead of one that has not called it.
uint64_t progressOf(const Snapshot& s) {
  const bool inCollective = !s.p2p && (s.state == uint64_t(RankState::kRunning) ||
                                       s.state == uint64_t(RankState::kFailed));
  return inCollective ? 2 * s.seq + 1 : 2 * s.doneColls;
}

std::string seconds(int64_t since, const TickClock& clock) {
  return fmt::format("{:.1f} s", clock.nsSince(since) / 1e9);
}

}  // namespace

std::unique_ptr<StatusBoard> StatusBoard::open(const std::string& jobId, int rank, int size,
                                               int localRanks, std::string* why) {
  const std::string name = segmentName(jobId);
  const size_t bytes = boardBytes(size);
  int fd = shm_open(name.c_str(), O_CREAT | O_RDWR, 0600);
  if (fd < 0) {
    *why = fmt::format("shm_open('{}'): {}", name, std::strerror(errno));
    return nullptr;
  }
  struct stat st {};
  // Every rank sizes it alike; growing a fresh (empty) segment is the first rank's doing.
  if (fstat(fd, &st) != 0 || (size_t(st.st_size) != bytes && ftruncate(fd, off_t(bytes)) != 0)) {
    *why = fmt::format("sizing '{}' to {} bytes: {}", name, bytes, std::strerror(errno));
    close(fd);
    return nullptr;
  }
  void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (base == MAP_FAILED) {
    *why = fmt::format("mmap of '{}': {}", name, std::strerror(errno));
    return nullptr;
  }
  auto* header = static_cast<Header*>(base);
  header->magic.store(kMagic, std::memory_order_relaxed);
  header->size.store(uint64_t(size), std::memory_order_relaxed);
  if (header->attached.fetch_add(1, std::memory_order_acq_rel) + 1 >= uint64_t(localRanks)) {
    shm_unlink(name.c_str());  // every local rank has it mapped: the name is no longer needed
  }
  auto board = std::unique_ptr<StatusBoard>(new StatusBoard(rank, size, name, base, bytes));
  write(board->record(rank), [&](Record& r) {
    r.pid.store(uint64_t(getpid()), std::memory_order_relaxed);
    r.state.store(uint64_t(RankState::kIdle), std::memory_order_relaxed);
    r.doneColls.store(0, std::memory_order_relaxed);
    r.sinceNs.store(tick(), std::memory_order_relaxed);
    setText(r, "");
  });
  return board;
}

StatusBoard::StatusBoard(int rank, int size, std::string name, void* base, size_t bytes)
    : rank_(rank),
      size_(size),
      name_(std::move(name)),
      base_(base),
      bytes_(bytes) {}

StatusBoard::~StatusBoard() {
  // Normally gone since every local rank opened it; not when one never came (a failed init).
  shm_unlink(name_.c_str());
  munmap(base_, bytes_);
}

StatusBoard::Record& StatusBoard::record(int r) const {
  auto* records = reinterpret_cast<Record*>(static_cast<char*>(base_) + sizeof(Header));
  return records[r];
}

void StatusBoard::started(const OpDesc& d, Algorithm algorithm) {
  const bool p2p = d.coll == Collective::kSend || d.coll == Collective::kRecv;
  write(record(rank_), [&](Record& r) {
    r.state.store(uint64_t(RankState::kRunning), std::memory_order_relaxed);
    r.seq.store(d.seq, std::memory_order_relaxed);
    r.coll.store(uint64_t(d.coll), std::memory_order_relaxed);
    r.count.store(d.count, std::memory_order_relaxed);
    r.dtype.store(uint64_t(d.dtype), std::memory_order_relaxed);
    r.algorithm.store(uint64_t(algorithm), std::memory_order_relaxed);
    r.p2p.store(p2p ? 1 : 0, std::memory_order_relaxed);
    r.peer.store(uint64_t(int64_t(d.root)), std::memory_order_relaxed);
    r.sinceNs.store(tick(), std::memory_order_relaxed);
    r.text[0].store(0, std::memory_order_relaxed);
  });
}

void StatusBoard::ended(const OpDesc& d, bool ok) {
  const bool p2p = d.coll == Collective::kSend || d.coll == Collective::kRecv;
  write(record(rank_), [&](Record& r) {
    r.state.store(uint64_t(ok ? RankState::kIdle : RankState::kFailed),
                  std::memory_order_relaxed);
    if (ok && !p2p && d.seq + 1 > r.doneColls.load(std::memory_order_relaxed)) {
      r.doneColls.store(d.seq + 1, std::memory_order_relaxed);
    }
    r.sinceNs.store(tick(), std::memory_order_relaxed);
    if (ok) r.text[0].store(0, std::memory_order_relaxed);
  });
}

void StatusBoard::waiting(const std::string& what) {
  write(record(rank_), [&](Record& r) { setText(r, what); });
}

std::string StatusBoard::report(const std::vector<std::string>& hosts) const {
  std::vector<Snapshot> snaps(size_);
  std::vector<bool> here(size_, false), readable(size_, false);
  uint64_t lowest = UINT64_MAX, highest = 0;
  for (int q = 0; q < size_; ++q) {
    here[q] = q < int(hosts.size()) && hosts[q] == hosts[rank_];
    if (!here[q]) continue;
    readable[q] = read(record(q), &snaps[q]) && snaps[q].state != 0;
    if (!readable[q]) continue;
    const uint64_t at = progressOf(snaps[q]);
    lowest = std::min(lowest, at);
    highest = std::max(highest, at);
  }
  std::string out;
  for (int q = 0; q < size_; ++q) {
    std::string line = fmt::format("  rank {}", q);
    if (!here[q]) {
      out += line + fmt::format(": on host {} (its own board)\n", q < int(hosts.size()) ? hosts[q]
                                                                                       : "?");
      continue;
    }
    if (!readable[q]) {
      out += line + ": no record (not connected yet, or gone)\n";
      continue;
    }
    const Snapshot& s = snaps[q];
    line += fmt::format(" (pid {}): ", s.pid);
    const std::string last =
        s.doneColls > 0 ? fmt::format("last completed collective #{}", s.doneColls - 1)
                        : "no collective completed";
    const auto coll = static_cast<Collective>(s.coll);
    const std::string op =
        s.p2p ? fmt::format("{} #{} ({} x {}, peer rank {})", collectiveName(coll), s.seq, s.count,
                            dataTypeName(static_cast<DataType>(s.dtype)), int64_t(s.peer))
              : fmt::format("{} #{} ({} x {}, {})", collectiveName(coll), s.seq, s.count,
                            dataTypeName(static_cast<DataType>(s.dtype)),
                            algorithmName(static_cast<Algorithm>(s.algorithm)));
    switch (static_cast<RankState>(s.state)) {
      case RankState::kRunning:
        line += fmt::format("in {} for {}; {}", op, seconds(s.sinceNs, clock_), last);
        break;
      case RankState::kFailed:
        line += fmt::format("{} failed {} ago; {}", op, seconds(s.sinceNs, clock_), last);
        break;
      default:
        line += fmt::format("not in an operation for {}; {}", seconds(s.sinceNs, clock_), last);
    }
    if (!s.text.empty()) line += "; " + s.text;
    if (lowest < highest && progressOf(s) == lowest) line += "   <- behind";
    out += line + "\n";
  }
  return out;
}

}  // namespace braid::comm
