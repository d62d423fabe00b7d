/* Calls the C API from C with element type and op codes outside its enums, as a C program may
 * (C enums are ints); C++ could not form such values without undefined behaviour. */
#include "braid/braid.h"

braidResult_t faultsAllReduceRawCodes(const void* sendbuf, void* recvbuf, size_t count, int type,
                                      int op, braidComm_t comm) {
  return braidAllReduce(sendbuf, recvbuf, count, (braidDataType_t)type, (braidRedOp_t)op, comm);
}
