// The tcp connection phase's state (connect.cc): this rank's dials to higher peers and the
// connections accepted from lower ones, kept between net.h's connect/accept rounds. Internal to
// transport/tcp/.
#pragma once

#include <netinet/in.h>

#include <string>
#include <vector>

#include "braid/deadline.hpp"
#include "transport/tcp/wire.h"

namespace braid::transport::tcp {

/// This rank dialling a higher peer: connect() in progress, then the hello sent and its Ack
/// awaited.
struct Dial {
  enum Stage { kIdle, kConnecting, kAwaitingAck } stage = kIdle;
  int fd = -1;
  sockaddr_in addr{};
  std::string where;  // "ip:port" it published; empty until the first connect
  Clock::time_point started{}, retryAt{};
  Ack ack;
  size_t got = 0;  // bytes of the Ack read
  std::string lastError = "no attempt yet";
};

/// A connection accepted from a claimed lower peer, its handshake being read.
struct Incoming {
  int fd = -1;
  std::string from;  // its address, for warnings
  std::string buf;
  size_t got = 0;
  bool haveHello = false;
  Hello hello;
  Clock::time_point until;  // a stray gets this long to complete the handshake
};

struct Handshakes {
  std::vector<Dial> dials;  // by peer rank
  std::vector<Incoming> incoming;
  ~Handshakes();  // closes every socket not handed to a peer
};

}  // namespace braid::transport::tcp
