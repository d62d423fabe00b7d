// The NCCL calls braid does not implement (newer than 2.21, or not yet done): each exists so
// that programs built against a newer nccl.h load, warns once, and returns ncclInvalidUsage with
// ncclGetLastError saying braid does not implement it. Never a silent success.
#include "errors.h"
#include "export.h"

using braid::nccl::notImplemented;

// Types of newer nccl.h versions, as the ABI sees them (pointers to opaque structs).
typedef struct ncclWindow_vidmem* ncclWindow_t;
typedef struct ncclSimInfo_v22200 ncclSimInfo_t;

extern "C" {
ncclResult_t ncclCommInitRankScalable(ncclComm_t*, int, int, int, ncclUniqueId*, ncclConfig_t*);
ncclResult_t ncclCommShrink(ncclComm_t, int*, int, ncclComm_t*, ncclConfig_t*, int);
ncclResult_t ncclCommRevoke(ncclComm_t, int);
ncclResult_t ncclCommWindowRegister(ncclComm_t, void*, size_t, ncclWindow_t*, int);
ncclResult_t ncclCommWindowDeregister(ncclComm_t, ncclWindow_t);
ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t*);
void ncclResetDebugInit(void);
}

extern "C" ncclResult_t ncclCommInitRankScalable(ncclComm_t*, int, int, int, ncclUniqueId*,
                                                 ncclConfig_t*) {
  return notImplemented("ncclCommInitRankScalable");
}
BRAID_NCCL_ALIAS(ncclCommInitRankScalable)

extern "C" ncclResult_t ncclCommShrink(ncclComm_t, int*, int, ncclComm_t*, ncclConfig_t*, int) {
  return notImplemented("ncclCommShrink");
}
BRAID_NCCL_ALIAS(ncclCommShrink)

extern "C" ncclResult_t ncclCommRevoke(ncclComm_t, int) { return notImplemented("ncclCommRevoke"); }
BRAID_NCCL_ALIAS(ncclCommRevoke)

extern "C" ncclResult_t ncclCommWindowRegister(ncclComm_t, void*, size_t, ncclWindow_t*, int) {
  return notImplemented("ncclCommWindowRegister");
}
BRAID_NCCL_ALIAS(ncclCommWindowRegister)

extern "C" ncclResult_t ncclCommWindowDeregister(ncclComm_t, ncclWindow_t) {
  return notImplemented("ncclCommWindowDeregister");
}
BRAID_NCCL_ALIAS(ncclCommWindowDeregister)

extern "C" ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t*) {
  return notImplemented("ncclGroupSimulateEnd");
}
BRAID_NCCL_ALIAS(ncclGroupSimulateEnd)

// Returns nothing: the warning and the last error are all it can say.
extern "C" void ncclResetDebugInit(void) { (void)notImplemented("ncclResetDebugInit"); }
BRAID_NCCL_ALIAS(ncclResetDebugInit)
