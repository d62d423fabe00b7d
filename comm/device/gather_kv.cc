#include "comm/device/gather_kv.h"

#include <algorithm>
#include <vector>

#include "common/error.h"

namespace braid::comm::device {

std::string GatherKeyValue::pack(const std::map<std::string, std::string>& entries) {
  std::string out;
  for (const auto& [k, v] : entries) {
    out += std::to_string(k.size()) + ":" + k + std::to_string(v.size()) + ":" + v;
  }
  return out;
}

void GatherKeyValue::unpack(const std::string& data, std::map<std::string, std::string>* into) {
  size_t pos = 0;
  auto field = [&]() {
    const size_t colon = data.find(':', pos);
    BRAID_ENFORCE(colon != std::string::npos && colon > pos && colon - pos <= 12,
                  ErrorCode::kInternal, "device rendezvous: malformed record at byte {}", pos);
    size_t n = 0;
    for (size_t i = pos; i < colon; ++i) {
      BRAID_ENFORCE(data[i] >= '0' && data[i] <= '9', ErrorCode::kInternal,
                    "device rendezvous: malformed length at byte {}", i);
      n = n * 10 + (data[i] - '0');
    }
    BRAID_ENFORCE(n <= data.size() - colon - 1, ErrorCode::kInternal,
                  "device rendezvous: a field of {} bytes runs past the record's end", n);
    std::string s = data.substr(colon + 1, n);
    pos = colon + 1 + n;
    return s;
  };
  while (pos < data.size()) {
    std::string key = field();
    BRAID_ENFORCE(pos < data.size(), ErrorCode::kInternal,
                  "device rendezvous: key '{}' has no value", key);
    (*into)[key] = field();
  }
}

void GatherKeyValue::set(const std::string& key, const std::string& value) {
  BRAID_ENFORCE(!exchanged_, ErrorCode::kInternal,
                "device rendezvous: set('{}') after the exchange", key);
  local_[key] = value;
}

void GatherKeyValue::exchange() {
  const std::string mine = pack(local_);
  const int n = host_.size();
  uint64_t mySize = mine.size();
  std::vector<uint64_t> sizes(n);
  host_.allGather(&mySize, sizes.data(), 1, DataType::kUint64);
  const uint64_t maxSize = *std::max_element(sizes.begin(), sizes.end());
  if (maxSize > 0) {
    std::string padded = mine;
    padded.resize(maxSize, '\0');
    std::string gathered(maxSize * n, '\0');
    host_.allGather(padded.data(), gathered.data(), maxSize, DataType::kUint8);
    for (int r = 0; r < n; ++r) {
      BRAID_ENFORCE(sizes[r] <= maxSize, ErrorCode::kInternal, "device rendezvous: bad size");
      unpack(gathered.substr(r * maxSize, sizes[r]), &all_);
    }
  }
  exchanged_ = true;
}

std::string GatherKeyValue::get(const std::string& key, Deadline) {
  if (!exchanged_) exchange();
  auto it = all_.find(key);
  BRAID_ENFORCE(it != all_.end(), ErrorCode::kInternal, "device rendezvous: no rank published '{}'",
                key);
  return it->second;
}

}  // namespace braid::comm::device
