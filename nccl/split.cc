// ncclCommSplit over braid's public API: the parent's ranks all-gather (color, key); in each
// color the rank that comes first by (key, parent rank) becomes rank 0 of the new communicator,
// makes its braid UniqueId and sends it to the others of its color over the parent; each then
// joins with fromUniqueId. Runs at once, also inside a group.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <vector>

#include "comm.h"
#include "errors.h"
#include "export.h"
#include "init.h"
#include "init_log.h"
#include "settings.h"

using namespace braid::nccl;
using braid::Communicator;
using braid::DataType;

namespace {

struct Member {
  int color, key, parentRank;
};

/// The parent ranks of `color`, in the new communicator's order.
std::vector<Member> membersOf(const std::vector<int32_t>& all, int color) {
  std::vector<Member> members;
  for (size_t i = 0; i + 2 < all.size(); i += 3)
    if (all[i] == color) members.push_back({all[i], all[i + 1], all[i + 2]});
  std::sort(members.begin(), members.end(), [](const Member& a, const Member& b) {
    return a.key != b.key ? a.key < b.key : a.parentRank < b.parentRank;
  });
  return members;
}

}  // namespace

extern "C" ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
                                      ncclConfig_t* config) {
  constexpr const char* kCall = "ncclCommSplit";
  ncclResult_t started = ncclSuccess;
  const ncclResult_t result = guard([&] {
    CommRef parentRef(comm, kCall);
    if (newcomm == nullptr) argumentError("ncclCommSplit: newcomm is NULL");
    *newcomm = nullptr;
    const int rank = parentRef->settings.rank;
    if (color < 0 && color != NCCL_SPLIT_NOCOLOR) {
      argumentError(fmt::format("rank {}: ncclCommSplit: color {} is negative (and not "
                                "NCCL_SPLIT_NOCOLOR)",
                                rank, color));
    }
    Communicator& parent = parentRef->host(kCall);
    const std::array<int32_t, 3> mine{color, key, rank};
    std::vector<int32_t> all(3 * size_t(parent.size()));
    parent.allGather(mine.data(), all.data(), 3, DataType::kInt32);
    if (color == NCCL_SPLIT_NOCOLOR) return;

    const std::vector<Member> members = membersOf(all, color);
    const int newRank = int(std::find_if(members.begin(), members.end(),
                                         [&](const Member& m) { return m.parentRank == rank; }) -
                            members.begin());
    const int newSize = int(members.size());
    braid::UniqueId id;
    if (newRank == 0) {
      id = Communicator::uniqueId();
      for (int i = 1; i < newSize; ++i)
        parent.send(id.bytes.data(), id.bytes.size(), DataType::kUint8, members[i].parentRank);
    } else {
      parent.recv(id.bytes.data(), id.bytes.size(), DataType::kUint8, members[0].parentRank);
    }

    CommSettings settings = config != nullptr ? settingsFrom(config, kCall) : parentRef->settings;
    settings.options = parentRef->settings.options;
    settings.rank = newRank;
    settings.size = newSize;
    settings.device = parentRef->settings.device;
    auto* child = new ncclComm(settings);
    started = startInit(
        child,
        [id, settings] {
          Communicator made =
              Communicator::fromUniqueId(id, settings.rank, settings.size, settings.options);
          logInit(settings, "ncclCommSplit");
          return made;
        },
        kCall);
    *newcomm = child;
  });
  return result == ncclSuccess ? started : result;
}
BRAID_NCCL_ALIAS(ncclCommSplit)
