// Starting a communicator's creation the way its call and settings ask: deferred to the end of
// the thread's group, in the background (non-blocking config), or now. Shared by the init calls
// and ncclCommSplit.
#pragma once

#include <functional>

#include "braid/braid.hpp"
#include "comm.h"

namespace braid::nccl {

/// Starts comm's creation with `make` (which logs the init line on success). Returns
/// ncclInProgress when it runs in the background, ncclSuccess otherwise; throws creation's
/// error after freeing comm.
ncclResult_t startInit(ncclComm* comm, std::function<Communicator()> make, const char* call);

}  // namespace braid::nccl
