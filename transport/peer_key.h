// Reading a peer's published value from the job's KeyValue while connecting: one place for the
// error every backend gives when it never comes (or the store goes away), naming this rank, the
// peer, the backend and the step. Internal to transport/.
#pragma once

#include <optional>
#include <string>

#include "transport/transport.h"

namespace braid::transport {

/// kv.get(key, deadline); a timeout becomes "rank R: <backend> connect timed out waiting for
/// peer rank P to <what> (key 'K')", any other error "rank R: <backend> connect, waiting for peer
/// rank P to <what>: <error>", with the error's code.
std::string getPeerKey(KeyValue& kv, const std::string& key, Deadline deadline, int rank, int peer,
                       const char* backend, const char* what);

/// One look at `key`, not waiting: its value, or nullopt while it is not set. A failure other
/// than "not set" is thrown as getPeerKey's.
std::optional<std::string> probePeerKey(KeyValue& kv, const std::string& key, int rank, int peer,
                                        const char* backend, const char* what);

}  // namespace braid::transport
