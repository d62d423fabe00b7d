// A transport::KeyValue over a host Communicator, for one-round rendezvous: every rank set()s its
// keys, then the first get() exchanges all of them with two allGathers (sizes, then the padded
// records), and later get()s read the merged map. Used to connect the CUDA IPC endpoint of a
// DeviceCommunicator through the host communicator the user already has.
#pragma once

#include <map>
#include <string>

#include "braid/braid.hpp"
#include "transport/transport.h"

namespace braid::comm::device {

class GatherKeyValue final : public transport::KeyValue {
 public:
  explicit GatherKeyValue(Communicator& host) : host_(host) {}
  /// Only before the first get() (throws kInternal after).
  void set(const std::string& key, const std::string& value) override;
  /// The first call is collective over the host communicator. Throws kInternal for a key no rank
  /// set (the deadline is the host communicator's timeout).
  std::string get(const std::string& key, Deadline deadline) override;

  /// The wire form of a map ("<klen>:<key><vlen>:<value>..."), and its parser (throws kInternal).
  static std::string pack(const std::map<std::string, std::string>& entries);
  static void unpack(const std::string& data, std::map<std::string, std::string>* into);

 private:
  void exchange();
  Communicator& host_;
  std::map<std::string, std::string> local_, all_;
  bool exchanged_ = false;
};

}  // namespace braid::comm::device
