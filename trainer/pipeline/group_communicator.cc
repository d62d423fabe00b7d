#include "trainer/pipeline/group_communicator.h"

#include <fmt/format.h>

#include <array>
#include <cstring>
#include <memory>
#include <string>

#include "braid/store.hpp"
#include "comm/bootstrap/secret.h"
#include "common/error.h"

namespace braid::trainer {
namespace {

/// What world rank 0 tells every rank about the rendezvous store, as fixed-size bytes.
struct Rendezvous {
  int32_t port = 0;
  std::array<char, 64> address{};
  std::array<char, 64> secret{};
};

void copyText(std::array<char, 64>& to, const std::string& text) {
  BRAID_ENFORCE(text.size() < to.size(), ErrorCode::kInternal,
                "group communicator: '{}' is longer than {} bytes", text, to.size() - 1);
  std::memcpy(to.data(), text.data(), text.size());
}

}  // namespace

Communicator makeGroupCommunicator(Communicator& world, int color, int key, int groupSize) {
  BRAID_ENFORCE(groupSize >= 1 && key >= 0 && key < groupSize && color >= 0,
                ErrorCode::kInvalidUsage,
                "group communicator on world rank {}: key {} of a group of {}, color {}",
                world.rank(), key, groupSize, color);
  Rendezvous rv;
  std::unique_ptr<TcpStoreServer> server;
  if (world.rank() == 0) {
    TcpStoreServer::Options so;
    so.bindAddress = hostAddress();
    so.worldSize = world.size();
    so.secret = bootstrap::randomSecret(16);
    server = std::make_unique<TcpStoreServer>(so);
    rv.port = server->port();
    copyText(rv.address, so.bindAddress);
    copyText(rv.secret, so.secret);
  }
  world.broadcast(&rv, &rv, sizeof rv, DataType::kUint8, 0);

  TcpStoreOptions to;
  to.host = rv.address.data();
  to.port = rv.port;
  to.worldSize = world.size();
  to.secret = rv.secret.data();
  to.rank = world.rank();
  Options options;
  options.secret = to.secret;
  options.storePrefix = fmt::format("pipeline-group-{}", color);
  Communicator group = Communicator::fromStore(connectTcpStore(to), key, groupSize, options);
  world.barrier();  // every group is up: rank 0's store may close
  return group;
}

}  // namespace braid::trainer
