// Creation step 1: the ranks meet in the store. Rank 0 draws the job id; every rank publishes a
// proof of its job secret, its host key, its CPU set and its hardware descriptor, then reads the
// others'. A rank whose secret differs is named on every rank, before anything is connected.
#include <fmt/format.h>

#include "comm/bootstrap/secret.h"
#include "comm/detail/create.h"
#include "common/error.h"

namespace braid::create {
namespace {

std::string drawOrReadJobId(const CommState& state, Store& store, const std::string& prefix) {
  if (state.rank == 0) {
    std::string jobId = bootstrap::randomSecret(6);
    store.set(prefix + "/jobid", jobId);
    return jobId;
  }
  const double timeout = state.options.timeoutSeconds;
  try {
    return store.get(prefix + "/jobid", Deadline::after(timeout));
  } catch (const Error& e) {
    fail(e.code(), "rank {}: rank 0 did not start the communicator within {} s ({})", state.rank,
         timeout, e.what());
  }
}

}  // namespace

Meeting rendezvous(const CommState& state, const Joining& joining) {
  Store& store = *state.store;
  const double timeout = state.options.timeoutSeconds;
  const int rank = state.rank, size = state.size;
  Meeting meeting;
  meeting.jobId = drawOrReadJobId(state, store, joining.prefix);
  auto key = [&](const char* what, int q) {
    return fmt::format("{}/{}/{}/{}", joining.prefix, meeting.jobId, what, q);
  };
  const std::string proof = bootstrap::secretProof(joining.secret, meeting.jobId);
  const std::string host =
      state.options.hostName.empty() ? topology::hostFingerprint() : state.options.hostName;
  const topology::RankDescriptor self = topology::localDescriptor();
  store.set(key("secret-proof", rank), proof);
  store.set(key("host", rank), host);
  store.set(key("cpus", rank), topology::cpuSetText());
  store.set(key("topo", rank), topology::serializeDescriptor(self));

  const Deadline deadline = Deadline::after(timeout);
  // A peer's published value; a failure names the peer (it may have died during init).
  auto peerValue = [&](int q, const char* what) {
    try {
      return store.get(key(what, q), deadline);
    } catch (const Error& e) {
      fail(e.code(),
           "rank {}: init: peer rank {} did not publish its {} within {} s (did it fail or "
           "exit?): {}",
           rank, q, what, timeout, e.what());
    }
  };
  for (int q = 0; q < size; ++q) {
    BRAID_ENFORCE(q == rank || peerValue(q, "secret-proof") == proof, ErrorCode::kInvalidUsage,
                  "rank {}: init: peer rank {} holds a different job secret than this rank "
                  "(Options::secret or BRAID_SECRET must be the same on every rank)",
                  rank, q);
  }
  meeting.hosts.resize(size);
  for (int q = 0; q < size; ++q) meeting.hosts[q] = q == rank ? host : peerValue(q, "host");
  meeting.descriptors.resize(size);
  for (int q = 0; q < size; ++q) {
    meeting.descriptors[q] = topology::parseDescriptor(peerValue(q, "topo"));
    meeting.descriptors[q].host = meeting.hosts[q];  // Options::hostName may pose as another host
  }
  meeting.cpus.resize(size);
  for (int q = 0; q < size; ++q) {
    if (meeting.hosts[q] == host) meeting.cpus[q] = peerValue(q, "cpus");
  }
  return meeting;
}

}  // namespace braid::create
