// braid's rendezvous Store on top of the c10d::Store PyTorch hands a process group, so braid
// bootstraps from PyTorch's own rendezvous (no second one).
#pragma once

#include <string>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <vector>

#include "braid/store.hpp"

namespace braid::pytorch {

/// Adapts a c10d::Store (TCPStore, FileStore, PrefixStore, ...). Every call has a deadline: a
/// blocking get waits with c10d's wait(keys, timeout) first (c10d's own get would block for the
/// store's timeout, not ours), then reads. c10d failures become braid::Error naming the key.
/// Thread-safe as far as the wrapped store is (c10d's stores are).
class C10dStore : public Store {
 public:
  explicit C10dStore(c10::intrusive_ptr<::c10d::Store> store);

  void set(const std::string& key, const std::string& value) override;
  std::string get(const std::string& key, Deadline deadline) override;
  int64_t add(const std::string& key, int64_t delta, Deadline deadline) override;
  void wait(const std::vector<std::string>& keys, Deadline deadline) override;

 private:
  c10::intrusive_ptr<::c10d::Store> store_;
};

}  // namespace braid::pytorch
