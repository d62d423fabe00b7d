// Tests that the store admits the job's ranks whatever strangers do to its port (a flood of idle
// connections, resets before the handshake), that warnings about strangers stay few, that
// configuration errors fail at once, and that the store listens only where ranks are told to look.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <optional>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "comm/bootstrap/store.h"
#include "tests/comm/bootstrap/store_options.h"
#include "tests/support/skip.h"

namespace braid::bootstrap {
namespace {

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

bool waitUntil(const std::function<bool()>& done, double seconds) {
  Deadline deadline = Deadline::after(seconds);
  while (!done()) {
    if (deadline.expired()) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

// Resident memory of this process (the server runs in it), in KiB.
long rssKiB() {
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  long pages = 0, resident = 0;
  int got = std::fscanf(f, "%ld %ld", &pages, &resident);
  std::fclose(f);
  return got == 2 ? resident * (::sysconf(_SC_PAGESIZE) / 1024) : 0;
}

// Raises the soft descriptor limit to `need`; false when the hard limit is lower.
bool raiseFdLimit(rlim_t need) {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return false;
  if (limit.rlim_cur >= need) return true;
  if (limit.rlim_max != RLIM_INFINITY && limit.rlim_max < need) return false;
  limit.rlim_cur = need;
  return ::setrlimit(RLIMIT_NOFILE, &limit) == 0;
}

// Opens a connection to 127.0.0.1:port that sends `bytes` and then idles, as an attacker's
// would. -1 when connect() fails (the server may reset it at once). Closing it sends a reset,
// so the test leaves no TIME_WAIT behind.
int strangerConnect(int port, const std::string& bytes) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  linger hard{1, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &hard, sizeof hard);
  timeval tv{2, 0};  // bounds connect() too
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  if (!bytes.empty()) {
    ssize_t n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    (void)n;  // a reset connection is still a connection the server had to handle
  }
  return fd;
}

// True when a plain TCP connect to ip:port succeeds within 2 s.
bool reachable(const std::string& ip, int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  timeval tv{2, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  ::inet_pton(AF_INET, ip.c_str(), &addr.sin_addr);
  bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  return ok;
}

// An IPv4 address of an up, non-loopback interface of this machine; "" when there is none.
std::string nonLoopbackAddress() {
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return "";
  std::string found;
  for (ifaddrs* it = list; it != nullptr && found.empty(); it = it->ifa_next) {
    if (it->ifa_addr == nullptr || it->ifa_addr->sa_family != AF_INET) continue;
    if ((it->ifa_flags & IFF_UP) == 0 || (it->ifa_flags & IFF_LOOPBACK) != 0) continue;
    char text[INET_ADDRSTRLEN];
    ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(it->ifa_addr)->sin_addr, text,
                sizeof text);
    found = text;
  }
  ::freeifaddrs(list);
  return found;
}

// Sets an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) {
      ::setenv(name, value, 1);
    } else {
      ::unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_) {
      ::setenv(name_, old_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

// A listener on 127.0.0.1 that resets every connection it accepts until destroyed.
class ResettingListener {
 public:
  ResettingListener() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    EXPECT_EQ(::listen(fd_, 16), 0);
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] {
      while (!stop_.load()) {
        pollfd p{fd_, POLLIN, 0};
        if (::poll(&p, 1, 20) != 1) continue;
        int fd = ::accept(fd_, nullptr, nullptr);
        if (fd < 0) continue;
        linger hard{1, 0};
        ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &hard, sizeof hard);
        ::close(fd);
        accepted_.fetch_add(1);
      }
    });
  }
  ~ResettingListener() {
    stop_.store(true);
    thread_.join();
    ::close(fd_);
  }
  int port() const { return port_; }
  int accepted() const { return accepted_.load(); }

 private:
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> accepted_{0};
  std::thread thread_;
};

void closeAll(std::vector<int>& fds) {
  for (int fd : fds) ::close(fd);
  fds.clear();
}

int countLines(const std::string& text, const std::string& needle) {
  int count = 0;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    if (text.substr(start, end - start).find(needle) != std::string::npos) ++count;
    start = end + 1;
  }
  return count;
}

// Four rank threads, each with its own client: join, publish, count in, read everyone's value.
// Returns each rank's error ("" when fine) and the slowest rank's time to be admitted.
std::vector<std::string> rendezvous(int port, double seconds, double* slowestAdmission) {
  constexpr int kRanks = 4;
  std::vector<std::string> errors(kRanks);
  std::vector<double> admitted(kRanks, 0);
  std::vector<std::thread> threads;
  auto start = Clock::now();
  for (int rank = 0; rank < kRanks; ++rank) {
    threads.emplace_back([&, rank] {
      try {
        Deadline deadline = Deadline::after(seconds);
        TcpStore store(StoreAddress{"127.0.0.1", port}, clientOptions(kRanks, kSecret, rank),
                       deadline);
        admitted[rank] = secondsSince(start);
        store.set("rank/" + std::to_string(rank), std::to_string(rank * 7));
        store.add("joined", 1, deadline);
        std::vector<std::string> keys;
        for (int r = 0; r < kRanks; ++r) keys.push_back("rank/" + std::to_string(r));
        store.wait(keys, deadline);
        for (int r = 0; r < kRanks; ++r) {
          if (store.get(keys[r], deadline) != std::to_string(r * 7)) errors[rank] = "bad value";
        }
      } catch (const std::exception& e) {
        errors[rank] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  *slowestAdmission = *std::max_element(admitted.begin(), admitted.end());
  return errors;
}

// --- A flood of idle connections -------------------------------------------------------------

// 5,000 strangers each send one byte and idle, more than the old table of 4,096 connections, and
// more keep coming while the ranks join. Every rank must still get in within seconds, and the
// strangers must cost the server little memory.
TEST(StoreFloodTest, RanksGetInPastAFloodOfIdleConnections) {
  constexpr int kFlood = 5000;
  constexpr int kSpare = 1000;  // the ranks, the server and the flood that goes on
  if (!raiseFdLimit(kFlood + kSpare + 256)) {
    BRAID_SKIP_NO_DEVICE("RLIMIT_NOFILE cannot be raised to " +
                         std::to_string(kFlood + kSpare + 256) + " descriptors for the flood");
  }
  StoreServer server(serverOptions());
  const long rssBefore = rssKiB();
  std::vector<int> flood;
  flood.reserve(kFlood + kSpare);
  auto floodStart = Clock::now();
  int refused = 0;
  for (int i = 0; i < kFlood; ++i) {
    int fd = strangerConnect(server.port(), "B");
    if (fd < 0) {
      ++refused;
      continue;
    }
    flood.push_back(fd);
  }
  const double floodSeconds = secondsSince(floodStart);
  const long rssFlooded = rssKiB();
  // The flood goes on while the ranks join: new strangers keep replacing old ones.
  std::atomic<bool> stopFlood{false};
  std::atomic<int> more{0};
  std::thread flooder([&] {
    std::vector<int> mine;
    while (!stopFlood.load()) {
      int fd = strangerConnect(server.port(), "B");
      if (fd >= 0) mine.push_back(fd);
      if (mine.size() >= kSpare / 2) closeAll(mine);
      more.fetch_add(1);
    }
    closeAll(mine);
  });
  waitUntil([&] { return more.load() >= 200; }, 5);  // the ranks join into a running flood
  double slowest = 0;
  auto joinStart = Clock::now();
  std::vector<std::string> errors = rendezvous(server.port(), 8, &slowest);
  const double joinSeconds = secondsSince(joinStart);
  stopFlood.store(true);
  flooder.join();
  const long rssAfter = rssKiB();
  const long growthKiB = std::max(rssFlooded, rssAfter) - rssBefore;
  std::printf(
      "flood: %zu idle connections opened in %.2f s (%d refused), %d more during the join; "
      "ranks admitted within %.3f s, rendezvous done in %.3f s; RSS %ld -> %ld -> %ld KiB "
      "(growth %ld KiB); %zu connections dropped\n",
      flood.size(), floodSeconds, refused, more.load(), slowest, joinSeconds, rssBefore, rssFlooded,
      rssAfter, growthKiB, server.droppedConnections());
  for (size_t rank = 0; rank < errors.size(); ++rank) {
    EXPECT_EQ(errors[rank], "") << "rank " << rank;
  }
  EXPECT_LT(slowest, 3.0);
  EXPECT_LT(joinSeconds, 5.0);
  EXPECT_LT(growthKiB, 32 << 10) << "the flood cost the server " << growthKiB << " KiB";
  closeAll(flood);
}

// --- Warnings about strangers are rate-limited -------------------------------------------------

// Every dropped connection is accounted for, but in a few lines a second plus a summary line.
TEST(StoreFloodTest, DropWarningsAreRateLimited) {
  constexpr int kStrangers = 1500;
  if (!raiseFdLimit(kStrangers + 256)) {
    BRAID_SKIP_NO_DEVICE("RLIMIT_NOFILE cannot be raised to " + std::to_string(kStrangers + 256));
  }
  StoreServer::Options options = serverOptions();
  options.handshakeTimeoutSeconds = 0.2;
  StoreServer server(options);
  testing::internal::CaptureStderr();
  auto start = Clock::now();
  std::vector<int> fds;
  for (int i = 0; i < kStrangers; ++i) {
    int fd = strangerConnect(server.port(), "B");
    if (fd >= 0) fds.push_back(fd);
  }
  bool allDropped = waitUntil([&] { return server.droppedConnections() >= fds.size(); }, 8);
  std::this_thread::sleep_for(std::chrono::milliseconds(1300));  // the last summary line is due
  const double seconds = secondsSince(start);
  std::string log = testing::internal::GetCapturedStderr();
  closeAll(fds);
  const size_t dropped = server.droppedConnections();
  EXPECT_TRUE(allDropped) << server.droppedConnections() << " of " << kStrangers;
  const int lines = countLines(log, "braid WARN");
  std::printf("%zu connections dropped in %.2f s, %d warning lines\n", dropped, seconds, lines);
  // A few lines per second of flood, plus one summary per second.
  EXPECT_LE(lines, 6 * (static_cast<int>(seconds) + 2)) << log.substr(0, 4000);
  // Every drop is either its own line or counted in a summary.
  size_t summarized = 0;
  int individual = 0;
  std::regex summary(R"((\d+) more connections dropped in the last)");
  size_t begin = 0;
  while (begin < log.size()) {
    size_t end = log.find('\n', begin);
    if (end == std::string::npos) end = log.size();
    std::string line = log.substr(begin, end - begin);
    std::smatch m;
    if (std::regex_search(line, m, summary)) {
      summarized += std::stoul(m[1]);
    } else if (line.find("dropped connection from") != std::string::npos) {
      ++individual;
    }
    begin = end + 1;
  }
  EXPECT_GT(summarized, 0u) << log.substr(0, 4000);
  EXPECT_EQ(summarized + individual, dropped) << log.substr(0, 4000);
}

// --- Joining ranks retry what a busy or flooded store does to them ----------------------------

// A listener that resets the first connections it accepts (as a store evicting strangers under a
// flood would), then gives the port to a real store. The client must ride through it.
TEST(StoreRetryTest, ClientRetriesConnectionsClosedBeforeTheHandshake) {
  int port = findFreePort();
  int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(listener, 0);
  int one = 1;
  ::setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(listener, 16), 0);
  std::string error = "still running";
  std::string value;
  std::thread rank([&] {
    try {
      TcpStore store(StoreAddress{"127.0.0.1", port}, clientOptions(), Deadline::after(8));
      store.set("k", "joined");
      value = store.get("k", Deadline::after(5));
      error.clear();
    } catch (const std::exception& e) {
      error = e.what();
    }
  });
  // First connection: reset at once. Second: closed after reading its handshake. Third: closed
  // without a word.
  for (int i = 0; i < 3; ++i) {
    pollfd p{listener, POLLIN, 0};
    if (::poll(&p, 1, 5000) != 1) break;  // the client gave up instead of retrying
    int fd = ::accept(listener, nullptr, nullptr);
    ASSERT_GE(fd, 0);
    if (i == 0) {
      linger hard{1, 0};
      ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &hard, sizeof hard);
    } else if (i == 1) {
      char buf[64];
      ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      (void)n;
    }
    ::close(fd);
  }
  ::close(listener);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // refused meanwhile: retried too
  StoreServer::Options options = serverOptions();
  options.port = port;
  StoreServer server(options);
  auto start = Clock::now();
  rank.join();
  EXPECT_EQ(error, "");
  EXPECT_EQ(value, "joined");
  EXPECT_LT(secondsSince(start), 5.0);
}

// A store that resets every connection: the rank retries until its deadline, then says who it
// is, where it tried, how often and what happened.
TEST(StoreRetryTest, GivesUpAtItsDeadlineNamingRankAddressAndFailure) {
  ResettingListener listener;
  auto start = Clock::now();
  try {
    TcpStore store(StoreAddress{"127.0.0.1", listener.port()}, clientOptions(4, kSecret, 2),
                   Deadline::after(1.0));
    FAIL() << "joined a store that resets every connection";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_EQ(e.code(), ErrorCode::kTimeout) << what;
    EXPECT_NE(what.find("rank 2"), std::string::npos) << what;
    EXPECT_NE(what.find("127.0.0.1:" + std::to_string(listener.port())), std::string::npos) << what;
    EXPECT_NE(what.find("before answering the handshake"), std::string::npos) << what;
    EXPECT_NE(what.find("attempt"), std::string::npos) << what;
    std::printf("%s\n", what.c_str());
  }
  const double took = secondsSince(start);
  EXPECT_GE(took, 0.9);
  EXPECT_LT(took, 3.0);
  EXPECT_GE(listener.accepted(), 3) << "the client did not retry";
}

// A configuration error is final: the client fails at once, after one attempt, saying why.
TEST(StoreRetryTest, WrongSecretOrWorldSizeFailsAtOnceWithoutRetrying) {
  StoreServer server(serverOptions());
  const std::string where = "127.0.0.1:" + std::to_string(server.port());
  auto start = Clock::now();
  try {
    TcpStore intruder(StoreAddress{"127.0.0.1", server.port()}, clientOptions(4, "guessed", 1),
                      Deadline::after(10));
    FAIL() << "wrong secret accepted";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_EQ(e.code(), ErrorCode::kRemoteError) << what;
    EXPECT_NE(what.find("rank 1"), std::string::npos) << what;
    EXPECT_NE(what.find(where), std::string::npos) << what;
    EXPECT_NE(what.find("secret"), std::string::npos) << what;
  }
  EXPECT_LT(secondsSince(start), 1.0);
  EXPECT_TRUE(waitUntil([&] { return server.droppedConnections() == 1; }, 2));
  start = Clock::now();
  try {
    TcpStore other(StoreAddress{"127.0.0.1", server.port()}, clientOptions(8, kSecret, 5),
                   Deadline::after(10));
    FAIL() << "wrong world size accepted";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_EQ(e.code(), ErrorCode::kInvalidUsage) << what;
    EXPECT_NE(what.find("rank 5"), std::string::npos) << what;
    EXPECT_NE(what.find("world size 8"), std::string::npos) << what;
  }
  EXPECT_LT(secondsSince(start), 1.0);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // a retry would show by now
  EXPECT_EQ(server.droppedConnections(), 2u) << "a rejected client retried";
}

// A store that already serves as many clients as it allows tells a newcomer to retry; it gets in
// once a place is free.
TEST(StoreRetryTest, BusyStoreIsRetried) {
  StoreServer::Options options = serverOptions();
  options.maxConnections = 1;
  StoreServer server(options);
  auto first = std::make_unique<TcpStore>(StoreAddress{"127.0.0.1", server.port()},
                                          clientOptions(4, kSecret, 0), Deadline::after(5));
  first->set("k", "v");
  std::string error = "still running", value;
  std::thread second([&] {
    try {
      TcpStore store(StoreAddress{"127.0.0.1", server.port()}, clientOptions(4, kSecret, 1),
                     Deadline::after(5));
      value = store.get("k", Deadline::after(5));
      error.clear();
    } catch (const std::exception& e) {
      error = e.what();
    }
  });
  EXPECT_TRUE(waitUntil([&] { return server.droppedConnections() >= 1; }, 3));  // turned away
  first.reset();
  second.join();
  EXPECT_EQ(error, "");
  EXPECT_EQ(value, "v");
}

// --- Where the store listens -------------------------------------------------------------------

// The store listens on the address ranks are told to use, not on every interface.
TEST(StoreBindTest, ListensOnlyWhereRanksAreToldToLook) {
  const std::string other = nonLoopbackAddress();
  if (other.empty()) BRAID_SKIP_NO_DEVICE("this machine has no non-loopback IPv4 address");
  ScopedEnv unset("BRAID_STORE_BIND", nullptr);
  {
    StoreServer::Options options = serverOptions();
    options.bindAddress = storeBindAddress("127.0.0.1");
    EXPECT_EQ(options.bindAddress, "127.0.0.1");
    StoreServer server(options);
    EXPECT_FALSE(reachable(other, server.port())) << "reachable on " << other;
    TcpStore rank(StoreAddress{"127.0.0.1", server.port()}, clientOptions(), Deadline::after(5));
    rank.set("k", "v");
  }
  {
    StoreServer::Options options = serverOptions();
    options.bindAddress = storeBindAddress(other);
    StoreServer server(options);
    EXPECT_FALSE(reachable("127.0.0.1", server.port())) << "reachable on 127.0.0.1";
    TcpStore rank(StoreAddress{other, server.port()}, clientOptions(), Deadline::after(5));
    rank.set("k", "v");
  }
  // The escape hatch: every interface.
  ScopedEnv all("BRAID_STORE_BIND", "0.0.0.0");
  StoreServer::Options options = serverOptions();
  options.bindAddress = storeBindAddress("127.0.0.1");
  EXPECT_EQ(options.bindAddress, "0.0.0.0");
  StoreServer server(options);
  EXPECT_TRUE(reachable(other, server.port()));
  EXPECT_TRUE(reachable("127.0.0.1", server.port()));
}

// MASTER_ADDR may be a name: the store listens where the name resolves, and ranks reach it by the
// name. A name that is no address of this host fails with a message that says what to do.
TEST(StoreBindTest, HostNamesResolvingToThisHostWork) {
  ScopedEnv unset("BRAID_STORE_BIND", nullptr);
  char name[256] = "";
  ASSERT_EQ(::gethostname(name, sizeof name), 0);
  for (const std::string& host : {std::string("localhost"), std::string(name)}) {
    StoreServer::Options options = serverOptions();
    options.bindAddress = storeBindAddress(host);
    EXPECT_EQ(options.bindAddress, resolveIPv4(host)) << host;
    StoreServer server(options);
    TcpStore rank(StoreAddress{host, server.port()}, clientOptions(), Deadline::after(5));
    rank.set("k", host);
    EXPECT_EQ(rank.get("k", Deadline::after(5)), host);
  }
  StoreServer::Options options = serverOptions();
  options.bindAddress = "192.0.2.123";  // TEST-NET-1, not an address of this host
  if (options.bindAddress == nonLoopbackAddress()) return;
  try {
    StoreServer server(options);
    ADD_FAILURE() << "listened on an address this host does not have";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("192.0.2.123"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("BRAID_STORE_BIND"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace braid::bootstrap
