// Creation step 3: connects the transport endpoint as planned, makes the executor over it and
// lets go of the store.
#include <fmt/format.h>

#include <algorithm>

#include "comm/detail/create.h"
#include "comm/detail/status_server.h"
#include "comm/exec/host_pieces.h"
#include "common/env.h"
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

// A communicator spanning hosts: this process's status server (status_server.h) listens where
// other hosts reach this rank, and each rank learns where the other hosts' ranks' servers are, so
// that a stuck-rank report can include them. Where the server cannot listen the rank publishes
// "" and reports name it; the job goes on.
void exchangeStatusAddresses(CommState& state, const Plan& plan, transport::KeyValue& kv) {
  const std::string& mine = state.hosts[state.rank];
  const bool spansHosts = std::any_of(state.hosts.begin(), state.hosts.end(),
                                      [&](const std::string& h) { return h != mine; });
  if (!spansHosts) return;
  std::string why;
  const std::string ip =
      plan.config.advertiseAddress.empty() ? "127.0.0.1" : plan.config.advertiseAddress;
  const std::string address = comm::startStatusServer(ip, &why);
  if (address.empty()) {
    BRAID_WARN(
        "rank {}: no status server, so other hosts' stuck-rank reports will lack this "
        "host's ranks: {}",
        state.rank, why);
  }
  kv.set(fmt::format("{}/status/{}", state.jobId, state.rank), address.empty() ? "-" : address);
  const Deadline deadline = Deadline::after(state.options.timeoutSeconds);
  state.statusAddresses.assign(state.size, "");
  for (int q = 0; q < state.size; ++q) {
    if (state.hosts[q] == mine) continue;
    const std::string theirs = kv.get(fmt::format("{}/status/{}", state.jobId, q), deadline);
    state.statusAddresses[q] = theirs == "-" ? "" : theirs;
  }
}

}  // namespace

void connect(CommState& state, const Meeting& meeting, const Plan& plan) {
  StoreKeyValue kv(*state.store);
  state.start(transport::connect(plan.config, kv),
              std::make_unique<comm::HostPieces>(envInt("BRAID_DEFERRED_PIECES", 0) != 0,
                                                 comm::slotStreamingFromEnv()),
              plan.oversubscribed);
  state.jobId = meeting.jobId;
  state.secret = plan.config.secret;
  state.hosts = meeting.hosts;
  exchangeStatusAddresses(state, plan, kv);
  testPeerMemory(state, plan, kv);
  leaveRendezvous(state);
  const int rank = state.rank;
  // The board is shared by the ranks with this rank's host key (whatever transport they use).
  const int onThisHost =
      static_cast<int>(std::count(meeting.hosts.begin(), meeting.hosts.end(), meeting.hosts[rank]));
  if (!state.options.statusBoard) {
    state.boardWhy = "BRAID_STATUS_BOARD=0 turned it off";
  } else {
    // One board per host of the job (ranks posing as hosts on one machine keep theirs apart).
    state.board = comm::StatusBoard::open(meeting.jobId + "@" + meeting.hosts[rank], rank,
                                          state.size, onThisHost, &state.boardWhy);
  }
  if (!state.board && state.options.statusBoard)
    BRAID_WARN("rank {}: no status board for stuck-rank reports: {}", rank, state.boardWhy);
  state.executor->runner().onWaiting([board = state.board.get()](const std::string& what) {
    if (board != nullptr) board->waiting(what);
  });
  registerForStatusSignal(state.self);
  BRAID_INFO(
      "rank {}/{}: connected (job {}, host {}, node {} of {}, chunk {} B x {} slots, {} "
      "channel(s), {} local ranks{})",
      rank, state.size, meeting.jobId, meeting.hosts[rank], state.nodeOf[rank], plan.nodes,
      plan.config.slotBytes, plan.config.slots, plan.config.channels, plan.localRanks,
      plan.oversubscribed
          ? fmt::format(", {} ranks on this machine, more than its cores: waits yield",
                        plan.machineRanks)
          : std::string());
}

}  // namespace braid::create
