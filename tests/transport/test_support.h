// Helpers for the transport tests: key-value stores, rank runners, payload generators, waits.
#pragma once

#include <dirent.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "braid/deadline.hpp"
#include "common/config.h"
#include "tests/kit/processes.h"
#include "tests/kit/threads.h"
#include "tests/support/skip.h"
#include "tests/transport/slot_memory.h"
#include "transport/transport.h"
#if BRAID_HAVE_VERBS
#include "transport/verbs/calls.h"
#endif

namespace braid::transport::testing {

using braid::testing::forkChild;
using braid::testing::waitChild;

/// In-memory store for ranks that are threads of one process.
class MemoryKeyValue : public KeyValue {
 public:
  void set(const std::string& key, const std::string& value) override {
    std::lock_guard<std::mutex> lock(mutex_);
    values_[key] = value;
    changed_.notify_all();
  }
  std::string get(const std::string& key, Deadline deadline) override {
    std::unique_lock<std::mutex> lock(mutex_);
    while (true) {
      auto it = values_.find(key);
      if (it != values_.end()) return it->second;
      if (deadline.expired()) fail(ErrorCode::kTimeout, "kv get('{}') timed out", key);
      // Bounded steps keep us clear of time_point::max() overflow in wait_until.
      changed_.wait_for(lock, std::chrono::milliseconds(std::min(deadline.millisLeft(), 100)));
    }
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, std::string> values_;
};

/// A store in a directory (one file per key, written by rename) for forked ranks.
class FileKeyValue : public KeyValue {
 public:
  explicit FileKeyValue(std::string dir) : dir_(std::move(dir)) {}
  void set(const std::string& key, const std::string& value) override {
    std::string tmp = fmt::format("{}/.tmp-{}-{}", dir_, getpid(), counter_++);
    {
      std::ofstream out(tmp, std::ios::binary);
      out << value;
    }
    std::rename(tmp.c_str(), path(key).c_str());
  }
  std::string get(const std::string& key, Deadline deadline) override {
    while (true) {
      std::ifstream in(path(key), std::ios::binary);
      if (in) {
        std::stringstream text;
        text << in.rdbuf();
        return text.str();
      }
      if (deadline.expired()) fail(ErrorCode::kTimeout, "kv get('{}') timed out", key);
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }

 private:
  std::string path(const std::string& key) const {
    std::string name = key;
    for (char& c : name) c = c == '/' ? '_' : c;
    return dir_ + "/" + name;
  }
  std::string dir_;
  int counter_ = 0;
};

/// A fresh job id per call (segment names must not collide between tests or runs).
inline std::string uniqueJobId(const std::string& what) {
  static int counter = 0;
  return fmt::format("t{}-{}-{}", getpid(), what, counter++);
}

inline EndpointConfig makeConfig(int rank, int size, const std::vector<Kind>& kinds,
                                 const std::string& jobId) {
  EndpointConfig c;
  c.rank = rank;
  c.size = size;
  c.peerKinds = kinds;
  c.peerKinds[rank] = Kind::kSelf;
  c.jobId = jobId;
  c.secret = "s3cret";
  c.timeoutSeconds = 20;
  for (Kind k : kinds) {
    if (deviceSlots(k)) c.device = 0;  // device slots on the first GPU (ranks may share it)
  }
  return c;
}

/// Runs fn(rank) on `size` threads; returns the exception text per rank ("" = ok).
inline std::vector<std::string> runRanks(int size, const std::function<void(int)>& fn) {
  return braid::testing::errorTexts(braid::testing::runThreads(size, fn));
}

inline uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

inline void fillPayload(void* dst, size_t bytes, uint64_t seed) {
  auto* out = static_cast<unsigned char*>(dst);
  for (size_t i = 0; i < bytes; i += 8) {
    uint64_t word = mix(seed ^ (i * 0x100000001b3ull));
    std::memcpy(out + i, &word, std::min<size_t>(8, bytes - i));
  }
}

/// fillPayload into a slot of `kind` (through a host buffer for device slots).
inline void fillSlotPayload(Kind kind, void* slot, size_t bytes, uint64_t seed);
/// checkPayload of a slot of `kind`.
inline long checkSlotPayload(Kind kind, const void* data, size_t bytes, uint64_t seed);

/// Index of the first wrong byte, or -1.
inline long checkPayload(const void* src, size_t bytes, uint64_t seed) {
  auto* in = static_cast<const unsigned char*>(src);
  for (size_t i = 0; i < bytes; i += 8) {
    uint64_t word = mix(seed ^ (i * 0x100000001b3ull));
    size_t n = std::min<size_t>(8, bytes - i);
    if (std::memcmp(in + i, &word, n) != 0) return static_cast<long>(i);
  }
  return -1;
}

inline void fillSlotPayload(Kind kind, void* slot, size_t bytes, uint64_t seed) {
  if (!deviceSlots(kind)) return fillPayload(slot, bytes, seed);
  std::vector<unsigned char> host(bytes);
  fillPayload(host.data(), bytes, seed);
  toSlot(kind, slot, host.data(), bytes);
}

inline long checkSlotPayload(Kind kind, const void* data, size_t bytes, uint64_t seed) {
  if (!deviceSlots(kind)) return checkPayload(data, bytes, seed);
  std::vector<unsigned char> host(bytes);
  fromSlot(kind, data, host.data(), bytes);
  return checkPayload(host.data(), bytes, seed);
}

/// Polls `ready` until true or `seconds` pass, sleeping on the endpoint's doorbell in between.
inline bool waitFor(Endpoint& ep, const std::function<bool()>& ready, double seconds) {
  Deadline deadline = Deadline::after(seconds);
  while (true) {
    for (int spin = 0; spin < 64; ++spin) {
      if (ready()) return true;
    }
    uint32_t ticket = ep.prepareSleep();
    if (ready()) {
      ep.sleep(ticket, Clock::now());
      return true;
    }
    if (deadline.expired()) {
      ep.sleep(ticket, Clock::now());
      return false;
    }
    ep.sleep(ticket, std::min(deadline.when(), Clock::now() + std::chrono::milliseconds(20)));
  }
}

/// Names in /dev/shm that start with `prefix`.
inline std::vector<std::string> shmEntries(const std::string& prefix) {
  std::vector<std::string> out;
  DIR* dir = opendir("/dev/shm");
  if (dir == nullptr) return out;
  while (dirent* entry = readdir(dir)) {
    std::string name = entry->d_name;
    if (name.rfind(prefix, 0) == 0) out.push_back(name);
  }
  closedir(dir);
  return out;
}

/// Unlinks what a child killed with SIGKILL left in /dev/shm under its pid: libfabric's shm
/// provider names its region after the endpoint's source address, which braid makes
/// "braid-<pid>-<random>" (transport/ofi/provider.h), and only a clean exit removes it.
inline void removeShmLeftOf(pid_t child) {
  for (const std::string& name : shmEntries(fmt::format("braid-{}-", child))) {
    shm_unlink(("/" + name).c_str());
  }
}

// --- Traffic over every pair and channel, checked end to end -------------------------------

inline uint64_t laneSeed(int src, int dst, int channel, int index) {
  return mix((static_cast<uint64_t>(src) << 48) ^ (static_cast<uint64_t>(dst) << 32) ^
             (static_cast<uint64_t>(channel) << 24) ^ static_cast<uint64_t>(index));
}

// Sizes cycle through empty, tiny, odd, slot-sized and random.
inline size_t messageSize(uint64_t seed, int index, size_t slotBytes) {
  switch (index % 5) {
    case 0:
      return 0;
    case 1:
      return std::min<size_t>(1, slotBytes);
    case 2:
      return std::min<size_t>(13, slotBytes);
    case 3:
      return slotBytes;
    default:
      return seed % (slotBytes + 1);
  }
}

/// Every rank sends `messages` messages to every peer on every channel, as many in flight as the
/// slots allow, and checks everything it gets: size, meta, every payload byte, order. Throws on the
/// first mismatch or after `seconds`.
inline void exchangeAll(Endpoint& ep, int messages, size_t slotBytes, double seconds) {
  const int size = ep.size(), me = ep.rank(), channels = ep.channels();
  struct Lane {
    int peer, channel, sent = 0, received = 0;
  };
  std::vector<Lane> lanes;
  for (int p = 0; p < size; ++p) {
    for (int c = 0; c < channels && p != me; ++c) lanes.push_back({p, c});
  }
  auto pass = [&]() {
    bool progress = false;
    for (Lane& lane : lanes) {
      SendChannel& out = ep.send(lane.peer, lane.channel);
      if (out.slotBytes() != slotBytes) throw std::runtime_error("wrong slotBytes()");
      if (out.peer() != lane.peer) throw std::runtime_error("wrong peer()");
      while (lane.sent < messages) {
        void* slot = out.tryAcquire();
        if (slot == nullptr) break;
        if (out.tryAcquire() != slot) throw std::runtime_error("tryAcquire() moved");
        uint64_t seed = laneSeed(me, lane.peer, lane.channel, lane.sent);
        size_t bytes = messageSize(seed, lane.sent, slotBytes);
        fillSlotPayload(ep.peerKind(lane.peer), slot, bytes, seed);
        MessageMeta meta;
        meta.words[0] = seed;
        meta.words[1] = bytes;
        meta.words[2] = static_cast<uint64_t>(lane.sent);
        meta.words[3] = ~seed;
        out.post(bytes, meta);
        ++lane.sent;
        progress = true;
      }
      RecvChannel& in = ep.recv(lane.peer, lane.channel);
      while (lane.received < messages) {
        size_t bytes = 0;
        MessageMeta meta;
        const void* data = in.tryPeek(&bytes, &meta);
        if (data == nullptr) break;
        if (in.tryPeek(nullptr, nullptr) != data) throw std::runtime_error("tryPeek() moved");
        uint64_t seed = laneSeed(lane.peer, me, lane.channel, lane.received);
        size_t expected = messageSize(seed, lane.received, slotBytes);
        std::string where = fmt::format("rank {} from peer {} channel {} message {}", me, lane.peer,
                                        lane.channel, lane.received);
        if (bytes != expected || meta.words[0] != seed || meta.words[1] != expected ||
            meta.words[2] != static_cast<uint64_t>(lane.received) || meta.words[3] != ~seed) {
          throw std::runtime_error(fmt::format("{}: got {} bytes, meta {:x} {} {} (want {})", where,
                                               bytes, meta.words[0], meta.words[1], meta.words[2],
                                               expected));
        }
        long bad = checkSlotPayload(ep.peerKind(lane.peer), data, bytes, seed);
        if (bad >= 0) throw std::runtime_error(fmt::format("{}: wrong byte {}", where, bad));
        in.release();
        ++lane.received;
        progress = true;
      }
    }
    return progress;
  };
  auto done = [&]() {
    for (const Lane& lane : lanes) {
      if (lane.sent < messages || lane.received < messages) return false;
    }
    return true;
  };
  Deadline deadline = Deadline::after(seconds);
  while (!done()) {
    if (pass()) continue;
    uint32_t ticket = ep.prepareSleep();
    if (pass()) {
      ep.sleep(ticket, Clock::now());
      continue;
    }
    if (deadline.expired()) throw std::runtime_error(fmt::format("rank {}: timed out", me));
    ep.sleep(ticket, Clock::now() + std::chrono::milliseconds(50));
  }
  for (int p = 0; p < size; ++p) {
    if (p != me && !ep.peerAlive(p)) throw std::runtime_error("peer reported dead");
  }
}

inline void expectOk(const std::vector<std::string>& errors) {
  for (size_t r = 0; r < errors.size(); ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
}

/// A fresh directory under /tmp (for FileKeyValue between forked ranks), removed at the end.
struct TempDir {
  explicit TempDir(const std::string& prefix = "braid-transport-kv") {
    std::string pattern = "/tmp/" + prefix + "-XXXXXX";
    if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path = pattern;
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string path;
};

/// A backend under test: its kind, and for ucx the UCX_TLS its contexts use, for ofi the
/// libfabric provider (BRAID_OFI_PROVIDER); `env`, "VAR=value ..." or "", more settings (ofi:
/// BRAID_OFI_RMA=off for the tagged data path; verbs: queue pairs and chunk size).
struct Backend {
  Kind kind;
  const char* tls = "";
  const char* env = "";
};
inline constexpr Backend kShmBackend{Kind::kShm};
inline constexpr Backend kTcpBackend{Kind::kTcp};
inline constexpr Backend kUcxTcpBackend{Kind::kUcx, "tcp"};
inline constexpr Backend kUcxSmBackend{Kind::kUcx, "sm,self"};
inline constexpr Backend kCudaIpcBackend{Kind::kCudaIpc};
inline constexpr Backend kOfiTcpBackend{Kind::kOfi, "tcp;ofi_rxm"};  // RMA where offered
inline constexpr Backend kOfiTcpTaggedBackend{Kind::kOfi, "tcp;ofi_rxm", "BRAID_OFI_RMA=off"};
inline constexpr Backend kOfiShmBackend{Kind::kOfi, "shm"};
inline constexpr Backend kOfiShmTaggedBackend{Kind::kOfi, "shm", "BRAID_OFI_RMA=off"};
inline constexpr Backend kOfiUdpBackend{Kind::kOfi, "udp;ofi_rxd"};
inline constexpr Backend kOfiUdpTaggedBackend{Kind::kOfi, "udp;ofi_rxd", "BRAID_OFI_RMA=off"};
inline constexpr Backend kVerbsBackend{Kind::kVerbs};  // needs an RDMA device: tools/rxe-vm
/// The verbs transport over the software model of libibverbs (transport/verbs/model.cc): runs
/// everywhere, ranks as threads of one process only.
inline constexpr Backend kVerbsModelBackend{Kind::kVerbs, "model"};
inline constexpr Backend kVerbsModelTunedBackend{Kind::kVerbs, "model",
                                                 "BRAID_VERBS_QPS=3 BRAID_VERBS_CHUNK_BYTES=256"};
/// Two queue pairs per peer and 4 KiB writes: slots of more than 4 KiB go as several chunks.
inline constexpr Backend kVerbsTunedBackend{Kind::kVerbs, "",
                                            "BRAID_VERBS_QPS=2 BRAID_VERBS_CHUNK_BYTES=4096"};

/// "shm", "tcp", "ucx_tcp", "ucx_sm_self", "ofi_tcp_ofi_rxm", "ofi_tcp_ofi_rxm_tagged": a
/// test-name part.
inline std::string backendName(const Backend& backend) {
  std::string name = kindName(backend.kind);
  if (*backend.tls != '\0') name += std::string("_") + backend.tls;
  if (std::string(backend.env) == "BRAID_OFI_RMA=off") name += "_tagged";
  if (backend.kind == Kind::kVerbs && *backend.env != '\0') {
    name += *backend.tls != '\0' ? "_qps3_chunk256" : "_qps2_chunk4k";
  }
  for (char& c : name) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return name;
}

/// Sets UCX_TLS for the UCX contexts this test creates (threads) or forks (children inherit it).
inline void useTls(const std::string& tls) { setenv("UCX_TLS", tls.c_str(), 1); }
/// Sets the backend's sub-transport: UCX_TLS (ucx) or BRAID_OFI_PROVIDER (ofi), when it has one.
inline void useSubTransport(const Backend& backend) {
  if (backend.kind == Kind::kVerbs) {
#if BRAID_HAVE_VERBS
    verbs::useVerbsModel(std::string(backend.tls) == "model");
#endif
    unsetenv("BRAID_VERBS_QPS");
    unsetenv("BRAID_VERBS_CHUNK_BYTES");
    std::istringstream settings(backend.env);
    for (std::string setting; settings >> setting;) {
      const size_t eq = setting.find('=');
      setenv(setting.substr(0, eq).c_str(), setting.substr(eq + 1).c_str(), 1);
    }
    return;
  }
  if (backend.kind == Kind::kOfi) {
    std::string env = backend.env;
    const size_t eq = env.find('=');
    if (eq == std::string::npos) {
      unsetenv("BRAID_OFI_RMA");  // the default: RMA where the provider offers it
    } else {
      setenv(env.substr(0, eq).c_str(), env.substr(eq + 1).c_str(), 1);
    }
  }
  if (*backend.tls == '\0') return;
  if (backend.kind == Kind::kOfi) {
    setenv("BRAID_OFI_PROVIDER", backend.tls, 1);
  } else {
    useTls(backend.tls);
  }
}

/// Why a backend cannot run a test whose ranks are forked processes, or "": the verbs model joins
/// the queue pairs of one process only.
inline std::string threadsOnly(const Backend& backend) {
  return std::string(backend.tls) == "model"
             ? "the verbs model (libibverbs in software) joins ranks of one process only; forked "
               "ranks over verbs run in the rxe guest (rxe.verbs)"
             : "";
}

/// For a test's SetUp: sets UCX_TLS for ucx and BRAID_OFI_PROVIDER for ofi, then skips (with the
/// reason) where the build lacks the backend, where an ofi provider is not usable on this
/// machine, or, for device slots, where there is no GPU.
#define USE_BACKEND(backend)                                                        \
  do {                                                                              \
    std::string why_;                                                               \
    ::braid::transport::testing::useSubTransport(backend);                          \
    if (!kindAvailable((backend).kind, &why_)) {                                    \
      if ((backend).kind == Kind::kOfi && BRAID_HAVE_OFI) BRAID_SKIP_NO_DEVICE(why_); \
      if ((backend).kind == Kind::kVerbs && BRAID_HAVE_VERBS) BRAID_SKIP_NO_DEVICE(why_); \
      BRAID_SKIP_MISSING(why_);                                                     \
    }                                                                               \
    if (::braid::transport::testing::deviceSlots((backend).kind)) {                 \
      why_ = ::braid::transport::testing::deviceSlotsUnavailable();                 \
      if (!why_.empty()) BRAID_SKIP_NO_DEVICE(why_);                                \
    }                                                                               \
  } while (0)

/// Rank 1 in a forked child, killed with SIGKILL once connected: rank 0 must see it dead within
/// `seconds` (`abortCounts`: a peer abort counts as seeing it), stay so after the reap, post to
/// it without an error or a hang, and destroy its endpoint in bounded time.
inline void killedPeerIsSeenDead(const std::string& dir, Kind kind, double seconds,
                                 bool abortCounts) {
  const std::string jobId = uniqueJobId("death");
  pid_t child = forkChild([&] {
    FileKeyValue kv(dir);
    auto ep = connect(makeConfig(1, 2, {kind, kind}, jobId), kv);
    std::this_thread::sleep_for(std::chrono::seconds(20));  // bounded: the test kills it first
    return 0;
  });
  ASSERT_GT(child, 0);
  FileKeyValue kv(dir);
  std::unique_ptr<Endpoint> ep;
  try {
    ep = connect(makeConfig(0, 2, {kind, kind}, jobId), kv);
  } catch (const std::exception& e) {
    kill(child, SIGKILL);
    waitChild(child, Deadline::after(5));
    FAIL() << e.what();
  }
  EXPECT_TRUE(ep->peerAlive(1));
  // connect() returned here, so no inbox name is left, whatever the child does next.
  EXPECT_TRUE(shmEntries("braid-" + jobId + "-").empty());
  kill(child, SIGKILL);
  auto start = Clock::now();
  bool dead = false;
  Deadline deadline = Deadline::after(seconds);
  while (!deadline.expired() &&
         !(dead = !ep->peerAlive(1) || (abortCounts && ep->peerAbort().has_value()))) {
    uint32_t ticket = ep->prepareSleep();
    ep->sleep(ticket, Clock::now() + std::chrono::milliseconds(20));
  }
  double millis = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  EXPECT_TRUE(dead) << "peer still alive after " << millis << " ms";
  EXPECT_EQ(waitChild(child, Deadline::after(5)), -SIGKILL);
  removeShmLeftOf(child);
  EXPECT_FALSE(ep->peerAlive(1)) << "stays dead after the reap";
  // Sending to it is no error and no hang; destroying is bounded.
  if (void* slot = ep->send(1, 0).tryAcquire()) {
    setSlot(kind, slot, 1, 64);
    ep->send(1, 0).post(64, MessageMeta{});
  }
  auto before = Clock::now();
  ep.reset();
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - before).count(), 3.0);
  ::testing::Test::RecordProperty("death_ms", fmt::format("{:.1f}", millis));
}

}  // namespace braid::transport::testing
