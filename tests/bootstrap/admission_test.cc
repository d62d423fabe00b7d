// Tests that the store admits the job's ranks whatever happens to their connections before the
// handshake (resets, closes), and that configuration errors fail at once.
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
#include "tests/support/skip.h"

namespace braid::bootstrap {
namespace {

constexpr char kSecret[] = "admission-secret-42";

TcpStore::Options clientOptions(int world = 4, std::string secret = kSecret, int rank = -1) {
  TcpStore::Options options;
  options.rank = rank;
  options.worldSize = world;
  options.secret = std::move(secret);
  options.timeoutSeconds = 10;
  return options;
}

StoreServer::Options serverOptions(int world = 4) {
  StoreServer::Options options;
  options.worldSize = world;
  options.secret = kSecret;
  options.bindAddress = "127.0.0.1";
  return options;
}

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

}  // namespace
}  // namespace braid::bootstrap
