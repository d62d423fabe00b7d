// tcp only: stray connections on the listening port, a refused dial, and protocol errors.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include "tests/transport/test_support.h"
#include "transport/tcp/wire.h"

namespace braid::transport::testing {
namespace {

int dial(const std::string& where) {
  size_t colon = where.rfind(':');
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  inet_pton(AF_INET, where.substr(0, colon).c_str(), &addr.sin_addr);
  addr.sin_port = htons(static_cast<uint16_t>(std::stoi(where.substr(colon + 1))));
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

void sendAll(int fd, const std::string& bytes) {
  ASSERT_EQ(::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(bytes.size()));
}

/// True once the other side closed the connection (EOF or reset) within `millis`.
bool closedByPeer(int fd, int millis) {
  Deadline deadline = Deadline::after(millis / 1000.0);
  while (!deadline.expired()) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, deadline.millisLeft()) <= 0) continue;
    char buf[64];
    ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) return true;
  }
  return false;
}

size_t countOf(const std::string& text, const std::string& what) {
  size_t count = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) {
    ++count;
  }
  return count;
}

TEST(TcpHandshake, StrayConnectionsAreRejectedAndRealPeersConnect) {
  MemoryKeyValue kv;
  const std::string jobId = uniqueJobId("stray");
  const std::vector<Kind> kinds = {Kind::kTcp, Kind::kTcp};
  ::testing::internal::CaptureStderr();
  std::unique_ptr<Endpoint> ep0, ep1;
  std::string error1;
  std::thread acceptor([&] {
    try {
      ep1 = connect(makeConfig(1, 2, kinds, jobId), kv);
    } catch (const std::exception& e) {
      error1 = e.what();
    }
  });
  std::string where = kv.get(jobId + "/tcp/1", Deadline::after(10));
  int garbage = dial(where);
  int wrongSecret = dial(where);
  int wrongSize = dial(where);
  int silent = dial(where);
  ASSERT_GE(garbage, 0);
  ASSERT_GE(wrongSecret, 0);
  ASSERT_GE(wrongSize, 0);
  ASSERT_GE(silent, 0);
  sendAll(garbage, std::string(64, '\xab'));
  sendAll(wrongSecret, tcp::encodeHello(2, 0, 1, jobId, "not-the-secret"));
  sendAll(wrongSize, tcp::encodeHello(3, 0, 1, jobId, "s3cret"));
  EXPECT_TRUE(closedByPeer(garbage, 3000));
  EXPECT_TRUE(closedByPeer(wrongSecret, 3000));
  EXPECT_TRUE(closedByPeer(wrongSize, 3000));
  // The silent connection is still pending; the real peer connects regardless.
  auto start = Clock::now();
  std::string error0;
  try {
    ep0 = connect(makeConfig(0, 2, kinds, jobId), kv);
  } catch (const std::exception& e) {
    error0 = e.what();
  }
  acceptor.join();
  double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  std::string log = ::testing::internal::GetCapturedStderr();
  ASSERT_EQ(error0, "");
  ASSERT_EQ(error1, "");
  EXPECT_LT(seconds, 3.0);
  EXPECT_TRUE(closedByPeer(silent, 3000));
  for (int fd : {garbage, wrongSecret, wrongSize, silent}) close(fd);

  EXPECT_EQ(countOf(log, "rejected a tcp connection"), 4u) << log;
  EXPECT_EQ(countOf(log, "bad magic"), 1u) << log;
  EXPECT_EQ(countOf(log, "wrong secret"), 1u) << log;
  EXPECT_EQ(countOf(log, "world size 3"), 1u) << log;

  // The real connection works.
  SendChannel& out = ep0->send(1, 1);
  void* slot = out.tryAcquire();
  ASSERT_NE(slot, nullptr);
  fillPayload(slot, 100, 42);
  out.post(100, MessageMeta{{1, 2, 3, 4}});
  RecvChannel& in = ep1->recv(0, 1);
  const void* data = nullptr;
  size_t bytes = 0;
  MessageMeta meta;
  ASSERT_TRUE(waitFor(
      *ep1, [&] { return (data = in.tryPeek(&bytes, &meta)) != nullptr; }, 5));
  EXPECT_EQ(bytes, 100u);
  EXPECT_EQ(checkPayload(data, bytes, 42), -1);
  EXPECT_EQ(meta.words[3], 4u);
  in.release();
  EXPECT_TRUE(ep0->peerAlive(1));
  EXPECT_TRUE(ep1->peerAlive(0));
}

// A higher peer whose published address refuses connections (its process is gone, or it never
// listened): the dial is retried, without blocking, until the connect deadline, whose error names
// the peer, its address and the last refusal.
TEST(TcpHandshake, ARefusedDialIsRetriedUntilTheDeadlineNamingTheAddress) {
  MemoryKeyValue kv;
  const std::string jobId = uniqueJobId("refused");
  // A port nothing listens on: bound, then closed.
  int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  socklen_t len = sizeof addr;
  ASSERT_EQ(getsockname(s, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  close(s);
  const std::string where = fmt::format("127.0.0.1:{}", ntohs(addr.sin_port));
  kv.set(jobId + "/tcp/1", where);
  EndpointConfig c = makeConfig(0, 2, {Kind::kTcp, Kind::kTcp}, jobId);
  c.timeoutSeconds = 1;
  const auto start = Clock::now();
  try {
    connect(c, kv);
    ADD_FAILURE() << "a dial to a refusing address connected";
  } catch (const Error& e) {
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    EXPECT_EQ(e.code(), ErrorCode::kTimeout) << e.what();
    const std::string text = e.what();
    const std::string expected =
        "rank 0: tcp connect timed out waiting for peer rank(s) 1 (to accept a connection at " +
        where + ": ";
    EXPECT_NE(text.find(expected), std::string::npos) << text;
    EXPECT_NE(text.find("refused"), std::string::npos) << text;
    EXPECT_GE(seconds, 0.9);  // retried until the deadline, not given up at the first refusal
    EXPECT_LT(seconds, 5.0);
  }
}

TEST(TcpProtocol, OversizedFrameIsAnErrorNamingThePeer) {
  MemoryKeyValue kv;
  const std::string jobId = uniqueJobId("oversize");
  const std::vector<Kind> kinds = {Kind::kTcp, Kind::kTcp};
  std::unique_ptr<Endpoint> ep1;
  std::string error1;
  ::testing::internal::CaptureStderr();
  std::thread acceptor([&] {
    try {
      EndpointConfig c = makeConfig(1, 2, kinds, jobId);
      c.slotBytes = 1024;
      ep1 = connect(c, kv);
    } catch (const std::exception& e) {
      error1 = e.what();
    }
  });
  // Play rank 0 by hand: a valid handshake, then a frame longer than any slot.
  int fd = dial(kv.get(jobId + "/tcp/1", Deadline::after(10)));
  ASSERT_GE(fd, 0);
  sendAll(fd, tcp::encodeHello(2, 0, 1, jobId, "s3cret"));
  tcp::Ack ack;
  ASSERT_EQ(recv(fd, &ack, sizeof ack, MSG_WAITALL), static_cast<ssize_t>(sizeof ack));
  EXPECT_EQ(ack.magic, tcp::kAckMagic);
  EXPECT_EQ(ack.rank, 1);
  acceptor.join();
  ASSERT_EQ(error1, "");
  tcp::FrameHeader frame;
  frame.type = tcp::kData;
  frame.channel = 0;
  frame.length = 1025;
  sendAll(fd, std::string(reinterpret_cast<const char*>(&frame), sizeof frame));
  EXPECT_TRUE(waitFor(
      *ep1, [&] { return !ep1->peerAlive(0); }, 3));
  auto abort = ep1->peerAbort();
  ASSERT_TRUE(abort.has_value());
  EXPECT_EQ(abort->first, 0);
  EXPECT_NE(abort->second.find("protocol error from rank 0"), std::string::npos) << abort->second;
  EXPECT_NE(abort->second.find("1025 bytes"), std::string::npos) << abort->second;
  EXPECT_TRUE(closedByPeer(fd, 3000));
  close(fd);
  ep1.reset();
  std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(countOf(log, "protocol error from rank 0"), 1u) << log;
}

}  // namespace
}  // namespace braid::transport::testing
