#include "trainer/ps/links.h"

#include <fmt/format.h>

#include "common/env.h"
#include "common/error.h"

namespace braid::trainer::ps {

PsLink::PsLink(int self, int peer, Communicator comm, double timeoutSeconds)
    : self_(self), peer_(peer), comm_(std::move(comm)), timeout_(timeoutSeconds) {}

Request PsLink::sendAsync(PsMessage& m) {
  return comm_.sendAsync(m.data(), m.floats(), DataType::kFloat32, 1 - comm_.rank());
}

Request PsLink::recvAsync(PsMessage& m) {
  return comm_.recvAsync(m.data(), m.floats(), DataType::kFloat32, 1 - comm_.rank());
}

std::string PsLink::describe(const Error& e, const char* op, size_t bytes) const {
  return fmt::format(
      "rank {}: {} of {} bytes with rank {} failed: {} (link ranks: 0 = server, "
      "1 = worker)",
      self_, op, bytes, peer_, e.what());
}

void PsLink::wait(Request& r, const char* op, const PsMessage& m) {
  try {
    r.wait(Deadline::after(timeout_));
  } catch (const Error& e) {
    throw Error(e.code(), describe(e, op, m.bytes()));
  }
}

PsLinks::PsLinks(Communicator& world, const PsLayout& layout) {
  const int rank = world.rank();
  const std::string host = envString("MASTER_ADDR").value_or("127.0.0.1");
  std::unique_ptr<TcpStoreServer> server;
  int64_t port = 0;
  if (rank == 0) {
    TcpStoreServer::Options so;
    so.bindAddress = host;
    server = std::make_unique<TcpStoreServer>(so);
    port = server->port();
  }
  world.broadcast(&port, &port, 1, DataType::kInt64, 0);
  TcpStoreOptions co;
  co.host = host;
  co.port = static_cast<int>(port);
  co.rank = rank;
  std::shared_ptr<Store> store = connectTcpStore(co);
  const double timeout = defaultTimeoutSeconds();
  for (int s = 0; s < layout.servers; ++s) {
    for (int w = layout.servers; w < layout.worldSize; ++w) {
      if (rank != s && rank != w) continue;
      Options o;
      o.storePrefix = fmt::format("ps-link-{}-{}", s, w);
      const int peer = rank == s ? w : s;
      links_[peer] = std::make_unique<PsLink>(
          rank, peer, Communicator::fromStore(store, rank == s ? 0 : 1, 2, o), timeout);
    }
  }
  store.reset();
  world.barrier();  // everyone is done with the store before rank 0 closes it
}

}  // namespace braid::trainer::ps
