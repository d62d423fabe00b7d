// transport/shared_buffer.h: allocations peers map (memAlloc), found by address; mapped through
// /proc/<pid>/fd in this process and from a child; a descriptor reused after a free, a wrong
// token, a freed allocation; the least recently used mapping dropped beyond the limit.
#include "transport/shared_buffer.h"

#include <unistd.h>

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "braid/error.hpp"
#include "tests/kit/processes.h"
#include "tests/support/skip.h"
#include "transport/peer_memory.h"

namespace braid::transport {
namespace {

ErrorCode codeOf(const std::function<void()>& fn, std::string* text) {
  try {
    fn();
  } catch (const Error& e) {
    *text = e.what();
    return e.code();
  }
  return ErrorCode::kOk;
}

TEST(SharedBuffer, AllocatedZeroedPageAlignedAndFoundByAnyAddressInside) {
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  char* p = static_cast<char*>(allocateShared(10000));
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % page, 0u);
  const size_t bytes = (10000 + page - 1) / page * page;
  for (size_t i = 0; i < bytes; ++i) ASSERT_EQ(p[i], 0) << i;
  SharedRange r;
  ASSERT_TRUE(findShared(p, 10000, &r));
  EXPECT_GE(r.fd, 0);
  EXPECT_EQ(r.offset, 0u);
  EXPECT_EQ(r.bytes, bytes);
  ASSERT_TRUE(findShared(p + 100, 50, &r));
  EXPECT_EQ(r.offset, 100u);
  EXPECT_TRUE(findShared(p + bytes - 1, 1, &r));
  EXPECT_FALSE(findShared(p + bytes - 1, 2, &r)) << "a range running past the allocation";
  EXPECT_FALSE(findShared(p + bytes, 0, &r) && r.offset > bytes);
  int onStack = 0;
  EXPECT_FALSE(findShared(&onStack, sizeof onStack, &r));
  std::vector<char> heap(64);
  EXPECT_FALSE(findShared(heap.data(), heap.size(), &r));

  char* q = static_cast<char*>(allocateShared(0));
  ASSERT_TRUE(findShared(q, 0, &r));
  EXPECT_EQ(r.bytes, page) << "0 bytes gives one page";
  SharedRange rq;
  ASSERT_TRUE(findShared(q, 1, &rq));
  EXPECT_NE(rq.serial, 0u);
  ASSERT_TRUE(findShared(p, 1, &r));
  EXPECT_NE(rq.serial, r.serial);
  freeShared(q);
  freeShared(p);
  EXPECT_FALSE(findShared(p, 1, &r)) << "freed";
}

TEST(SharedBuffer, FreeingAnythingElseIsAClearError) {
  std::string text;
  char* p = static_cast<char*>(allocateShared(4096));
  EXPECT_EQ(codeOf([&] { freeShared(p + 64); }, &text), ErrorCode::kInvalidUsage);
  EXPECT_NE(text.find("not the start of a braid memAlloc allocation"), std::string::npos) << text;
  freeShared(p);
  EXPECT_EQ(codeOf([&] { freeShared(p); }, &text), ErrorCode::kInvalidUsage) << "twice";
  int onStack = 0;
  EXPECT_EQ(codeOf([&] { freeShared(&onStack); }, &text), ErrorCode::kInvalidUsage);
}

TEST(SharedBuffer, MappedAgainInThisProcessTheSamePagesOutliveTheFree) {
  char* p = static_cast<char*>(allocateShared(3 * 4096));
  for (int i = 0; i < 3 * 4096; ++i) p[i] = static_cast<char>(i * 7);
  SharedRange r;
  ASSERT_TRUE(findShared(p + 4096, 4096, &r));
  SharedMappings maps;
  std::string why;
  char* m = maps.map(::getpid(), processToken(), r, &why);
  ASSERT_NE(m, nullptr) << why;
  EXPECT_NE(m, p + 4096) << "a mapping of its own";
  for (int i = 0; i < 4096; ++i) ASSERT_EQ(m[i], static_cast<char>((4096 + i) * 7)) << i;
  m[5] = 42;
  EXPECT_EQ(p[4096 + 5], 42) << "the same pages";
  // Mapped once: other ranges of the same allocation come from the cache.
  ASSERT_TRUE(findShared(p, 10, &r));
  char* m0 = maps.map(::getpid(), processToken(), r, &why);
  ASSERT_NE(m0, nullptr) << why;
  EXPECT_EQ(m0 + 4096, m);
  EXPECT_EQ(maps.size(), 1u);
  freeShared(p);
  EXPECT_EQ(m[5], 42) << "a peer's mapping keeps the pages";
  m[6] = 1;  // memory nobody else uses now: no fault, nothing else touched
}

TEST(SharedBuffer, AReusedDescriptorAWrongTokenOrNoAllocationMapNothing) {
  char* a = static_cast<char*>(allocateShared(4096));
  SharedRange ra;
  ASSERT_TRUE(findShared(a, 4096, &ra));
  freeShared(a);
  char* b = static_cast<char*>(allocateShared(4096));
  SharedRange rb;
  ASSERT_TRUE(findShared(b, 4096, &rb));
  SharedMappings maps;
  std::string why;
  EXPECT_EQ(maps.map(::getpid(), processToken(), ra, &why), nullptr)
      << "descriptor " << ra.fd << " now holds allocation " << rb.serial;
  EXPECT_NE(why.find("not its allocation"), std::string::npos) << why;
  EXPECT_EQ(maps.map(::getpid(), processToken() ^ 2, rb, &why), nullptr) << "another process";
  EXPECT_EQ(maps.map(::getpid(), processToken(), SharedRange{}, &why), nullptr);
  EXPECT_NE(why.find("not a braid memAlloc buffer"), std::string::npos) << why;
  EXPECT_NE(maps.map(::getpid(), processToken(), rb, &why), nullptr) << why;
  EXPECT_EQ(maps.size(), 1u);
  freeShared(b);
}

TEST(SharedBuffer, TheLeastRecentlyUsedMappingGoesBeyondTheLimit) {
  const size_t n = SharedMappings::kMaxMappings + 3;
  std::vector<char*> allocs(n);
  std::vector<SharedRange> ranges(n);
  SharedMappings maps;
  std::string why;
  for (size_t i = 0; i < n; ++i) {
    allocs[i] = static_cast<char*>(allocateShared(4096));
    allocs[i][0] = static_cast<char>(i);
    ASSERT_TRUE(findShared(allocs[i], 1, &ranges[i]));
    char* m = maps.map(::getpid(), processToken(), ranges[i], &why);
    ASSERT_NE(m, nullptr) << why;
    EXPECT_EQ(m[0], static_cast<char>(i));
    // The first stays the most recently used.
    ASSERT_NE(maps.map(::getpid(), processToken(), ranges[0], &why), nullptr) << why;
  }
  EXPECT_EQ(maps.size(), SharedMappings::kMaxMappings);
  char* again = maps.map(::getpid(), processToken(), ranges[1], &why);  // dropped, mapped anew
  ASSERT_NE(again, nullptr) << why;
  EXPECT_EQ(again[0], 1);
  EXPECT_EQ(maps.size(), SharedMappings::kMaxMappings);
  for (char* p : allocs) freeShared(p);
}

// A child's allocation mapped here (a parent may read its child's descriptors where Yama's
// ptrace_scope is 1; ranks are siblings, which the communicator probes at init).
TEST(SharedBuffer, AnotherProcesssAllocationIsMappedReadAndWritten) {
  int toParent[2], toChild[2];
  ASSERT_EQ(::pipe(toParent), 0);
  ASSERT_EQ(::pipe(toChild), 0);
  const pid_t child = testing::forkChild([&] {
    char* p = static_cast<char*>(allocateShared(1 << 20));
    for (int i = 0; i < (1 << 20); ++i) p[i] = static_cast<char>(i % 251);
    SharedRange r;
    if (!findShared(p + 4096, 8192, &r)) return 4;
    const uint64_t token = processToken();
    if (::write(toParent[1], &r, sizeof r) != sizeof r) return 5;
    if (::write(toParent[1], &token, sizeof token) != sizeof token) return 5;
    char go = 0;
    if (::read(toChild[0], &go, 1) != 1) return 6;
    return p[4096] == 99 ? 0 : 7;  // the parent's store, seen here
  });
  SharedRange r;
  uint64_t token = 0;
  ASSERT_EQ(::read(toParent[0], &r, sizeof r), static_cast<ssize_t>(sizeof r));
  ASSERT_EQ(::read(toParent[0], &token, sizeof token), static_cast<ssize_t>(sizeof token));
  SharedMappings maps;
  std::string why;
  char* m = maps.map(child, token, r, &why);
  if (m == nullptr) {
    char go = 1;
    (void)::write(toChild[1], &go, 1);
    testing::waitChild(child, Deadline::after(10));
    BRAID_SKIP_NO_DEVICE("this machine refuses another process's descriptors: " + why);
  }
  for (int i = 0; i < 8192; ++i) ASSERT_EQ(m[i], static_cast<char>((4096 + i) % 251)) << i;
  m[0] = 99;
  char go = 1;
  ASSERT_EQ(::write(toChild[1], &go, 1), 1);
  EXPECT_EQ(testing::waitChild(child, Deadline::after(10)), 0);
  for (int fd : {toParent[0], toParent[1], toChild[0], toChild[1]}) ::close(fd);
}

}  // namespace
}  // namespace braid::transport
