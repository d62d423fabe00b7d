// A communicator's settings from an ncclConfig_t, read only within config->size (a program
// built against a newer or older nccl.h passes a struct of its own size).
#pragma once

#include "comm.h"
#include "nccl.h"

namespace braid::nccl {

/// The settings `config` asks for (NULL: the defaults); rank, size and device are the caller's
/// to fill. Throws an argument error for a config not made by NCCL_CONFIG_INITIALIZER.
CommSettings settingsFrom(const ncclConfig_t* config, const char* call);

}  // namespace braid::nccl
