// Where communicators come from: the entry points fromStore, fromEnvironment (torchrun variables
// or mpirun) and unique ids, each with its store. The creation steps are in comm/create/.
#include <arpa/inet.h>
#include <fmt/format.h>
#include <ifaddrs.h>
#include <net/if.h>

#include <cstring>
#include <map>
#include <mutex>

#include "comm/bootstrap/address.h"
#include "comm/bootstrap/secret.h"
#include "comm/bootstrap/server.h"
#include "comm/bootstrap/tcp_store.h"
#include "comm/detail/create.h"
#include "comm/detail/state.h"
#include "common/config.h"
#include "common/env.h"
#include "common/log.h"

namespace braid {

#if BRAID_HAVE_MPI
Communicator fromMpiEnvironment(const Options& options);  // comm/mpi_init.cc
#endif

namespace {

// Options::secret, else BRAID_SECRET (or the insecure default).
std::string secretOf(const Options& options) {
  return options.secret.empty() ? bootstrap::jobSecret() : options.secret;
}

// Options' say on where and as whom to join, over the entry point's defaults.
create::Joining joining(const Options& options, const std::string& secret,
                        const std::string& defaultAddress) {
  create::Joining j;
  j.prefix = options.storePrefix.empty() ? "braid" : options.storePrefix;
  j.secret = secret;
  j.advertiseAddress = options.advertiseAddress.empty() ? defaultAddress : options.advertiseAddress;
  return j;
}

// Runs the creation steps (comm/detail/create.h) on a state whose store is set.
void connectState(CommState& state, const create::Joining& joining) {
  const create::Meeting meeting = create::rendezvous(state, joining);
  const create::Plan plan = create::plan(state, meeting, joining);
  create::connect(state, meeting, plan);
}

std::shared_ptr<CommState> makeState(std::shared_ptr<Store> store, int rank, int size,
                                     const Options& options) {
  BRAID_ENFORCE(size >= 1 && rank >= 0 && rank < size, ErrorCode::kInvalidUsage,
                "rank {} is outside 0..{} (world size {})", rank, size - 1, size);
  setLogRank(rank);
  auto state = CommState::make(rank, size, resolveOptions(options));
  state->store = std::move(store);
  return state;
}

// The servers this process started for unique ids, by port, until a rank here takes one over.
std::mutex gServersMutex;
std::map<int, std::unique_ptr<bootstrap::StoreServer>> gServers;

constexpr char kIdMagic[4] = {'B', 'R', 'D', '1'};

}  // namespace

std::string hostAddress() {
  if (auto forced = envString("BRAID_HOST_ADDR")) return *forced;
  std::string found = "127.0.0.1";
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return found;
  for (ifaddrs* it = list; it != nullptr; it = it->ifa_next) {
    if (it->ifa_addr == nullptr || it->ifa_addr->sa_family != AF_INET) continue;
    if ((it->ifa_flags & IFF_UP) == 0 || (it->ifa_flags & IFF_LOOPBACK) != 0) continue;
    char text[INET_ADDRSTRLEN];
    auto* sin = reinterpret_cast<sockaddr_in*>(it->ifa_addr);
    inet_ntop(AF_INET, &sin->sin_addr, text, sizeof text);
    found = text;
    break;
  }
  freeifaddrs(list);
  return found;
}

namespace {

// Rank 0's store for a torchrun-style launch, listening on MASTER_ADDR's address (as this host
// resolves it; BRAID_STORE_BIND overrides) rather than on every interface.
std::unique_ptr<bootstrap::StoreServer> hostStore(const bootstrap::StoreAddress& address, int size,
                                                  const std::string& secret) {
  bootstrap::StoreServer::Options so;
  so.port = address.port;
  so.worldSize = size;
  so.secret = secret;
  try {
    so.bindAddress = bootstrap::storeBindAddress(address.host);
    // A name such as Debian's hostname entry may resolve to loopback here while other hosts
    // resolve it to the real address: their ranks could never reach the store.
    const auto local = envInt("LOCAL_WORLD_SIZE");
    if (so.bindAddress.rfind("127.", 0) == 0 && local && *local < size) {
      BRAID_WARN(
          "rank 0: MASTER_ADDR={} is {} on this host, a loopback address, but the job has ranks "
          "on other hosts, which cannot reach the bootstrap store there; set MASTER_ADDR to an "
          "address they can reach (or BRAID_STORE_BIND=0.0.0.0)",
          address.host, so.bindAddress);
    }
    return std::make_unique<bootstrap::StoreServer>(so);
  } catch (const Error& e) {
    fail(e.code(), "rank 0: cannot host the bootstrap store at MASTER_ADDR:MASTER_PORT={}: {}",
         address.toString(), e.what());
  }
}

}  // namespace

Communicator Communicator::fromStore(std::shared_ptr<Store> store, int rank, int size,
                                     const Options& options) {
  BRAID_ENFORCE(store != nullptr, ErrorCode::kInvalidUsage,
                "rank {}: Communicator::fromStore was given no store", rank);
  auto state = makeState(std::move(store), rank, size, options);
  connectState(*state, joining(options, secretOf(options), "127.0.0.1"));
  return Communicator(state);
}

std::vector<int> Communicator::nodeOf() const { return state_->nodeOf; }

Communicator Communicator::fromEnvironment(const Options& options) {
  if (!envString("RANK") && envString("OMPI_COMM_WORLD_RANK")) {
#if BRAID_HAVE_MPI
    return fromMpiEnvironment(options);
#else
    fail(ErrorCode::kInvalidUsage,
         "launched by mpirun, but this braid was built without MPI; rebuild with "
         "-DBRAID_WITH_MPI=ON or set RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT");
#endif
  }
  auto rank = envInt("RANK");
  auto size = envInt("WORLD_SIZE");
  BRAID_ENFORCE(rank.has_value(), ErrorCode::kInvalidUsage,
                "environment variable RANK is not set (launch with braidrun, torchrun or mpirun)");
  BRAID_ENFORCE(size.has_value(), ErrorCode::kInvalidUsage,
                "environment variable WORLD_SIZE is not set (launch with braidrun, torchrun or "
                "mpirun)");
  BRAID_ENFORCE(*size >= 1 && *rank >= 0 && *rank < *size, ErrorCode::kInvalidUsage,
                "RANK={} is outside 0..WORLD_SIZE-1 (WORLD_SIZE={})", *rank, *size);
  const bootstrap::StoreAddress address = bootstrap::StoreAddress::fromEnvironment();
  const ResolvedOptions resolved = resolveOptions(options);
  const std::string secret = secretOf(options);
  std::unique_ptr<bootstrap::StoreServer> server;
  if (*rank == 0) server = hostStore(address, static_cast<int>(*size), secret);
  bootstrap::TcpStore::Options co;
  co.worldSize = static_cast<int>(*size);
  co.secret = secret;
  co.timeoutSeconds = resolved.timeoutSeconds;
  co.rank = static_cast<int>(*rank);
  auto store =
      std::make_shared<bootstrap::TcpStore>(address, co, Deadline::after(resolved.timeoutSeconds));
  const std::string local = store->localAddress();
  auto state = makeState(store, static_cast<int>(*rank), static_cast<int>(*size), options);
  state->server = std::move(server);
  connectState(*state, joining(options, secret, local));
  return Communicator(state);
}

UniqueId Communicator::uniqueId() {
  const std::string host = hostAddress();
  bootstrap::StoreServer::Options so;
  so.secret = bootstrap::randomSecret(16);
  so.bindAddress = bootstrap::storeBindAddress(host);  // where the id sends the ranks
  auto server = std::make_unique<bootstrap::StoreServer>(so);
  const int port = server->port();
  UniqueId id;
  std::memcpy(id.bytes.data(), kIdMagic, 4);
  std::snprintf(id.bytes.data() + 4, 20, "%s", host.c_str());
  id.bytes[24] = static_cast<char>(port >> 8);
  id.bytes[25] = static_cast<char>(port & 0xff);
  std::snprintf(id.bytes.data() + 26, 100, "%s", so.secret.c_str());
  std::lock_guard<std::mutex> lock(gServersMutex);
  gServers[port] = std::move(server);
  return id;
}

Communicator Communicator::fromUniqueId(const UniqueId& id, int rank, int size,
                                        const Options& options) {
  BRAID_ENFORCE(std::memcmp(id.bytes.data(), kIdMagic, 4) == 0, ErrorCode::kInvalidUsage,
                "rank {}: not a braid unique id (bad magic); make it with "
                "Communicator::uniqueId() on one rank and pass its bytes unchanged",
                rank);
  bootstrap::StoreAddress address;
  address.host = std::string(id.bytes.data() + 4, strnlen(id.bytes.data() + 4, 20));
  address.port =
      (static_cast<unsigned char>(id.bytes[24]) << 8) | static_cast<unsigned char>(id.bytes[25]);
  const std::string secret(id.bytes.data() + 26, strnlen(id.bytes.data() + 26, 100));
  const ResolvedOptions resolved = resolveOptions(options);
  bootstrap::TcpStore::Options co;
  co.worldSize = size;
  co.secret = secret;
  co.timeoutSeconds = resolved.timeoutSeconds;
  co.rank = rank;
  auto store =
      std::make_shared<bootstrap::TcpStore>(address, co, Deadline::after(resolved.timeoutSeconds));
  auto state = makeState(store, rank, size, options);
  {
    std::lock_guard<std::mutex> lock(gServersMutex);
    auto it = gServers.find(address.port);
    if (it != gServers.end()) {
      state->server = std::move(it->second);
      gServers.erase(it);
    }
  }
  connectState(*state, joining(options, secret, store->localAddress()));
  return Communicator(state);
}

}  // namespace braid
