// Which transports this build and machine have and which the communicator picks by itself, for
// the tools (braid-topo), which may not include transport/.
#pragma once

#include <string>

namespace braid::comm {

/// One line per host-memory transport, best first (transport::describeBackends): available or
/// why not, chosen by default or only when forced (why), and details (ofi: its provider).
std::string describeTransports();

}  // namespace braid::comm
