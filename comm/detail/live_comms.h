// The communicators alive in this process, for what serves them from outside a call: the SIGUSR1
// reporter (comm/status_signal.cc) and the status server (comm/status_server.cc). Internal to
// comm/. Thread-safe; a forked child starts with none (its parent's are not its own).
#pragma once

#include <memory>
#include <vector>

namespace braid {

struct CommState;

/// Adds a communicator (forgotten by itself once it is destroyed).
void registerLive(const std::weak_ptr<CommState>& state);
/// Those still alive, in the order they were made.
std::vector<std::shared_ptr<CommState>> liveComms();

}  // namespace braid
