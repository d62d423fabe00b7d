#include "comm/detail/live_comms.h"

#include <pthread.h>

#include <algorithm>
#include <mutex>

namespace braid {
namespace {

struct Live {
  std::mutex mutex;
  std::vector<std::weak_ptr<CommState>> states;
};

Live& live() {
  static Live* l = new Live;  // never destroyed: reporter threads may outlive main()
  return *l;
}

// The mutex is held only briefly and never across a fork braid makes.
void forgetAfterFork() { live().states.clear(); }

}  // namespace

void registerLive(const std::weak_ptr<CommState>& state) {
  static const bool atfork = ::pthread_atfork(nullptr, nullptr, forgetAfterFork) == 0;
  (void)atfork;
  Live& l = live();
  std::lock_guard<std::mutex> lock(l.mutex);
  std::erase_if(l.states, [](const std::weak_ptr<CommState>& w) { return w.expired(); });
  l.states.push_back(state);
}

std::vector<std::shared_ptr<CommState>> liveComms() {
  Live& l = live();
  std::vector<std::shared_ptr<CommState>> out;
  std::lock_guard<std::mutex> lock(l.mutex);
  for (auto& weak : l.states) {
    if (auto s = weak.lock()) out.push_back(std::move(s));
  }
  return out;
}

}  // namespace braid
