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

}  // namespace

// One rank's record, written only by its rank. What an op costs is its end: one store of `ended`
// (the op's number), its end time and, for a collective, `doneColls`; no clock read, no fence on
// x86. The op's description is written only when the op waits (waiting(), at most once per idle
// period of the engine, which has already spun for microseconds) or fails: between two
// increments of `version` (odd meanwhile), read by copying and retrying when the version moved.
// The end words are read after the description, so they may be newer than it, never older. A
// rank inside an op it has not waited in yet reads as between ops (for microseconds): a report
// comes from a rank that waited seconds, and the ranks it waits for are waiting too, or are not
// in the op at all.
struct StatusBoard::Record {
  std::atomic<uint64_t> version;
  std::atomic<uint64_t> pid;
  std::atomic<uint64_t> op;       // the described op's number (1-based; 0: none yet)
  std::atomic<uint64_t> failed;   // 1: the described op failed
  std::atomic<uint64_t> kind;     // packKind(): collective, type, algorithm, send/recv
  std::atomic<uint64_t> seq;      // its sequence number
  std::atomic<uint64_t> count;
  std::atomic<int64_t> peer;       // root of a collective, peer of a send/recv
  std::atomic<int64_t> startTick;  // its issue tick (0: unknown)
  std::atomic<int64_t> waitSince;  // tick when `text` was written
  std::atomic<uint64_t> text[kTextWords];
  std::atomic<uint64_t> ended;      // the number of the last op that ended
  std::atomic<int64_t> endTick;     // when it ended (0: unknown)
  std::atomic<uint64_t> doneColls;  // collectives completed (the next one's number)
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

std::string segmentName(const std::string& boardName) {
  std::string name = "/braid-status-";
  for (char c : boardName) name += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return name.substr(0, 200);
}

enum class RankState { kNone, kIdle, kRunning, kFailed };

uint64_t packKind(const OpDesc& d, Algorithm algorithm) {
  const bool p2p = d.coll == Collective::kSend || d.coll == Collective::kRecv;
  return uint64_t(uint8_t(d.coll)) | uint64_t(uint8_t(d.dtype)) << 8 |
         uint64_t(uint8_t(algorithm)) << 16 | uint64_t(p2p) << 24;
}

// A consistent copy of a record's numbers and text.
struct Snapshot {
  uint64_t pid = 0, op = 0, seq = 0, count = 0, ended = 0, doneColls = 0;
  bool failed = false;
  Collective coll = Collective::kAllReduce;
  DataType dtype = DataType::kFloat32;
  Algorithm algorithm = Algorithm::kAuto;
  bool p2p = false, group = false;
  int64_t peer = 0, startTick = 0, endTick = 0, waitSince = 0;
  std::string text;

  RankState state() const {
    if (pid == 0) return RankState::kNone;
    if (op > ended) return RankState::kRunning;  // described while it waits, not yet ended
    return failed && op == ended ? RankState::kFailed : RankState::kIdle;
  }
  int64_t since() const { return state() == RankState::kRunning ? startTick : endTick; }
};

bool read(const StatusBoard::Record& r, Snapshot* s) {
  for (int attempt = 0; attempt < 1000; ++attempt) {
    const uint64_t v = r.version.load(std::memory_order_acquire);
    if (v & 1) continue;
    s->pid = r.pid.load(std::memory_order_relaxed);
    s->op = r.op.load(std::memory_order_relaxed);
    s->failed = r.failed.load(std::memory_order_relaxed) != 0;
    const uint64_t kind = r.kind.load(std::memory_order_relaxed);
    s->seq = r.seq.load(std::memory_order_relaxed);
    s->count = r.count.load(std::memory_order_relaxed);
    s->peer = r.peer.load(std::memory_order_relaxed);
    s->startTick = r.startTick.load(std::memory_order_relaxed);
    s->waitSince = r.waitSince.load(std::memory_order_relaxed);
    char buf[kTextWords * 8 + 1] = {};
    for (size_t i = 0; i < kTextWords; ++i) {
      const uint64_t w = r.text[i].load(std::memory_order_relaxed);
      std::memcpy(buf + 8 * i, &w, 8);
    }
    std::atomic_thread_fence(std::memory_order_acquire);
    if (r.version.load(std::memory_order_relaxed) == v) {
      s->coll = static_cast<Collective>(uint8_t(kind));
      s->dtype = static_cast<DataType>(uint8_t(kind >> 8));
      s->algorithm = static_cast<Algorithm>(uint8_t(kind >> 16));
      s->p2p = (kind >> 24) & 1;
      s->group = (kind >> 25) & 1;
      s->text = buf;
      // The end words, after the description: they may be newer, never older, than it.
      s->ended = r.ended.load(std::memory_order_acquire);
      s->endTick = r.endTick.load(std::memory_order_relaxed);
      s->doneColls = r.doneColls.load(std::memory_order_relaxed);
      return true;
    }
  }
  return false;  // its owner keeps writing: report it as unreadable
}

// The owner's write of its record (a seqlock: version odd meanwhile). `version` is the owner's
// own copy of the record's version, so a write loads nothing from the shared line.
template <typename Fn>
void write(StatusBoard::Record& r, uint64_t& version, Fn&& fn) {
  r.version.store(++version, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  fn(r);
  r.version.store(++version, std::memory_order_release);
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
  const RankState state = s.state();
  const bool inCollective =
      !s.p2p && (state == RankState::kRunning || state == RankState::kFailed);
  return inCollective ? 2 * s.seq + 1 : 2 * s.doneColls;
}

// " for 12.3 s" since tick `since`, or "" when the time is unknown.
std::string forHowLong(int64_t since, const TickClock& clock) {
  return since == 0 ? std::string() : fmt::format(" for {:.1f} s", clock.nsSince(since) / 1e9);
}

}  // namespace

std::unique_ptr<StatusBoard> StatusBoard::open(const std::string& boardName, int rank, int size,
                                               int localRanks, std::string* why) {
  const std::string name = segmentName(boardName);
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
  board->version_ = board->mine_->version.load(std::memory_order_relaxed) & ~uint64_t(1);
  write(*board->mine_, board->version_, [&](Record& r) {
    r.pid.store(uint64_t(getpid()), std::memory_order_relaxed);
    r.op.store(0, std::memory_order_relaxed);
    r.ended.store(0, std::memory_order_relaxed);
    r.doneColls.store(0, std::memory_order_relaxed);
    r.endTick.store(tick(), std::memory_order_relaxed);
    setText(r, "");
  });
  return board;
}

StatusBoard::StatusBoard(int rank, int size, std::string name, void* base, size_t bytes)
    : rank_(rank),
      size_(size),
      name_(std::move(name)),
      base_(base),
      bytes_(bytes),
      mine_(&record(rank)),
      endWords_{&mine_->ended, &mine_->endTick, &mine_->doneColls} {}

StatusBoard::~StatusBoard() {
  // Normally gone since every local rank opened it; not when one never came (a failed init).
  shm_unlink(name_.c_str());
  munmap(base_, bytes_);
}

StatusBoard::Record& StatusBoard::record(int r) const {
  auto* records = reinterpret_cast<Record*>(static_cast<char*>(base_) + sizeof(Header));
  return records[r];
}

void StatusBoard::describe(const OpDesc& d, Algorithm algorithm, bool failed,
                           const std::string* text, bool group) {
  const int64_t now = text != nullptr ? tick() : 0;
  write(*mine_, version_, [&](Record& r) {
    r.op.store(ops_, std::memory_order_relaxed);
    r.failed.store(failed ? 1 : 0, std::memory_order_relaxed);
    r.kind.store(packKind(d, algorithm) | uint64_t(group) << 25, std::memory_order_relaxed);
    r.seq.store(d.seq, std::memory_order_relaxed);
    r.count.store(d.count, std::memory_order_relaxed);
    r.peer.store(d.root, std::memory_order_relaxed);
    r.startTick.store(d.issuedTick, std::memory_order_relaxed);
    if (text != nullptr) {
      setText(r, *text);
      r.waitSince.store(now, std::memory_order_relaxed);
    }
  });
}

void StatusBoard::failed(const OpDesc& d) {
  // An op can be ended twice on failure (the runner, then the caller's catch): once counts.
  const bool again = current_ == nullptr && d.coll == lastFailed_.coll &&
                     d.seq == lastFailed_.seq && d.root == lastFailed_.root;
  if (again) return;
  if (current_ == nullptr) ++ops_;  // it failed before it started: it gets a number here
  describe(d, current_ == &d ? currentAlgorithm_ : Algorithm::kAuto, true, nullptr, false);
  lastFailed_ = d;
  endWords_.endTick->store(readTick(), std::memory_order_relaxed);
  endWords_.ended->store(ops_, std::memory_order_release);
  current_ = nullptr;
}

void StatusBoard::waiting(const std::string& what) {
  if (current_ != nullptr) {
    describe(*current_, currentAlgorithm_, false, &what, false);
    return;
  }
  // A group of sends and receives runs its ops without start() (comm/detail/p2p_group.h): it
  // gets a number of its own while it waits; the text names its unfinished ops.
  ++ops_;
  OpDesc group;
  group.coll = Collective::kSend;
  describe(group, Algorithm::kAuto, false, &what, true);
}

std::vector<StatusLine> StatusBoard::lines(const std::vector<std::string>& hosts) const {
  std::vector<StatusLine> out;
  for (int q = 0; q < size_; ++q) {
    if (q >= int(hosts.size()) || hosts[q] != hosts[rank_]) continue;
    StatusLine line;
    line.rank = q;
    Snapshot s;
    if (!read(record(q), &s) || s.state() == RankState::kNone) {
      line.text = "no record (not connected yet, or gone)";
      out.push_back(std::move(line));
      continue;
    }
    line.known = true;
    line.progress = progressOf(s);
    const std::string last =
        s.doneColls > 0 ? fmt::format("last completed collective #{}", s.doneColls - 1)
                        : "no collective completed";
    const std::string op =
        s.group ? std::string("a group of sends and receives")
        : s.p2p ? fmt::format("{} #{} ({} x {}, {})", collectiveName(s.coll), s.seq, s.count,
                            dataTypeName(s.dtype),
                            s.peer >= 0 ? fmt::format("peer rank {}", s.peer) : "any source")
              : fmt::format("{} #{} ({} x {}, {})", collectiveName(s.coll), s.seq, s.count,
                            dataTypeName(s.dtype), algorithmName(s.algorithm));
    line.text = fmt::format("(pid {}): ", s.pid);
    switch (s.state()) {
      case RankState::kRunning:
        line.text += fmt::format("in {}{}; {}", op, forHowLong(s.since(), clock_), last);
        break;
      case RankState::kFailed:
        line.text += fmt::format("{} failed{}; {}", op,
                                 s.since() == 0 ? std::string()
                                                : fmt::format(" {:.1f} s ago",
                                                              clock_.nsSince(s.since()) / 1e9),
                                 last);
        break;
      default:
        line.text +=
            fmt::format("not in an operation{}; {}", forHowLong(s.since(), clock_), last);
    }
    if (!s.text.empty() && s.state() != RankState::kIdle) {
      line.text += fmt::format(";{} {}", forHowLong(s.waitSince, clock_), s.text);
    }
    out.push_back(std::move(line));
  }
  return out;
}

std::string StatusBoard::format(int size, const std::vector<StatusLine>& lines,
                                const std::function<std::string(int)>& missing) {
  std::vector<const StatusLine*> byRank(size, nullptr);
  uint64_t lowest = UINT64_MAX, highest = 0;
  for (const StatusLine& l : lines) {
    if (l.rank < 0 || l.rank >= size) continue;
    byRank[l.rank] = &l;
    if (!l.known) continue;
    lowest = std::min(lowest, l.progress);
    highest = std::max(highest, l.progress);
  }
  std::string out;
  for (int q = 0; q < size; ++q) {
    const StatusLine* l = byRank[q];
    if (l == nullptr) {
      out += fmt::format("  rank {}: {}\n", q, missing(q));
      continue;
    }
    const bool behind = l->known && lowest < highest && l->progress == lowest;
    out += fmt::format("  rank {}{}{}{}\n", q, l->known ? " " : ": ", l->text,
                       behind ? "   <- behind" : "");
  }
  return out;
}

std::string StatusBoard::report(const std::vector<std::string>& hosts) const {
  return format(size_, lines(hosts), [&](int q) {
    return fmt::format("on host {} (its own board)", q < int(hosts.size()) ? hosts[q] : "?");
  });
}

}  // namespace braid::comm
