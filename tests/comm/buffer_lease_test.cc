// The buffer lease (comm/exec/buffer_lease.h): a peer borrows only the open epoch; the owner's
// close() returns only once every borrower gave the lease back, and borrowers see it closing
// meanwhile; one lease per (job, rank) in a process.
#include "comm/exec/buffer_lease.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace braid::comm {
namespace {

TEST(BufferLease, BorrowsOnlyTheOpenEpoch) {
  BufferLease lease;
  EXPECT_FALSE(lease.isOpen());
  EXPECT_FALSE(lease.borrow(0));
  const uint64_t first = lease.open();
  EXPECT_TRUE(lease.isOpen());
  EXPECT_NE(first, 0u);
  EXPECT_FALSE(lease.borrow(first + 1));
  EXPECT_FALSE(lease.borrow(0));
  ASSERT_TRUE(lease.borrow(first));
  EXPECT_FALSE(lease.closing());
  lease.giveBack();
  lease.close(0, 60);
  EXPECT_FALSE(lease.isOpen());
  EXPECT_TRUE(lease.closing());
  EXPECT_FALSE(lease.borrow(first));  // the owner left that op
  const uint64_t second = lease.open();
  EXPECT_NE(second, first);
  EXPECT_FALSE(lease.borrow(first));  // an earlier op's epoch never borrows a later op's buffers
  EXPECT_TRUE(lease.borrow(second));
  lease.giveBack();
  lease.close(0, 60);
  lease.close(0, 60);  // closing a closed lease does nothing
}

TEST(BufferLease, CloseReturnsOnlyOnceEveryBorrowerGaveItBack) {
  BufferLease lease;
  const uint64_t epoch = lease.open();
  ASSERT_TRUE(lease.borrow(epoch));
  ASSERT_TRUE(lease.borrow(epoch));
  std::atomic<bool> closed{false};
  std::thread owner([&] {
    lease.close(0, 60);
    closed = true;
  });
  // The borrowers see the owner leaving, and it waits for them.
  while (!lease.closing()) std::this_thread::yield();
  EXPECT_FALSE(lease.borrow(epoch));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(closed);
  lease.giveBack();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(closed);
  lease.giveBack();
  owner.join();
  EXPECT_TRUE(closed);
}

TEST(BufferLease, OneLeasePerJobAndRankInAProcess) {
  const auto a = BufferLease::of("job-a", 0);
  EXPECT_EQ(BufferLease::of("job-a", 0), a);
  EXPECT_NE(BufferLease::of("job-a", 1), a);
  EXPECT_NE(BufferLease::of("job-b", 0), a);
}

}  // namespace
}  // namespace braid::comm
