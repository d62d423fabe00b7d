// The bootstrap store's lifetime around a communicator: each rank lets go of its store connection
// once its own init is done, and the rank hosting the store keeps it up in destroy until every
// other rank has let go (or died), bounded by the communicator's timeout.
#include "comm/bootstrap/server.h"
#include "comm/detail/state.h"
#include "common/log.h"

namespace braid {

void leaveRendezvous(CommState& state) {
  // Nothing uses the store after init. Closing this rank's connection now is how it tells the
  // host it is done (a rank that dies closes it too), so the host's destroy knows whom to wait
  // for. A store the caller passed in (Communicator::fromStore) stays open while the caller holds
  // it.
  state.store.reset();
}

void closeRendezvous(CommState& state, bool connected) {
  if (!state.server) return;
  // A communicator that finished init waits, also after a failed call: a rank still connecting
  // then completes its init and hears of the failure from the transport (e.g. kMismatch) instead
  // of a closed store. Not after a failed init (the peers fail anyway, and sooner when the store
  // closes) or an abort() (the caller wants it torn down now).
  const bool wait = connected && !state.aborted.load();
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
