// The bootstrap store's lifetime around a communicator: each rank lets go of its store connection
// once its own init is done, and the rank hosting the store keeps it up in destroy until every
// other rank has let go (or died), bounded by the communicator's timeout.
#include "comm/bootstrap/server.h"
#include "comm/state.h"
#include "common/log.h"

namespace braid {

void leaveRendezvous(CommState& state) {
  // Nothing uses the store after init. Closing this rank's connection now is how it tells the
  // host it is done (a rank that dies closes it too), so the host's destroy knows whom to wait
  // for. A store the caller passed in (CommFactory::fromStore) stays open while the caller holds
  // it.
  state.store.reset();
}

void closeRendezvous(CommState& state, bool connected) {
  if (!state.server) return;
  // Only a communicator that finished init and never failed waits: after a failed init, a failed
  // call or an abort the peers are failing anyway and learn it sooner from a closed store.
  bool failed = state.aborted.load();
  {
    std::lock_guard<std::mutex> lock(state.errorMutex);
    failed = failed || state.broken.has_value();
  }
  const bool wait = connected && !failed;
  if (wait) {
    const size_t open =
        state.server->waitForClientsToLeave(Deadline::after(state.options.timeoutSeconds));
    if (open > 0) {
      BRAID_WARN(
          "rank {}: destroy: {} rank(s) still connected to the bootstrap store this rank hosts "
          "after {} s (BRAID_TIMEOUT); closing it, so their init fails",
          state.rank, open, state.options.timeoutSeconds);
    }
  }
  state.server.reset();
}

}  // namespace braid
