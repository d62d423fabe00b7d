// Host buffers the ranks of one host map into each other: the mapped single copy
// (comm/exec/single_copy.h). braid::memAlloc puts each allocation in a memory file of its own
// (memfd_create), so a peer process can map the same pages: it opens the owner's descriptor
// through /proc/<pid>/fd/<n> (allowed where process_vm_readv is, ptrace read access, which
// peer_memory.h's probe tests at init) and mmaps it. Reads and writes of a peer's buffer are then
// plain loads and stores: no system call and no pages pinned per block, as with
// process_vm_readv.
//
// Why a mapping never reaches the wrong memory: an allocation is named by its owner's
// processToken() and a serial that counts up per process and is never reused; the memory file's
// name carries both, and a peer reads the name behind /proc/<pid>/fd/<n> (before and after it
// opens it) and maps only a file of that name, so a descriptor number reused after a free, or a
// pid reused by another process, maps nothing. A peer's mapping keeps the pages alive after the
// owner frees them: a late store from a peer lands in memory nobody else uses, never in a later
// allocation (each allocation is a new file).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace braid::transport {

/// Where a range of bytes lies in a shared allocation, as its owner publishes it to peers.
struct SharedRange {
  int64_t fd = -1;       ///< the owner's descriptor of the memory file; -1: not shared memory
  uint64_t serial = 0;   ///< the allocation's number in its owner's process
  uint64_t offset = 0;   ///< of the range's first byte from the allocation's start
  uint64_t bytes = 0;    ///< the whole allocation's size
};

/// A new allocation of at least `bytes` (a whole number of pages; 0 gives one page), zeroed,
/// page-aligned, that peers on this host can map. Throws braid::Error (kSystemError) naming
/// the size and the failed call.
void* allocateShared(size_t bytes);
/// Frees an allocateShared() allocation (its first byte). Throws kInvalidUsage for any other
/// pointer. Peers that mapped it keep their pages until they unmap them.
void freeShared(void* p);
/// Whether [p, p + bytes) lies inside one allocateShared() allocation; fills `out` if so.
bool findShared(const void* p, size_t bytes, SharedRange* out);

/// A process's mappings of its peers' shared allocations, made on first use and kept (at most
/// kMaxMappings, the least recently used unmapped first) until destruction. Not thread-safe:
/// one per communicator, used by the thread running its op.
class SharedMappings {
 public:
  static constexpr size_t kMaxMappings = 32;
  SharedMappings() = default;
  SharedMappings(const SharedMappings&) = delete;
  SharedMappings& operator=(const SharedMappings&) = delete;
  ~SharedMappings();

  /// This process's address of byte `range.offset` of the allocation `range` names in process
  /// `pid` (whose processToken() is `token`); nullptr with `why` filled if it cannot be mapped.
  char* map(int64_t pid, uint64_t token, const SharedRange& range, std::string* why);
  size_t size() const { return entries_.size(); }

 private:
  struct Entry {
    int64_t pid;
    uint64_t token;
    uint64_t serial;
    char* base;
    size_t bytes;
    uint64_t lastUse;
  };
  std::vector<Entry> entries_;
  uint64_t uses_ = 0;
};

}  // namespace braid::transport
