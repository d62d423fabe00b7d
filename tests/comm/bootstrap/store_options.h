// Options of a test store server and its clients, shared by the store tests: one job secret,
// loopback only.
#pragma once

#include <string>
#include <utility>

#include "comm/bootstrap/server.h"
#include "comm/bootstrap/tcp_store.h"

namespace braid::bootstrap {

inline constexpr char kSecret[] = "test-secret-0123456789";

inline TcpStore::Options clientOptions(int world = 4, std::string secret = kSecret,
                                       int rank = -1) {
  TcpStore::Options options;
  options.rank = rank;
  options.worldSize = world;
  options.secret = std::move(secret);
  options.timeoutSeconds = 10;
  return options;
}

inline StoreServer::Options serverOptions(int world = 4) {
  StoreServer::Options options;
  options.worldSize = world;
  options.secret = kSecret;
  options.bindAddress = "127.0.0.1";
  return options;
}

}  // namespace braid::bootstrap
