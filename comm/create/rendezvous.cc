// Creation step 1: the ranks meet in the store. Rank 0 draws the job id; every rank publishes a
// proof of its job secret, the settings that must agree, its host key, its CPU set and its
// hardware descriptor, then reads the others'. A rank whose secret or settings differ is named on
// every rank, before anything is connected.
#include <dlfcn.h>
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <utility>

#include "comm/bootstrap/secret.h"
#include "comm/detail/create.h"
#include "common/config.h"
#include "common/error.h"
#include "common/log.h"

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

// What every rank must run alike, as "name=value" fields: the library, and the settings that
// shape the transport and the schedules (the timeout may differ: each rank bounds its own waits).
std::vector<std::pair<std::string, std::string>> sharedSettings(const ResolvedOptions& o) {
  return {
      {"braid version", BRAID_VERSION_STRING},
      {"built with UCX", BRAID_HAVE_UCX ? "yes" : "no"},
      {"algorithm (BRAID_ALGO)", algorithmName(o.algorithm)},
      {"transport (BRAID_TRANSPORT)", o.transport.empty() ? "auto" : o.transport},
      {"slot bytes (BRAID_CHUNK)", o.chunkSet ? std::to_string(o.slotBytes) : "default"},
      {"slots (BRAID_SLOTS)", std::to_string(o.slots)},
      {"channels (BRAID_CHANNELS)", o.channelsSet ? std::to_string(o.channels) : "default"},
      {"streaming from (BRAID_STREAM_BYTES)", std::to_string(o.streamBytes)},
      {"single copy (BRAID_SINGLE_COPY)", o.singleCopy ? "on" : "off"},
      {"single copy from (BRAID_SINGLE_COPY_BYTES)", std::to_string(o.singleCopyBytes)},
      {"mapped copy from (BRAID_MAPPED_COPY_BYTES)", std::to_string(o.mappedCopyBytes)},
      {"deterministic (BRAID_DETERMINISTIC)", o.deterministic ? "on" : "off"},
      {"tuner's chunk (BRAID_PICK_CHUNK)", o.pickChunk ? "on" : "off"},
  };
}

// Where this rank's braid was loaded from: shown beside a disagreement (a job mixing installs)
// and logged at init; not compared (hosts may install braid under different prefixes).
std::string libraryPath() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&libraryPath), &info) != 0 && info.dli_fname != nullptr) {
    return info.dli_fname;
  }
  return "(unknown)";
}
constexpr char kLibraryField[] = "library";  // published beside the settings, never compared

std::string encodeSettings(const std::vector<std::pair<std::string, std::string>>& fields) {
  std::string out;
  for (const auto& [name, value] : fields) out += name + "=" + value + "\n";
  return out;
}

std::map<std::string, std::string> decodeSettings(const std::string& text) {
  std::map<std::string, std::string> fields;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(pos, end - pos);
    const size_t eq = line.find('=');
    if (eq != std::string::npos) fields[line.substr(0, eq)] = line.substr(eq + 1);
    pos = end + 1;
  }
  return fields;
}

std::string ranksText(const std::vector<int>& ranks) {
  std::string out = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) out += (i ? ", " : "") + std::to_string(ranks[i]);
  return out;
}

// Fails (kInvalidUsage, alike on every rank) naming each field the ranks disagree on, with its
// value on each group of ranks.
void checkSettings(int rank, const std::vector<std::string>& published) {
  std::vector<std::map<std::string, std::string>> fields;
  for (const auto& text : published) fields.push_back(decodeSettings(text));
  std::string differences;
  for (const auto& [name, mine] : fields[0]) {
    if (name == kLibraryField) continue;
    std::map<std::string, std::vector<int>> byValue;
    for (size_t q = 0; q < fields.size(); ++q) {
      auto it = fields[q].find(name);
      byValue[it == fields[q].end() ? "(none)" : it->second].push_back(static_cast<int>(q));
    }
    if (byValue.size() < 2) continue;
    std::string values;
    for (const auto& [value, ranks] : byValue) {
      values += fmt::format("{}{} on {}", values.empty() ? "" : ", ", value, ranksText(ranks));
    }
    differences += fmt::format("; {}: {}", name, values);
  }
  if (differences.empty()) return;
  // Where each rank's braid came from, grouped: usually what explains a version mismatch.
  std::map<std::string, std::vector<int>> byLibrary;
  for (size_t q = 0; q < fields.size(); ++q) {
    auto it = fields[q].find(kLibraryField);
    byLibrary[it == fields[q].end() ? "(not said)" : it->second].push_back(static_cast<int>(q));
  }
  std::string libraries;
  for (const auto& [path, ranks] : byLibrary) {
    libraries += fmt::format("{}{} on {}", libraries.empty() ? "" : ", ", path, ranksText(ranks));
  }
  fail(ErrorCode::kInvalidUsage,
       "rank {}: init: the ranks disagree on what must be the same on every rank{} (libbraid: {})",
       rank, differences, libraries);
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
  auto fields = sharedSettings(state.options);
  fields.emplace_back(kLibraryField, libraryPath());
  const std::string settings = encodeSettings(fields);
  BRAID_INFO("rank {}: braid {} from {} (UCX {}, CUDA {}); {}", rank, BRAID_VERSION_STRING,
             libraryPath(), BRAID_HAVE_UCX ? "yes" : "no", BRAID_HAVE_CUDA ? "yes" : "no",
             [&] {
               std::string text;
               for (size_t i = 0; i + 1 < fields.size(); ++i) {
                 text += fmt::format("{}{} {}", i ? ", " : "", fields[i].first, fields[i].second);
               }
               return text;
             }());
  store.set(key("secret-proof", rank), proof);
  store.set(key("settings", rank), settings);
  store.set(key("host", rank), host);
  store.set(key("topo", rank), topology::serializeDescriptor(self));

  const Deadline deadline = Deadline::after(timeout);
  // A peer's published value; a failure names the peer (it may have died during init), and on a
  // timeout every other rank that has not published it either (looked up without waiting).
  auto peerValue = [&](int q, const char* what) {
    try {
      return store.get(key(what, q), deadline);
    } catch (const Error& e) {
      std::vector<int> missing{q};
      if (e.code() == ErrorCode::kTimeout) {
        for (int p = 0; p < size; ++p) {
          if (p == q || p == rank) continue;
          try {
            store.get(key(what, p), Deadline::after(0));
          } catch (const Error&) {
            missing.push_back(p);
          }
        }
      }
      std::sort(missing.begin(), missing.end());
      std::string who;
      for (int p : missing) who += fmt::format("{}{}", who.empty() ? "" : ", ", p);
      fail(e.code(),
           "rank {}: init: peer {} {} did not publish {} {} within {} s (did {} fail, exit, or "
           "never start?): {}",
           rank, missing.size() == 1 ? "rank" : "ranks", who,
           missing.size() == 1 ? "its" : "their", what, timeout,
           missing.size() == 1 ? "it" : "they", e.what());
    }
  };
  for (int q = 0; q < size; ++q) {
    BRAID_ENFORCE(q == rank || peerValue(q, "secret-proof") == proof, ErrorCode::kInvalidUsage,
                  "rank {}: init: peer rank {} holds a different job secret than this rank "
                  "(Options::secret or BRAID_SECRET must be the same on every rank)",
                  rank, q);
  }
  std::vector<std::string> published(size);
  for (int q = 0; q < size; ++q) published[q] = q == rank ? settings : peerValue(q, "settings");
  checkSettings(rank, published);
  meeting.hosts.resize(size);
  for (int q = 0; q < size; ++q) meeting.hosts[q] = q == rank ? host : peerValue(q, "host");
  meeting.descriptors.resize(size);
  for (int q = 0; q < size; ++q) {
    meeting.descriptors[q] = topology::parseDescriptor(peerValue(q, "topo"));
    meeting.descriptors[q].host = meeting.hosts[q];  // Options::hostName may pose as another host
  }
  return meeting;
}

}  // namespace braid::create
