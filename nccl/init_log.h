// BRAID_DEBUG=INFO at init: on every rank, braid's version, where libnccl.so.2 and libbraid.so
// were loaded from, and the configuration (the settings that must agree across ranks are also
// checked by braid's creation, which fails on every rank naming the ones that differ).
#pragma once

#include "comm.h"

namespace braid::nccl {

/// Logs one INIT line for a communicator just made by `call`.
void logInit(const CommSettings& settings, const char* call);

}  // namespace braid::nccl
