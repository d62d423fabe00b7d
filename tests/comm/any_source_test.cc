// Receives from any source (Communicator::recvAnySource), ranks as threads over shm and tcp:
// several senders to one receiver with every element and each sender's order checked, tags
// choosing among posted receives, any-source and directed receives from one peer in posting order,
// a message smaller than the buffer, one larger (kMismatch), and a timeout that names the call.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tests/kit/communicators.h"
#include "tests/kit/expect_ranks.h"

namespace braid::testing {
namespace {

// The value of element i of message k that rank `from` sends.
int32_t payload(int from, int k, size_t i) {
  return static_cast<int32_t>((from * 7919 + k * 104729) ^ static_cast<int32_t>(i * 2654435761u));
}

// Message k of rank `from`: its own length, so a wrong pairing shows in the size too.
size_t lengthOf(int from, int k, size_t base) { return base + size_t(from) * 13 + size_t(k) * 5; }

std::vector<int32_t> message(int from, int k, size_t base) {
  std::vector<int32_t> v(lengthOf(from, k, base));
  for (size_t i = 0; i < v.size(); ++i) v[i] = payload(from, k, i);
  return v;
}

constexpr int32_t kUntouched = -7;

// Checks a received message against message k of `from`, and that the rest of the buffer is
// untouched.
void expectReceived(const std::vector<int32_t>& buf, RecvResult got, int from, int k,
                    size_t base) {
  const size_t n = lengthOf(from, k, base);
  ASSERT_EQ(got.bytes, n * sizeof(int32_t)) << "message " << k << " of rank " << from;
  for (size_t i = 0; i < n; ++i) {
    ASSERT_EQ(buf[i], payload(from, k, i))
        << "message " << k << " of rank " << from << " element " << i;
  }
  for (size_t i = n; i < buf.size(); ++i) {
    ASSERT_EQ(buf[i], kUntouched) << "element " << i << " past the message of " << n;
  }
}

// (transport, base message length in elements: one piece, or several 128 KiB pieces)
class ManySenders : public ::testing::TestWithParam<std::tuple<std::string, size_t>> {};

TEST_P(ManySenders, OneReceiverTakesEveryMessageInEachSendersOrder) {
  const auto [transport, base] = GetParam();
  constexpr int kRanks = 4, kPerSender = 6, kTag = 11;
  auto errors = runRanks(kRanks, optionsFor(transport), [&](Communicator& comm) {
    const int r = comm.rank();
    if (r != 0) {
      // Blocking and non-blocking sends, interleaved.
      for (int k = 0; k < kPerSender; ++k) {
        std::vector<int32_t> out = message(r, k, base);
        if (k % 2 == 0) {
          comm.send(out.data(), out.size(), DataType::kInt32, 0, kTag);
        } else {
          comm.sendAsync(out.data(), out.size(), DataType::kInt32, 0, kTag).wait();
        }
      }
      comm.barrier();
      return;
    }
    const size_t capacity = lengthOf(kRanks - 1, kPerSender - 1, base) + 3;
    std::map<int, int> next;  // per sender, the message it must deliver next
    for (int m = 0; m < (kRanks - 1) * kPerSender; ++m) {
      std::vector<int32_t> buf(capacity, kUntouched);
      RecvResult got;
      if (m % 3 == 0) {
        Request request = comm.recvAnySourceAsync(buf.data(), capacity, DataType::kInt32, kTag);
        request.wait();
        got = request.received();
      } else {
        got = comm.recvAnySource(buf.data(), capacity, DataType::kInt32, kTag);
      }
      ASSERT_GE(got.source, 1);
      ASSERT_LT(got.source, kRanks);
      const int k = next[got.source]++;
      ASSERT_LT(k, kPerSender) << "rank " << got.source << " sent only " << kPerSender;
      expectReceived(buf, got, got.source, k, base);
    }
    for (int q = 1; q < kRanks; ++q) EXPECT_EQ(next[q], kPerSender) << "from rank " << q;
    comm.barrier();
  });
  expectNoErrors(errors);
}

INSTANTIATE_TEST_SUITE_P(AnySource, ManySenders,
                         ::testing::Combine(::testing::Values("shm", "tcp"),
                                            ::testing::Values(size_t(17), size_t(70000))),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_" +
                                  std::to_string(std::get<1>(info.param));
                         });

TEST(AnySource, TagsChooseAmongPostedReceives) {
  // Rank 0 posts tag 1 then tag 2 from any source; rank 1 sends only tag 2, rank 2 only tag 1
  // and only once rank 0 tells it to (after tag 2 arrived), so each receive must skip the message
  // whose tag is not its own.
  auto errors = runRanks(3, optionsFor("shm"), [&](Communicator& comm) {
    const int r = comm.rank();
    if (r == 1) {
      std::vector<int32_t> out = message(1, 0, 40);
      comm.send(out.data(), out.size(), DataType::kInt32, 0, 2);
    } else if (r == 2) {
      int32_t go = 0;
      comm.recv(&go, 1, DataType::kInt32, 0, 3);
      ASSERT_EQ(go, 77);
      std::vector<int32_t> out = message(2, 0, 40);
      comm.send(out.data(), out.size(), DataType::kInt32, 0, 1);
    } else {
      const size_t capacity = 200;
      std::vector<int32_t> one(capacity, kUntouched), two(capacity, kUntouched);
      Request tagOne = comm.recvAnySourceAsync(one.data(), capacity, DataType::kInt32, 1);
      Request tagTwo = comm.recvAnySourceAsync(two.data(), capacity, DataType::kInt32, 2);
      tagTwo.wait();
      EXPECT_FALSE(tagOne.test()) << "tag 1 matched before any tag-1 message was sent";
      const int32_t go = 77;
      comm.send(&go, 1, DataType::kInt32, 2, 3);  // only now rank 2 sends its tag-1 message
      tagOne.wait();
      expectReceived(one, tagOne.received(), 2, 0, 40);
      expectReceived(two, tagTwo.received(), 1, 0, 40);
    }
    comm.barrier();
  });
  expectNoErrors(errors);
}

TEST(AnySource, AnySourceAndDirectedReceivesFromOnePeerMatchInPostingOrder) {
  // Rank 1 sends messages 0..3; rank 0 alternates the order in which it posts an any-source and a
  // directed receive. Each receive gets the message its posting position says.
  auto errors = runRanks(3, optionsFor("shm"), [&](Communicator& comm) {
    const int r = comm.rank();
    if (r == 1) {
      for (int k = 0; k < 4; ++k) {
        std::vector<int32_t> out = message(1, k, 3000);
        comm.send(out.data(), out.size(), DataType::kInt32, 0);
      }
    }
    if (r != 0) {
      comm.barrier();
      return;
    }
    const size_t capacity = lengthOf(1, 3, 3000);
    std::vector<std::vector<int32_t>> bufs(4, std::vector<int32_t>(capacity, kUntouched));
    std::vector<Request> requests(4);
    requests[0] = comm.recvAnySourceAsync(bufs[0].data(), capacity, DataType::kInt32);
    requests[1] = comm.recvAsync(bufs[1].data(), lengthOf(1, 1, 3000), DataType::kInt32, 1);
    requests[2] = comm.recvAsync(bufs[2].data(), lengthOf(1, 2, 3000), DataType::kInt32, 1);
    requests[3] = comm.recvAnySourceAsync(bufs[3].data(), capacity, DataType::kInt32);
    for (int k = 0; k < 4; ++k) {
      requests[k].wait();
      const RecvResult got = requests[k].received();
      EXPECT_EQ(got.source, 1) << "receive " << k;
      if (k == 1 || k == 2) {  // directed receives: exactly their size, the rest untouched
        bufs[k].resize(lengthOf(1, k, 3000));
      }
      expectReceived(bufs[k], got, 1, k, 3000);
    }
    comm.barrier();
  });
  expectNoErrors(errors);
}

TEST(AnySource, EmptySendsAndReceivesTakeNoNumber) {
  // Sends and receives of 0 elements move nothing; around them the numbering per peer (which an
  // any-source receive that matched that peer counts in) must still agree.
  auto errors = runRanks(3, optionsFor("shm", 20), [&](Communicator& comm) {
    const int r = comm.rank();
    int32_t none = 0;
    if (r == 1) {
      for (int k = 0; k < 2; ++k) {
        comm.send(&none, 0, DataType::kInt32, 0);
        std::vector<int32_t> out = message(1, k, 60);
        comm.send(out.data(), out.size(), DataType::kInt32, 0);
      }
    } else if (r == 0) {
      std::vector<int32_t> first(lengthOf(1, 0, 60) + 9, kUntouched);
      std::vector<int32_t> second(lengthOf(1, 1, 60), kUntouched);
      comm.recv(&none, 0, DataType::kInt32, 1);
      const RecvResult got = comm.recvAnySource(first.data(), first.size(), DataType::kInt32);
      EXPECT_EQ(got.source, 1);
      expectReceived(first, got, 1, 0, 60);
      comm.recv(&none, 0, DataType::kInt32, 1);
      comm.recv(second.data(), second.size(), DataType::kInt32, 1);
      expectReceived(second, RecvResult{1, second.size() * sizeof(int32_t)}, 1, 1, 60);
    }
    comm.barrier();
  });
  expectNoErrors(errors);
}

TEST(AnySource, ALargerMessageThanTheBufferIsAMismatchNamingBothSizes) {
  auto errors = runRanks(3, optionsFor("shm", 20), [&](Communicator& comm) {
    const int r = comm.rank();
    if (r == 2) {
      std::vector<int32_t> out = message(2, 0, 100);
      comm.send(out.data(), out.size(), DataType::kInt32, 0, 5);
    }
    if (r != 0) {
      // Rank 0's failure reaches every peer: their next call fails.
      EXPECT_THROW(comm.barrier(), Error);
      return;
    }
    std::vector<int32_t> buf(50, kUntouched);
    try {
      comm.recvAnySource(buf.data(), buf.size(), DataType::kInt32, 5);
      ADD_FAILURE() << "a message of " << lengthOf(2, 0, 100) << " elements fit in 50";
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_EQ(e.code(), ErrorCode::kMismatch) << what;
      for (const std::string& part :
           {std::string("rank 0"), std::string("recv from any source"), std::string("tag 5"),
            std::string("peer rank 2"),
            std::to_string(lengthOf(2, 0, 100)) + " x int32",
            std::string("buffer's 50 elements (200 bytes)")}) {
        EXPECT_NE(what.find(part), std::string::npos) << "no \"" << part << "\" in: " << what;
      }
    }
    EXPECT_TRUE(std::all_of(buf.begin(), buf.end(), [](int32_t v) { return v == kUntouched; }))
        << "the buffer was written";
  });
  EXPECT_EQ(errorText(errors[0]), "");
  EXPECT_EQ(errorText(errors[1]), "");
  EXPECT_EQ(errorText(errors[2]), "");
}

TEST(AnySource, ATimeoutNamesTheRankTheCallTheTagAndTheSize) {
  // Rank 0 waits 1 s; its peers, in a barrier rank 0 never joins, 30 s: rank 0's timeout comes
  // first and its failure ends theirs.
  auto errors = runRanksEach(
      3, [](int r) { return optionsFor("shm", r == 0 ? 1 : 30); }, [&](Communicator& comm) {
    if (comm.rank() != 0) {
      EXPECT_THROW(comm.barrier(), Error);
      return;
    }
    std::vector<float> buf(10);
    const auto start = Clock::now();
    try {
      comm.recvAnySource(buf.data(), buf.size(), DataType::kFloat32, 9);
      ADD_FAILURE() << "a receive nobody sends to finished";
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_EQ(e.code(), ErrorCode::kTimeout) << what;
      for (const char* part : {"rank 0", "recv from any source", "tag 9", "10 x float",
                               "40 bytes", "waiting to receive from any peer"}) {
        EXPECT_NE(what.find(part), std::string::npos) << "no \"" << part << "\" in: " << what;
      }
    }
    const double took = std::chrono::duration<double>(Clock::now() - start).count();
    EXPECT_GE(took, 0.9);
    EXPECT_LT(took, 10.0);
  });
  expectNoErrors(errors);
}

TEST(AnySource, RefusesZeroElementsAndNegativeTags) {
  auto errors = runRanks(2, optionsFor("shm"), [&](Communicator& comm) {
    int32_t v = 0;
    try {
      comm.recvAnySource(&v, 0, DataType::kInt32, 0);
      ADD_FAILURE() << "0 elements accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidUsage) << e.what();
      EXPECT_NE(std::string(e.what()).find("of 0 elements"), std::string::npos) << e.what();
    }
    try {
      comm.recvAnySource(&v, 1, DataType::kInt32, -3);
      ADD_FAILURE() << "tag -3 accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidUsage) << e.what();
      EXPECT_NE(std::string(e.what()).find("tag -3"), std::string::npos) << e.what();
    }
    // The communicator still works; a directed receive still refuses peer -1.
    EXPECT_THROW(comm.recv(&v, 1, DataType::kInt32, -1), Error);
    comm.barrier();
  });
  expectNoErrors(errors);
}

}  // namespace
}  // namespace braid::testing
