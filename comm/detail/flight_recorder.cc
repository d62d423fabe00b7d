#include "comm/detail/flight_recorder.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>

#include <filesystem>

#include "common/ticks.h"

namespace braid::comm {
namespace {

int64_t wallNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// What an event stores (converted to wall-clock ns when dumped).
int64_t tick() { return readTick(); }

bool isP2p(Collective c) { return c == Collective::kSend || c == Collective::kRecv; }

std::string jsonString(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c < 0x20) {
          out += fmt::format("\\u{:04x}", c);
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

std::string hostName() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

}  // namespace

// One op's entry. Every field is a word of its own, written with relaxed stores; `place` is 0
// while issued() rewrites it and the op's place once it is whole (a reader's consistency check).
struct FlightRecorder::Slot {
  std::atomic<uint64_t> place{0};
  std::atomic<uint64_t> seq{0};
  std::atomic<uint64_t> kind{0};  // packKind(): collective, type, op, algorithm, state
  std::atomic<uint64_t> count{0};
  std::atomic<int64_t> root{0}, tag{0};
  std::atomic<int64_t> issuedTick{0}, endedTick{0};
};

namespace {

uint64_t packKind(const OpDesc& d, Algorithm algorithm, FlightRecorder::State state) {
  return uint64_t(uint8_t(d.coll)) | uint64_t(uint8_t(d.dtype)) << 8 |
         uint64_t(uint8_t(d.op)) << 16 | uint64_t(uint8_t(algorithm)) << 24 |
         uint64_t(uint8_t(state)) << 32;
}

FlightRecorder::State stateOf(uint64_t kind) {
  return static_cast<FlightRecorder::State>(uint8_t(kind >> 32));
}

// The slots: a power of two at least `capacity`, so a place finds its slot with a mask.
size_t slotCount(size_t capacity) {
  size_t n = 1;
  while (n < capacity) n <<= 1;
  return n;
}

}  // namespace

FlightRecorder::FlightRecorder(size_t capacity)
    : capacity_(capacity),
      mask_(slotCount(capacity) - 1),
      slots_(capacity > 0 ? new Slot[slotCount(capacity)] : nullptr),
      tick0_(tick()),
      wall0_(wallNs()) {}

FlightRecorder::~FlightRecorder() = default;

int64_t FlightRecorder::toWallNs(int64_t t, int64_t tickNow, int64_t wallNow) const {
  if (t == 0) return 0;
  // Ticks per ns over this recorder's life so far (1 without a time-stamp counter).
  const double span = static_cast<double>(tickNow - tick0_);
  const double rate = span > 0 && wallNow > wall0_ ? span / static_cast<double>(wallNow - wall0_)
                                                   : 1.0;
  return wall0_ + static_cast<int64_t>(static_cast<double>(t - tick0_) / rate);
}

const char* FlightRecorder::stateName(State state) {
  switch (state) {
    case State::kIssued: return "issued";
    case State::kStarted: return "started";
    case State::kCompleted: return "completed";
    case State::kFailed: return "failed";
  }
  return "?";
}

FlightRecorder::Slot* FlightRecorder::slotOf(uint64_t place) const {
  if (capacity_ == 0 || place == 0) return nullptr;
  Slot* s = &slots_[(place - 1) & mask_];
  return s->place.load(std::memory_order_relaxed) == place ? s : nullptr;
}

uint64_t FlightRecorder::issued(const OpDesc& d) {
  if (capacity_ == 0) return 0;
  // One issuer at a time (see the top), so this read-then-store numbering is exact.
  const uint64_t place = issuedCount_.load(std::memory_order_relaxed) + 1;
  Slot& s = slots_[(place - 1) & mask_];
  s.place.store(0, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);  // readers see 0 before the new fields
  s.seq.store(d.seq, std::memory_order_relaxed);
  s.kind.store(packKind(d, Algorithm::kAuto, State::kIssued), std::memory_order_relaxed);
  s.count.store(d.count, std::memory_order_relaxed);
  s.root.store(d.root, std::memory_order_relaxed);
  s.tag.store(d.tag, std::memory_order_relaxed);
  s.issuedTick.store(d.issuedTick, std::memory_order_relaxed);
  s.endedTick.store(0, std::memory_order_relaxed);
  s.place.store(place, std::memory_order_release);
  issuedCount_.store(place, std::memory_order_release);
  return place;
}

void FlightRecorder::started(const OpDesc& d, Algorithm algorithm) {
  Slot* s = slotOf(d.recorded);
  if (s == nullptr || stateOf(s->kind.load(std::memory_order_relaxed)) != State::kIssued) return;
  s->kind.store(packKind(d, algorithm, State::kStarted), std::memory_order_relaxed);
}

void FlightRecorder::ranAs(const OpDesc& d, Algorithm algorithm) {
  Slot* s = slotOf(d.recorded);
  if (s == nullptr || stateOf(s->kind.load(std::memory_order_relaxed)) != State::kStarted) return;
  s->kind.store(packKind(d, algorithm, State::kStarted), std::memory_order_relaxed);
}

int64_t FlightRecorder::ended(const OpDesc& d, std::string_view error) {
  if (capacity_ == 0) return 0;
  const int64_t now = tick();
  Slot* s = slotOf(d.recorded);
  if (s == nullptr) return now;
  const uint64_t kind = s->kind.load(std::memory_order_relaxed);
  const State state = stateOf(kind);
  if (state == State::kCompleted || state == State::kFailed) return now;
  if (!error.empty()) {
    std::lock_guard<std::mutex> lock(errorMutex_);
    errors_[d.recorded] = std::string(error);
    while (errors_.size() > capacity_) errors_.erase(errors_.begin());
  }
  s->endedTick.store(now, std::memory_order_relaxed);
  // The algorithm chosen at the start stays; only the state changes.
  s->kind.store((kind & ~(uint64_t(0xff) << 32)) |
                    uint64_t(uint8_t(error.empty() ? State::kCompleted : State::kFailed)) << 32,
                std::memory_order_relaxed);
  return now;
}

size_t FlightRecorder::size() const {
  return std::min<uint64_t>(issuedCount_.load(std::memory_order_acquire), capacity_);
}

std::vector<FlightRecorder::Entry> FlightRecorder::entries() const {
  std::vector<Entry> out;
  const uint64_t newest = issuedCount_.load(std::memory_order_acquire);
  const uint64_t first = newest > capacity_ ? newest - capacity_ + 1 : 1;
  std::map<uint64_t, std::string> errors;
  {
    std::lock_guard<std::mutex> lock(errorMutex_);
    errors = errors_;
  }
  for (uint64_t place = first; place <= newest && capacity_ > 0; ++place) {
    const Slot& s = slots_[(place - 1) & mask_];
    Entry e;
    bool whole = false;
    for (int attempt = 0; attempt < 100 && !whole; ++attempt) {
      if (s.place.load(std::memory_order_acquire) != place) break;  // a newer op took it
      const uint64_t kind = s.kind.load(std::memory_order_relaxed);
      e.desc.coll = static_cast<Collective>(uint8_t(kind));
      e.desc.dtype = static_cast<DataType>(uint8_t(kind >> 8));
      e.desc.op = static_cast<RedOp>(uint8_t(kind >> 16));
      e.algorithm = static_cast<Algorithm>(uint8_t(kind >> 24));
      e.state = stateOf(kind);
      e.desc.seq = s.seq.load(std::memory_order_relaxed);
      e.desc.count = s.count.load(std::memory_order_relaxed);
      e.desc.root = static_cast<int>(s.root.load(std::memory_order_relaxed));
      e.desc.tag = static_cast<int>(s.tag.load(std::memory_order_relaxed));
      e.desc.recorded = place;
      e.issuedNs = s.issuedTick.load(std::memory_order_relaxed);
      e.endedNs = s.endedTick.load(std::memory_order_relaxed);
      std::atomic_thread_fence(std::memory_order_acquire);
      whole = s.place.load(std::memory_order_relaxed) == place;
    }
    if (!whole) continue;
    if (auto it = errors.find(place); it != errors.end()) e.error = it->second;
    out.push_back(std::move(e));
  }
  return out;
}

std::string FlightRecorder::json(int rank, int size, const std::string& reason) const {
  const std::vector<Entry> list = entries();
  const int64_t tickNow = tick(), wallNow = wallNs();
  std::string out = fmt::format(
      "{{\"rank\": {}, \"size\": {}, \"host\": {}, \"pid\": {}, \"reason\": {}, "
      "\"capacity\": {}, \"entries\": [",
      rank, size, jsonString(hostName()), static_cast<long>(getpid()), jsonString(reason),
      capacity_);
  bool first = true;
  for (const Entry& e : list) {
    const OpDesc& d = e.desc;
    const bool p2p = isP2p(d.coll);
    out += fmt::format(
        "{}\n  {{\"seq\": {}, \"kind\": \"{}\", \"coll\": \"{}\", \"count\": {}, \"dtype\": \"{}\", "
        "\"op\": \"{}\", \"root\": {}, \"peer\": {}, \"tag\": {}, \"algorithm\": \"{}\", "
        "\"state\": \"{}\", \"issued_ns\": {}, \"ended_ns\": {}, "
        "\"error\": {}}}",
        first ? "" : ",", d.seq, p2p ? "p2p" : "collective", collectiveName(d.coll), d.count,
        dataTypeName(d.dtype), redOpName(d.op), p2p ? -1 : d.root, p2p ? d.root : -1, d.tag,
        algorithmName(e.algorithm), stateName(e.state), toWallNs(e.issuedNs, tickNow, wallNow),
        toWallNs(e.endedNs, tickNow, wallNow),
        jsonString(e.error));
    first = false;
  }
  return out + "\n]}\n";
}

std::string FlightRecorder::dump(const std::string& dir, int rank, int size,
                                 const std::string& reason, std::string* why) const {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  const std::string path = fmt::format("{}/rank-{}.json", dir, rank);
  const std::string tmp = fmt::format("{}.tmp.{}", path, static_cast<long>(getpid()));
  const std::string text = json(rank, size, reason);
  FILE* f = std::fopen(tmp.c_str(), "w");
  if (f == nullptr) {
    *why = fmt::format("cannot write {}: {}", tmp, std::strerror(errno));
    return "";
  }
  const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  if (std::fclose(f) != 0 || !ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    *why = fmt::format("writing {} failed: {}", path, std::strerror(errno));
    std::remove(tmp.c_str());
    return "";
  }
  return path;
}

}  // namespace braid::comm
