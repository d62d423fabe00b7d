#include "comm/detail/flight_recorder.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "common/ticks.h"
#include <filesystem>

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

FlightRecorder::FlightRecorder(size_t capacity)
    : capacity_(capacity), tick0_(tick()), wall0_(wallNs()) {}

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

uint64_t FlightRecorder::issued(const OpDesc& d) {
  if (capacity_ == 0) return 0;
  Entry e;
  e.desc = d;
  e.desc.input = nullptr;
  e.desc.output = nullptr;
  e.issuedNs = tick();
  std::lock_guard<std::mutex> lock(mutex_);
  if (entries_.size() == capacity_) {
    entries_.pop_front();
    ++firstPlace_;
  }
  entries_.push_back(std::move(e));
  return firstPlace_ + entries_.size() - 1;
}

FlightRecorder::Entry* FlightRecorder::find(const OpDesc& d) {
  if (d.recorded < firstPlace_ || d.recorded - firstPlace_ >= entries_.size()) return nullptr;
  return &entries_[d.recorded - firstPlace_];
}

void FlightRecorder::started(const OpDesc& d, Algorithm algorithm) {
  if (capacity_ == 0 || d.recorded == 0) return;
  const int64_t now = tick();  // outside the lock: the caller's thread may be issuing
  std::lock_guard<std::mutex> lock(mutex_);
  if (Entry* e = find(d); e != nullptr && e->state == State::kIssued) {
    e->state = State::kStarted;
    e->algorithm = algorithm;
    e->startedNs = now;
  }
}

void FlightRecorder::ended(const OpDesc& d, const std::string& error) {
  if (capacity_ == 0 || d.recorded == 0) return;
  const int64_t now = tick();
  std::lock_guard<std::mutex> lock(mutex_);
  Entry* e = find(d);
  if (e == nullptr || e->state == State::kCompleted || e->state == State::kFailed) return;
  e->state = error.empty() ? State::kCompleted : State::kFailed;
  if (!error.empty()) e->error = error;
  e->endedNs = now;
}

size_t FlightRecorder::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return entries_.size();
}

std::deque<FlightRecorder::Entry> FlightRecorder::entries() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return entries_;
}

std::string FlightRecorder::json(int rank, int size, const std::string& reason) const {
  const std::deque<Entry> list = entries();
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
        "\"state\": \"{}\", \"issued_ns\": {}, \"started_ns\": {}, \"ended_ns\": {}, "
        "\"error\": {}}}",
        first ? "" : ",", d.seq, p2p ? "p2p" : "collective", collectiveName(d.coll), d.count,
        dataTypeName(d.dtype), redOpName(d.op), p2p ? -1 : d.root, p2p ? d.root : -1, d.tag,
        algorithmName(e.algorithm), stateName(e.state), toWallNs(e.issuedNs, tickNow, wallNow),
        toWallNs(e.startedNs, tickNow, wallNow), toWallNs(e.endedNs, tickNow, wallNow),
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
