#include "comm/detail/transports.h"

#include "transport/transport.h"

namespace braid::comm {

std::string describeTransports() { return transport::describeBackends(); }

}  // namespace braid::comm
