// Creation step 3: connects the transport endpoint as planned, makes the executor over it and
// lets go of the store.
#include <algorithm>

#include "comm/detail/create.h"
#include "comm/exec/host_pieces.h"
#include "common/log.h"

namespace braid::create {
namespace {

// The transports' view of the store: they only set and get.
class StoreKeyValue final : public transport::KeyValue {
 public:
  explicit StoreKeyValue(Store& store) : store_(store) {}
  void set(const std::string& key, const std::string& value) override { store_.set(key, value); }
  std::string get(const std::string& key, Deadline deadline) override {
    return store_.get(key, deadline);
  }

 private:
  Store& store_;
};

}  // namespace

void connect(CommState& state, const Meeting& meeting, const Plan& plan) {
  StoreKeyValue kv(*state.store);
  state.start(transport::connect(plan.config, kv), std::make_unique<comm::HostPieces>(),
              plan.oversubscribed);
  leaveRendezvous(state);
  const int rank = state.rank;
  state.hosts = meeting.hosts;
  // The board is shared by the ranks with this rank's host key (whatever transport they use).
  const int onThisHost = static_cast<int>(
      std::count(meeting.hosts.begin(), meeting.hosts.end(), meeting.hosts[rank]));
  if (!state.options.statusBoard) {
    state.boardWhy = "BRAID_STATUS_BOARD=0 turned it off";
  } else {
    state.board =
        comm::StatusBoard::open(meeting.jobId, rank, state.size, onThisHost, &state.boardWhy);
  }
  if (!state.board && state.options.statusBoard) BRAID_WARN("rank {}: no status board for stuck-rank reports: {}", rank,
                               state.boardWhy);
  state.executor->runner().onWaiting([board = state.board.get()](const std::string& what) {
    if (board != nullptr) board->waiting(what);
  });
  registerForStatusSignal(state.self);
  BRAID_INFO(
      "rank {}/{}: connected (job {}, host {}, node {} of {}, chunk {} B x {} slots, {} "
      "channel(s), {} local ranks{})",
      rank, state.size, meeting.jobId, meeting.hosts[rank], state.nodeOf[rank], plan.nodes,
      plan.config.slotBytes, plan.config.slots, plan.config.channels, plan.localRanks,
      plan.oversubscribed ? ", more than cores: waits yield" : "");
}

}  // namespace braid::create
