// Tests of the rendezvous store: in-memory and TCP, across threads and forked processes, and the
// server's robustness against connections that do not belong to the job.
#include "comm/bootstrap/store.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "comm/bootstrap/wire.h"
#include "tests/comm/bootstrap/store_options.h"
#include "tests/kit/processes.h"

namespace braid::bootstrap {
namespace {

std::unique_ptr<TcpStore> connectTo(int port, int world = 4) {
  return std::make_unique<TcpStore>(StoreAddress{"127.0.0.1", port}, clientOptions(world),
                                    Deadline::after(10));
}

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Polls `done` every millisecond for at most `seconds`.
bool waitUntil(const std::function<bool()>& done, double seconds) {
  Deadline deadline = Deadline::after(seconds);
  while (!done()) {
    if (deadline.expired()) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

// A plain blocking TCP connection to the server, for speaking the protocol badly on purpose.
int rawConnect(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return fd;
}

void rawSend(int fd, const std::string& bytes) {
  ASSERT_EQ(::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(bytes.size()));
}

std::string handshakeBytes(uint32_t magic, uint32_t version, uint32_t world,
                           const std::string& secret) {
  wire::Writer w;
  w.u32(magic);
  w.u32(version);
  w.u32(world);
  w.u32(static_cast<uint32_t>(secret.size()));
  w.raw(secret);
  return w.bytes();
}

// True once the peer closed the connection (recv returns 0 or an error other than a timeout).
bool closedByPeer(int fd) {
  char buf[256];
  Deadline deadline = Deadline::after(5);
  while (!deadline.expired()) {
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n == 0) return true;
    if (n < 0 && errno != EAGAIN && errno != EINTR) return true;
  }
  return false;
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

// --- Addresses and secrets -----------------------------------------------------------------

TEST(StoreAddressTest, ParsesAndFormats) {
  StoreAddress a = StoreAddress::parse("node-3.cluster:29500");
  EXPECT_EQ(a.host, "node-3.cluster");
  EXPECT_EQ(a.port, 29500);
  EXPECT_EQ(a.toString(), "node-3.cluster:29500");
  EXPECT_EQ(StoreAddress::parse("10.0.0.1:0").port, 0);
  for (const char* bad : {"nohost", ":123", "host:", "host:70000", "host:12a", "host:-1"}) {
    try {
      StoreAddress::parse(bad);
      ADD_FAILURE() << "accepted " << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidUsage);
      EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
    }
  }
}

TEST(StoreAddressTest, ResolvesIPv4) {
  EXPECT_EQ(resolveIPv4("127.0.0.1"), "127.0.0.1");
  EXPECT_EQ(resolveIPv4("localhost"), "127.0.0.1");
  try {
    resolveIPv4("no-such-host.invalid");
    ADD_FAILURE() << "resolved a .invalid name";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no-such-host.invalid"), std::string::npos);
  }
  int port = findFreePort();
  EXPECT_GT(port, 0);
  EXPECT_LE(port, 65535);
}

TEST(SecretTest, RandomAndConstantTimeCompare) {
  std::string a = randomSecret();
  std::string b = randomSecret();
  EXPECT_EQ(a.size(), 32u);
  EXPECT_NE(a, b);
  for (char c : a) EXPECT_TRUE((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')) << a;
  EXPECT_TRUE(secretsEqual(a, a));
  EXPECT_FALSE(secretsEqual(a, b));
  EXPECT_FALSE(secretsEqual(a, a.substr(0, 31)));
  EXPECT_FALSE(secretsEqual("", "x"));
  EXPECT_TRUE(secretsEqual("", ""));
}

TEST(SecretTest, SipHashMatchesThePapersVectorsAndProofsHideTheSecret) {
  uint8_t key[16];
  for (int i = 0; i < 16; ++i) key[i] = static_cast<uint8_t>(i);
  std::string message;
  for (int i = 0; i < 15; ++i) message.push_back(static_cast<char>(i));
  EXPECT_EQ(sipHash24(key, ""), 0x726fdb47dd0e0e31ull);
  EXPECT_EQ(sipHash24(key, message), 0xa129ca6149be45e5ull);
  const std::string proof = secretProof("s3cret", "job-a");
  EXPECT_EQ(proof.size(), 16u);
  EXPECT_EQ(proof, secretProof("s3cret", "job-a"));
  EXPECT_NE(proof, secretProof("s3cret", "job-b"));
  EXPECT_NE(proof, secretProof("s3creT", "job-a"));
  EXPECT_EQ(proof.find("s3cret"), std::string::npos);
}

TEST(SecretTest, JobSecretFromEnvironmentWarnsOnceWhenUnset) {
  ::setenv("BRAID_SECRET", "from-the-launcher", 1);
  EXPECT_EQ(jobSecret(), "from-the-launcher");
  ::unsetenv("BRAID_SECRET");
  ::testing::internal::CaptureStderr();
  std::string first = jobSecret();
  std::string second = jobSecret();
  std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_FALSE(first.empty());
  EXPECT_EQ(first, second);
  // One warning per process at most (none if an earlier test already triggered it).
  EXPECT_LE(countLines(log, "BRAID_SECRET is not set"), 1) << log;
  ::testing::internal::CaptureStderr();
  jobSecret();
  log = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(countLines(log, "BRAID_SECRET"), 0) << log;
}

// --- The store contract, run against both implementations ----------------------------------

// Four rank threads: each sets its key, counts itself in, waits for all, reads every value.
void exerciseAcrossThreads(const std::function<Store&(int rank)>& storeOf) {
  constexpr int kRanks = 4;
  constexpr int kAdds = 50;
  std::vector<std::string> errors(kRanks);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < kRanks; ++rank) {
    threads.emplace_back([&, rank] {
      try {
        Store& store = storeOf(rank);
        Deadline deadline = Deadline::after(20);
        store.set("addr/" + std::to_string(rank), "value-of-" + std::to_string(rank));
        for (int i = 0; i < kAdds; ++i) store.add("counter", 1, deadline);
        std::vector<std::string> keys;
        for (int r = 0; r < kRanks; ++r) keys.push_back("addr/" + std::to_string(r));
        store.wait(keys, deadline);
        for (int r = 0; r < kRanks; ++r) {
          std::string got = store.get("addr/" + std::to_string(r), deadline);
          if (got != "value-of-" + std::to_string(r)) errors[rank] += "bad value " + got + "; ";
        }
        // Barrier on the counter: everyone's adds are in once it reads kRanks * kAdds.
        int64_t arrived = store.add("arrived", 1, deadline);
        if (arrived == kRanks) store.set("all-arrived", "yes");
        store.get("all-arrived", deadline);
        std::string total = store.get("counter", deadline);
        if (total != std::to_string(kRanks * kAdds)) errors[rank] += "counter " + total + "; ";
      } catch (const std::exception& e) {
        errors[rank] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int rank = 0; rank < kRanks; ++rank) EXPECT_EQ(errors[rank], "") << "rank " << rank;
}

TEST(InMemoryStoreTest, SetGetAddWaitAcrossThreads) {
  InMemoryStore store;
  exerciseAcrossThreads([&](int) -> Store& { return store; });
}

TEST(InMemoryStoreTest, GetTimeoutNamesKey) {
  InMemoryStore store;
  auto start = Clock::now();
  try {
    store.get("missing/key", Deadline::after(0.1));
    FAIL() << "get returned";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kTimeout);
    EXPECT_NE(std::string(e.what()).find("missing/key"), std::string::npos) << e.what();
  }
  EXPECT_LT(secondsSince(start), 2.0);
  store.set("x", "not a number");
  EXPECT_THROW(store.add("x", 1, Deadline::after(1)), Error);
  store.set("min", std::to_string(INT64_MIN));
  EXPECT_THROW(store.add("min", -1, Deadline::after(1)), Error);
  EXPECT_EQ(store.get("min", Deadline::after(1)), std::to_string(INT64_MIN));
  EXPECT_EQ(store.add("y", -5, Deadline::after(1)), -5);
  EXPECT_EQ(store.get("y", Deadline::after(1)), "-5");
  try {
    store.wait({"y", "z"}, Deadline::after(0.05));
    FAIL() << "wait returned";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kTimeout);
    EXPECT_NE(std::string(e.what()).find("'z'"), std::string::npos) << e.what();
  }
}

TEST(TcpStoreTest, SetGetAddWaitAcrossThreads) {
  StoreServer server(serverOptions());
  std::vector<std::unique_ptr<TcpStore>> clients;
  for (int r = 0; r < 4; ++r) clients.push_back(connectTo(server.port()));
  EXPECT_TRUE(waitUntil([&] { return server.activeConnections() == 4; }, 5));
  EXPECT_EQ(clients[0]->localAddress(), "127.0.0.1");
  exerciseAcrossThreads([&](int rank) -> Store& { return *clients[rank]; });
  EXPECT_EQ(server.droppedConnections(), 0u);
}

TEST(TcpStoreTest, GetBlocksUntilAnotherClientSets) {
  StoreServer server(serverOptions());
  auto waiter = connectTo(server.port());
  auto setter = connectTo(server.port());
  std::string got;
  auto start = Clock::now();
  std::thread t([&] { got = waiter->get("late", Deadline::after(10)); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  setter->set("late", std::string("v\0w", 3));
  t.join();
  EXPECT_EQ(got, std::string("v\0w", 3));
  EXPECT_LT(secondsSince(start), 5.0);
}

TEST(TcpStoreTest, GetTimeoutNamesKeyAndAddressAndKeepsConnection) {
  StoreServer server(serverOptions());
  auto client = connectTo(server.port());
  auto start = Clock::now();
  try {
    client->get("never/set", Deadline::after(0.2));
    FAIL() << "get returned";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kTimeout);
    std::string what = e.what();
    EXPECT_NE(what.find("never/set"), std::string::npos) << what;
    EXPECT_NE(what.find("127.0.0.1:" + std::to_string(server.port())), std::string::npos) << what;
  }
  double took = secondsSince(start);
  EXPECT_GE(took, 0.15);
  EXPECT_LT(took, 2.0);
  try {
    client->wait({"a", "b"}, Deadline::after(0.05));
    FAIL() << "wait returned";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kTimeout);
    EXPECT_NE(std::string(e.what()).find("'a'"), std::string::npos) << e.what();
  }
  // The connection survives a server-side timeout.
  client->set("k", "v");
  EXPECT_EQ(client->get("k", Deadline::after(5)), "v");
  client->set("n", "xyz");
  try {
    client->add("n", 1, Deadline::after(5));
    FAIL() << "add on text returned";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidUsage);
  }
  EXPECT_EQ(client->add("m", 7, Deadline::after(5)), 7);
  EXPECT_EQ(client->add("m", -9, Deadline::after(5)), -2);
  // A sum past 64 bits is refused and leaves the value (it was undefined behaviour in the server:
  // fuzz/corpus/bootstrap_wire/regress_add_overflow).
  client->set("big", std::to_string(INT64_MAX));
  try {
    client->add("big", 1, Deadline::after(5));
    FAIL() << "overflowing add returned";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidUsage);
    EXPECT_NE(std::string(e.what()).find("overflows"), std::string::npos) << e.what();
  }
  EXPECT_EQ(client->add("big", -1, Deadline::after(5)), INT64_MAX - 1);
}

TEST(TcpStoreTest, LargeValuesAndLimits) {
  StoreServer server(serverOptions());
  auto client = connectTo(server.port());
  std::string big(3 << 20, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>((i * 2654435761u) >> 13);
  client->set("big", big);
  std::string got = client->get("big", Deadline::after(10));
  ASSERT_EQ(got.size(), big.size());
  EXPECT_TRUE(got == big);
  std::string hugeKey(kMaxKeyBytes + 1, 'k');
  EXPECT_THROW(client->set(hugeKey, "v"), Error);
  EXPECT_THROW(client->set("k", std::string(kMaxValueBytes + 1, 'v')), Error);
  client->set("still", "works");
  EXPECT_EQ(client->get("still", Deadline::after(5)), "works");
}

// Ranks as forked processes; they start before the server, so they exercise connect retries.
TEST(TcpStoreTest, ForkedRanksRendezvous) {
  constexpr int kRanks = 4;
  int port = findFreePort();
  std::vector<pid_t> pids;
  for (int rank = 0; rank < kRanks; ++rank) {
    pids.push_back(braid::testing::forkChild([&, rank] {
      int code = 0;
      try {
        TcpStore store(StoreAddress{"localhost", port}, clientOptions(kRanks), Deadline::after(15));
        Deadline deadline = Deadline::after(15);
        store.set("rank/" + std::to_string(rank), std::to_string(rank * 11));
        store.add("joined", 1, deadline);
        std::vector<std::string> keys;
        for (int r = 0; r < kRanks; ++r) keys.push_back("rank/" + std::to_string(r));
        store.wait(keys, deadline);
        for (int r = 0; r < kRanks; ++r) {
          if (store.get(keys[r], deadline) != std::to_string(r * 11)) code = 3;
        }
        if (store.add("done", 1, deadline) == kRanks) store.set("finished", "1");
        store.get("finished", deadline);
        if (store.get("joined", deadline) != std::to_string(kRanks)) code = 4;
      } catch (const std::exception& e) {
        fprintf(stderr, "rank %d: %s\n", rank, e.what());
        code = 2;
      }
      return code;
    }));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(150));  // ranks are retrying by now
  StoreServer::Options options = serverOptions(kRanks);
  options.port = port;
  StoreServer server(options);
  Deadline deadline = Deadline::after(30);
  for (int rank = 0; rank < kRanks; ++rank) {
    const int code = braid::testing::waitChild(pids[rank], deadline);
    EXPECT_NE(code, braid::testing::kKilledAtDeadline) << "rank " << rank << " hung";
    EXPECT_EQ(code, 0) << "rank " << rank;
  }
}

// --- Robustness: strangers are dropped with one warning each, real ranks keep going ---------

class StoreRobustnessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    StoreServer::Options options = serverOptions();
    options.handshakeTimeoutSeconds = 0.3;
    server_ = std::make_unique<StoreServer>(options);
    rank0_ = connectTo(server_->port());
    rank0_->set("before", "1");
  }

  // Runs `attack` with stderr captured, waits for the server to drop it, and checks that one
  // warning line naming `reason` was logged and that real clients still work.
  void expectDropped(const std::function<void()>& attack, const std::string& reason) {
    size_t before = server_->droppedConnections();
    ::testing::internal::CaptureStderr();
    attack();
    bool dropped = waitUntil([&] { return server_->droppedConnections() == before + 1; }, 5);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // a second warning would show
    std::string log = ::testing::internal::GetCapturedStderr();
    EXPECT_TRUE(dropped) << "not dropped; log: " << log;
    EXPECT_EQ(server_->droppedConnections(), before + 1);
    EXPECT_EQ(countLines(log, "braid WARN"), 1) << log;
    EXPECT_EQ(countLines(log, reason), 1) << log;
    // The real ranks carry on, old connection and new.
    rank0_->set("after", "2");
    auto rank1 = connectTo(server_->port());
    EXPECT_EQ(rank1->get("before", Deadline::after(5)), "1");
    EXPECT_EQ(rank1->get("after", Deadline::after(5)), "2");
    EXPECT_EQ(rank0_->add("count", 1, Deadline::after(5)), ++adds_);
  }

  std::unique_ptr<StoreServer> server_;
  std::unique_ptr<TcpStore> rank0_;
  int64_t adds_ = 0;
};

TEST_F(StoreRobustnessTest, GarbageBytesAreDropped) {
  int fd = -1;
  expectDropped(
      [&] {
        fd = rawConnect(server_->port());
        rawSend(fd, "GET / HTTP/1.1\r\nHost: x\r\n\r\n");
      },
      "garbage");
  EXPECT_TRUE(closedByPeer(fd));
  ::close(fd);
}

TEST_F(StoreRobustnessTest, WrongSecretIsRejected) {
  expectDropped(
      [&] {
        try {
          TcpStore intruder(StoreAddress{"127.0.0.1", server_->port()},
                            clientOptions(4, "guessed-secret"), Deadline::after(5));
          ADD_FAILURE() << "wrong secret accepted";
        } catch (const Error& e) {
          EXPECT_EQ(e.code(), ErrorCode::kRemoteError);
          EXPECT_NE(std::string(e.what()).find("secret"), std::string::npos) << e.what();
        }
      },
      "wrong job secret");
}

TEST_F(StoreRobustnessTest, WrongWorldSizeIsRejected) {
  expectDropped(
      [&] {
        try {
          TcpStore other(StoreAddress{"127.0.0.1", server_->port()}, clientOptions(5),
                         Deadline::after(5));
          ADD_FAILURE() << "wrong world size accepted";
        } catch (const Error& e) {
          EXPECT_EQ(e.code(), ErrorCode::kInvalidUsage);
          EXPECT_NE(std::string(e.what()).find("world size 5"), std::string::npos) << e.what();
        }
      },
      "world size 5");
}

TEST_F(StoreRobustnessTest, WrongVersionIsRejected) {
  int fd = -1;
  expectDropped(
      [&] {
        fd = rawConnect(server_->port());
        rawSend(fd, handshakeBytes(wire::kMagic, 99, 4, kSecret));
      },
      "protocol version 99");
  EXPECT_TRUE(closedByPeer(fd));
  ::close(fd);
}

TEST_F(StoreRobustnessTest, SilentConnectionIsDropped) {
  int fd = -1;
  auto start = Clock::now();
  expectDropped([&] { fd = rawConnect(server_->port()); }, "no complete handshake");
  EXPECT_TRUE(closedByPeer(fd));
  EXPECT_LT(secondsSince(start), 3.0);
  ::close(fd);
}

TEST_F(StoreRobustnessTest, OversizedFrameIsDropped) {
  int fd = -1;
  expectDropped(
      [&] {
        fd = rawConnect(server_->port());
        rawSend(fd, handshakeBytes(wire::kMagic, wire::kVersion, 4, kSecret));
        char reply[16];
        ASSERT_EQ(::recv(fd, reply, sizeof reply, MSG_WAITALL), 16);
        wire::Writer w;
        w.u32(1u << 30);  // claims a 1 GiB frame
        w.raw("xxxxxxxx");
        rawSend(fd, w.bytes());
      },
      "exceeds the limit");
  EXPECT_TRUE(closedByPeer(fd));
  ::close(fd);
}

TEST_F(StoreRobustnessTest, OversizedKeyIsDropped) {
  int fd = -1;
  expectDropped(
      [&] {
        fd = rawConnect(server_->port());
        rawSend(fd, handshakeBytes(wire::kMagic, wire::kVersion, 4, kSecret));
        char reply[16];
        ASSERT_EQ(::recv(fd, reply, sizeof reply, MSG_WAITALL), 16);
        wire::Request request{wire::Op::kSet, 0, 0, {std::string(kMaxKeyBytes + 1, 'k'), "v"}};
        rawSend(fd, wire::encodeRequest(request));
      },
      "key of 4097 bytes");
  ::close(fd);
}

// --- Shutdown and a server that dies ----------------------------------------------------------

TEST(StoreShutdownTest, DestructorIsBoundedWithClientsAttached) {
  auto server = std::make_unique<StoreServer>(serverOptions());
  int port = server->port();
  auto blocked = connectTo(port);
  auto idle = connectTo(port);
  int silent = rawConnect(port);
  ErrorCode code = ErrorCode::kOk;
  std::string message;
  std::thread t([&] {
    try {
      blocked->get("never", Deadline::after(20));
    } catch (const Error& e) {
      code = e.code();
      message = e.what();
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  auto start = Clock::now();
  server.reset();
  EXPECT_LT(secondsSince(start), 1.0);
  t.join();
  EXPECT_LT(secondsSince(start), 2.0);
  EXPECT_EQ(code, ErrorCode::kRemoteError);
  EXPECT_NE(message.find("127.0.0.1:" + std::to_string(port)), std::string::npos) << message;
  EXPECT_THROW(idle->set("x", "y"), Error);
  ::close(silent);
}

TEST(StoreShutdownTest, ClientFailsFastWhenServerIsKilled) {
  int pipeFds[2];
  ASSERT_EQ(::pipe(pipeFds), 0);
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::close(pipeFds[0]);
    try {
      StoreServer server(serverOptions());
      int port = server.port();
      ssize_t ignored = ::write(pipeFds[1], &port, sizeof port);
      (void)ignored;
      ::sleep(30);  // until killed; bounded in case the parent dies first
    } catch (...) {
    }
    ::_exit(1);
  }
  ::close(pipeFds[1]);
  int port = 0;
  ASSERT_EQ(::read(pipeFds[0], &port, sizeof port), static_cast<ssize_t>(sizeof port));
  ::close(pipeFds[0]);
  auto client = connectTo(port);
  client->set("k", "v");
  EXPECT_EQ(client->get("k", Deadline::after(5)), "v");
  ErrorCode code = ErrorCode::kOk;
  std::string message;
  std::thread t([&] {
    try {
      client->get("never", Deadline::after(20));
    } catch (const Error& e) {
      code = e.code();
      message = e.what();
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  auto start = Clock::now();
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  t.join();
  EXPECT_LT(secondsSince(start), 2.0);
  EXPECT_TRUE(code == ErrorCode::kRemoteError || code == ErrorCode::kTimeout) << message;
  EXPECT_NE(message.find("127.0.0.1:" + std::to_string(port)), std::string::npos) << message;
  // Later calls fail at once with the same story.
  start = Clock::now();
  try {
    client->get("k", Deadline::after(20));
    FAIL() << "get on a dead store returned";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code);
    EXPECT_NE(std::string(e.what()).find("127.0.0.1:" + std::to_string(port)), std::string::npos);
  }
  EXPECT_LT(secondsSince(start), 1.0);
  // A fresh client gives up at its deadline, naming the address.
  start = Clock::now();
  try {
    TcpStore late(StoreAddress{"127.0.0.1", port}, clientOptions(), Deadline::after(0.3));
    FAIL() << "connected to a dead store";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kTimeout);
    EXPECT_NE(std::string(e.what()).find("127.0.0.1:" + std::to_string(port)), std::string::npos);
  }
}

}  // namespace
}  // namespace braid::bootstrap
