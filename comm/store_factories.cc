// braid/store.hpp's factories: the public faces of comm/bootstrap/'s InMemoryStore, StoreServer
// and TcpStore. In braid_comm, whose every object libbraid.so carries.
#include "braid/store.hpp"
#include "comm/bootstrap/store.h"

namespace braid {

std::shared_ptr<Store> makeInMemoryStore() { return std::make_shared<bootstrap::InMemoryStore>(); }

struct TcpStoreServer::Impl {
  bootstrap::StoreServer server;
  explicit Impl(const bootstrap::StoreServer::Options& options) : server(options) {}
};

TcpStoreServer::TcpStoreServer(const Options& options) {
  bootstrap::StoreServer::Options so;
  so.bindAddress = options.bindAddress;
  so.port = options.port;
  so.worldSize = options.worldSize;
  so.secret = options.secret;
  impl_ = std::make_unique<Impl>(so);
}

TcpStoreServer::TcpStoreServer(TcpStoreServer&&) noexcept = default;
TcpStoreServer& TcpStoreServer::operator=(TcpStoreServer&&) noexcept = default;
TcpStoreServer::~TcpStoreServer() = default;

int TcpStoreServer::port() const { return impl_->server.port(); }

std::shared_ptr<Store> connectTcpStore(const TcpStoreOptions& options) {
  bootstrap::StoreAddress address;
  address.host = options.host;
  address.port = options.port;
  bootstrap::TcpStore::Options co;
  co.worldSize = options.worldSize;
  co.secret = options.secret;
  co.rank = options.rank;
  co.timeoutSeconds = options.timeoutSeconds > 0 ? options.timeoutSeconds : defaultTimeoutSeconds();
  return std::make_shared<bootstrap::TcpStore>(address, co, Deadline::after(co.timeoutSeconds));
}

}  // namespace braid
