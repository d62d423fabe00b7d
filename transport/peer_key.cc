#include "transport/peer_key.h"

#include "common/error.h"

namespace braid::transport {

std::string getPeerKey(KeyValue& kv, const std::string& key, Deadline deadline, int rank, int peer,
                       const char* backend, const char* what) {
  try {
    return kv.get(key, deadline);
  } catch (const Error& e) {
    if (e.code() == ErrorCode::kTimeout) {
      fail(ErrorCode::kTimeout,
           "rank {}: {} connect timed out waiting for peer rank {} to {} (key '{}')", rank, backend,
           peer, what, key);
    }
    fail(e.code(), "rank {}: {} connect, waiting for peer rank {} to {}: {}", rank, backend, peer,
         what, e.what());
  }
}

std::optional<std::string> probePeerKey(KeyValue& kv, const std::string& key, int rank, int peer,
                                        const char* backend, const char* what) {
  try {
    // An expired deadline: every store looks once and answers (TcpStore: a get with timeout 0).
    return kv.get(key, Deadline::after(0));
  } catch (const Error& e) {
    if (e.code() == ErrorCode::kTimeout) return std::nullopt;
    fail(e.code(), "rank {}: {} connect, waiting for peer rank {} to {}: {}", rank, backend, peer,
         what, e.what());
  }
}

}  // namespace braid::transport
