// Creating communicators: options from the environment, the rendezvous (torchrun variables, a
// unique id, or mpirun), host grouping, and connecting the transport endpoint.
#include <arpa/inet.h>
#include <fmt/format.h>
#include <ifaddrs.h>
#include <net/if.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>

#include "comm/bootstrap/address.h"
#include "comm/bootstrap/secret.h"
#include "comm/bootstrap/server.h"
#include "comm/bootstrap/tcp_store.h"
#include "comm/detail/internal.h"
#include "comm/detail/state.h"
#include "common/config.h"
#include "common/env.h"
#include "common/log.h"
#include "topology/topology.h"

namespace braid {

#if BRAID_HAVE_MPI
Communicator fromMpiEnvironment(const Options& options);  // comm/mpi_init.cc
#endif

ResolvedOptions resolveOptions(const Options& o) {
  ResolvedOptions r;
  r.timeoutSeconds = o.timeoutSeconds > 0 ? o.timeoutSeconds : defaultTimeoutSeconds();
  r.transport = o.transport.empty() ? envString("BRAID_TRANSPORT").value_or("") : o.transport;
  r.transport = transport::checkForcedKind(r.transport);  // "" = the best kind per peer
  r.algorithm = o.algorithm;
  if (r.algorithm == Algorithm::kAuto) {
    if (auto name = envString("BRAID_ALGO")) {
      BRAID_ENFORCE(
          parseAlgorithm(*name, &r.algorithm), ErrorCode::kInvalidUsage,
          "unknown algorithm BRAID_ALGO='{}': choose auto, ring, oneshot, chain, tree or hier",
          *name);
    }
  }
  const std::optional<size_t> chunkEnv = envBytes("BRAID_CHUNK");
  r.chunkSet = o.chunkBytes != 0 || chunkEnv.has_value();
  size_t chunk = o.chunkBytes ? o.chunkBytes : chunkEnv.value_or(comm::defaultSlotBytes(1));
  BRAID_ENFORCE(chunk >= 64 && chunk <= (64u << 20) && chunk % 8 == 0, ErrorCode::kInvalidUsage,
                "chunk size {} (BRAID_CHUNK) must be a multiple of 8 between 64 B and 64 MiB",
                chunk);
  r.slotBytes = chunk;
  r.slots = static_cast<int>(envInt("BRAID_SLOTS", 8));
  BRAID_ENFORCE(r.slots >= 2 && r.slots <= 64, ErrorCode::kInvalidUsage,
                "BRAID_SLOTS={} must be between 2 and 64", r.slots);
  r.streamBytes = envBytes("BRAID_STREAM_BYTES").value_or(r.streamBytes);
  const std::optional<int64_t> channelsEnv = envInt("BRAID_CHANNELS");
  r.channelsSet = o.channels > 0 || channelsEnv.has_value();
  r.channels = o.channels > 0 ? o.channels
                              : static_cast<int>(channelsEnv.value_or(comm::defaultChannels(1)));
  BRAID_ENFORCE(r.channels >= 1 && r.channels <= 16, ErrorCode::kInvalidUsage,
                "channel count {} (BRAID_CHANNELS) must be between 1 and 16", r.channels);
  r.hostName = o.hostName;
  return r;
}

namespace {

// Connects `state` (rank, size, options, store set) to its peers.
void connectState(CommState& state, const std::string& prefix, const std::string& address,
                  const std::string& secret) {
  auto& store = *state.store;
  const double timeout = state.options.timeoutSeconds;
  const int rank = state.rank, size = state.size;
  // One job id per communicator names its shm segments and transport keys.
  std::string jobId;
  if (rank == 0) {
    jobId = bootstrap::randomSecret(6);
    store.set(prefix + "/jobid", jobId);
  } else {
    try {
      jobId = store.get(prefix + "/jobid", Deadline::after(timeout));
    } catch (const Error& e) {
      fail(e.code(), "rank {}: rank 0 did not start the communicator within {} s ({})", rank,
           timeout, e.what());
    }
  }
  const std::string host =
      state.options.hostName.empty() ? topology::hostFingerprint() : state.options.hostName;
  store.set(fmt::format("{}/{}/host/{}", prefix, jobId, rank), host);
  store.set(fmt::format("{}/{}/cpus/{}", prefix, jobId, rank), topology::cpuSetText());
  transport::EndpointConfig config;
  config.rank = rank;
  config.size = size;
  // The double binary tree runs one tree per channel: open two whenever it may run.
  config.channels = state.options.channels;
  if (state.options.algorithm == Algorithm::kAuto || state.options.algorithm == Algorithm::kTree) {
    config.channels =
        std::max(config.channels, comm::channelsUsed(Algorithm::kTree, state.options.channels));
  }
  config.slots = state.options.slots;
  config.slotBytes = state.options.slotBytes;
  config.jobId = jobId;
  config.secret = secret;
  config.advertiseAddress = address;
  config.timeoutSeconds = timeout;
  const Deadline hostDeadline = Deadline::after(timeout);
  // A peer's published value; a failure names the peer (it may have died during init).
  auto peerValue = [&](int q, const char* what) {
    try {
      return store.get(fmt::format("{}/{}/{}/{}", prefix, jobId, what, q), hostDeadline);
    } catch (const Error& e) {
      fail(e.code(),
           "rank {}: init: peer rank {} did not publish its {} within {} s (did it fail or "
           "exit?): {}",
           rank, q, what, timeout, e.what());
    }
  };
  std::vector<std::string> hosts(size);  // host key per rank
  for (int q = 0; q < size; ++q) hosts[q] = q == rank ? host : peerValue(q, "host");
  // The backend of each peer (BRAID_TRANSPORT forcing, else shm > ucx > tcp): transport's choice.
  config.peerKinds = transport::chooseKinds(rank, hosts, state.options.transport);
  // Node of each rank: the index of the first rank with its host key, renumbered densely.
  state.nodeOf.assign(size, 0);
  std::map<std::string, int> nodeByHost;
  for (int q = 0; q < size; ++q) {
    auto [it, fresh] = nodeByHost.emplace(hosts[q], static_cast<int>(nodeByHost.size()));
    state.nodeOf[q] = it->second;
  }
  // Across hosts the defaults are larger slots and more lanes (comm::defaultSlotBytes). Given
  // values win.
  if (const int nodes = static_cast<int>(nodeByHost.size()); nodes > 1) {
    if (!state.options.chunkSet) state.options.slotBytes = comm::defaultSlotBytes(nodes);
    if (!state.options.channelsSet) state.options.channels = comm::defaultChannels(nodes);
    config.slotBytes = state.options.slotBytes;
    config.channels = std::max(config.channels, state.options.channels);
  }
  // Every rank's hardware descriptor, so all hold the same cluster graph for the tuner (or the
  // graph of BRAID_TOPO_FILE, e.g. a cluster described by hand).
  store.set(fmt::format("{}/{}/topo/{}", prefix, jobId, rank),
            topology::serializeDescriptor(topology::localDescriptor()));
  std::vector<topology::RankDescriptor> descriptors(size);
  for (int q = 0; q < size; ++q) {
    descriptors[q] = topology::parseDescriptor(peerValue(q, "topo"));
    descriptors[q].host = hosts[q];  // Options::hostName may pose as another host
  }
  topology::ClusterGraph graph = topology::buildGraph(descriptors);
  if (auto loaded = topology::graphFromEnvironment(size)) graph = std::move(*loaded);
  topology::dumpGraphIfAsked(graph, rank);
  state.tunerModel = comm::makeTunerModel(std::move(graph));
  // Do the ranks of this host outnumber the cores they may run on together (mpirun binding one
  // rank per core is not oversubscribed; 4 unbound ranks on 2 cores are)?
  std::vector<std::string> localCpus;
  for (int q = 0; q < size; ++q) {
    if (q == rank || config.peerKinds[q] == transport::Kind::kShm) {
      localCpus.push_back(peerValue(q, "cpus"));
    }
  }
  const bool oversubscribed =
      static_cast<int>(localCpus.size()) > topology::cpuCountOfUnion(localCpus);
  state.endpoint = transport::connect(config, store);
  state.executor =
      std::make_unique<comm::HostExecutor>(*state.endpoint, state.aborted, oversubscribed);
  leaveRendezvous(state);
  BRAID_INFO(
      "rank {}/{}: connected (job {}, host {}, node {} of {}, chunk {} B x {} slots, {} "
      "channel(s), {} local ranks{})",
      rank, size, jobId, host, state.nodeOf[rank], nodeByHost.size(), config.slotBytes,
      config.slots, config.channels, localCpus.size(),
      oversubscribed ? ", more than cores: waits yield" : "");
}

std::shared_ptr<CommState> makeState(std::shared_ptr<bootstrap::Store> store, int rank, int size,
                                     const Options& options) {
  BRAID_ENFORCE(size >= 1 && rank >= 0 && rank < size, ErrorCode::kInvalidUsage,
                "rank {} is outside 0..{} (world size {})", rank, size - 1, size);
  auto state = std::make_shared<CommState>(rank, size, resolveOptions(options));
  state->self = state;
  state->store = std::move(store);
  return state;
}

// The servers this process started for unique ids, by port, until a rank here takes one over.
std::mutex gServersMutex;
std::map<int, std::unique_ptr<bootstrap::StoreServer>> gServers;

constexpr char kIdMagic[4] = {'B', 'R', 'D', '1'};

std::string thisHostAddress() {
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

Communicator CommFactory::fromStore(std::shared_ptr<bootstrap::Store> store, int rank, int size,
                                    const Options& options, const std::string& prefix,
                                    const std::string& advertiseAddress) {
  auto state = makeState(std::move(store), rank, size, options);
  connectState(*state, prefix, advertiseAddress, bootstrap::jobSecret());
  return Communicator(state);
}

std::vector<int> CommFactory::nodeOf(const Communicator& comm) { return comm.state_->nodeOf; }

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
  const std::string secret = bootstrap::jobSecret();
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
  connectState(*state, "braid", local, secret);
  return Communicator(state);
}

UniqueId Communicator::uniqueId() {
  const std::string host = thisHostAddress();
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
  connectState(*state, "braid", store->localAddress(), secret);
  return Communicator(state);
}

}  // namespace braid
