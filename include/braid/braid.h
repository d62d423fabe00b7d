/* braid's C API: the same communicators and collectives as braid/braid.hpp, for C and for other
 * languages' bindings. Every function returns a braidResult_t; on failure the calling thread's
 * last error message (braidGetLastError) names rank, peer, collective and size.
 * Thread-safety and ordering are as in braid.hpp: all ranks call collectives in the same order. */
#ifndef BRAID_BRAID_H_
#define BRAID_BRAID_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Return codes: equal to braid::ErrorCode. */
typedef enum {
  braidSuccess = 0,
  braidInvalidUsage = 1,
  braidSystemError = 2,
  braidCudaError = 3,
  braidTimeout = 4,
  braidRemoteError = 5,
  braidAborted = 6,
  braidInternalError = 7,
  braidMismatch = 8,
  braidInProgress = 9 /* braidTest: not finished yet */
} braidResult_t;

/* Element types and ops: equal to braid::DataType / braid::RedOp. */
typedef enum {
  braidInt8 = 0,
  braidUint8 = 1,
  braidInt32 = 2,
  braidUint32 = 3,
  braidInt64 = 4,
  braidUint64 = 5,
  braidFloat16 = 6,
  braidFloat32 = 7,
  braidFloat64 = 8,
  braidBfloat16 = 9,
  /* These two make every int a value of the type (C++ sees C's ints); bad ones are refused. */
  braidDataType_enumMin = -0x7fffffff - 1,
  braidDataType_enumSize = 0x7fffffff
} braidDataType_t;
typedef enum {
  braidSum = 0,
  braidProd = 1,
  braidMax = 2,
  braidMin = 3,
  braidAvg = 4,
  braidRedOp_enumMin = -0x7fffffff - 1, /* every int a value of the type, as braidDataType_t */
  braidRedOp_enumSize = 0x7fffffff
} braidRedOp_t;

typedef struct braidComm* braidComm_t;
typedef struct braidRequest* braidRequest_t;
typedef struct {
  char internal[128];
} braidUniqueId;

/* The message of the last failed call on this thread ("" after success). */
const char* braidGetLastError(void);
const char* braidGetErrorString(braidResult_t result);

/* From RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT (braidrun, torchrun) or mpirun. Collective. */
braidResult_t braidCommInitFromEnv(braidComm_t* comm);
/* NCCL-style: one rank calls braidGetUniqueId and passes the id to the others out of band. */
braidResult_t braidGetUniqueId(braidUniqueId* id);
braidResult_t braidCommInitRank(braidComm_t* comm, int nranks, braidUniqueId id, int rank);
/* Frees the communicator (waits for its queued operations, bounded by the timeout). */
braidResult_t braidCommDestroy(braidComm_t comm);
/* Ends operations in flight with braidAborted (any thread) and frees the communicator. */
braidResult_t braidCommAbort(braidComm_t comm);
braidResult_t braidCommRank(braidComm_t comm, int* rank);
braidResult_t braidCommSize(braidComm_t comm, int* size);
/* The stuck-rank report (braid.hpp's Communicator::statusReport), any thread, any time: written
 * to `out` (NUL-terminated, truncated to `size` bytes) when out != NULL, else to stderr. */
braidResult_t braidCommDump(braidComm_t comm, char* out, size_t size);

/* Blocking collectives (in place when sendbuf == recvbuf, see braid.hpp for the offsets). */
braidResult_t braidAllReduce(const void* sendbuf, void* recvbuf, size_t count, braidDataType_t type,
                             braidRedOp_t op, braidComm_t comm);
braidResult_t braidReduceScatter(const void* sendbuf, void* recvbuf, size_t recvcount,
                                 braidDataType_t type, braidRedOp_t op, braidComm_t comm);
braidResult_t braidAllGather(const void* sendbuf, void* recvbuf, size_t sendcount,
                             braidDataType_t type, braidComm_t comm);
braidResult_t braidBroadcast(const void* sendbuf, void* recvbuf, size_t count, braidDataType_t type,
                             int root, braidComm_t comm);
braidResult_t braidReduce(const void* sendbuf, void* recvbuf, size_t count, braidDataType_t type,
                          braidRedOp_t op, int root, braidComm_t comm);
/* Block q of sendbuf (count elements at sendbuf + q*count) to rank q; rank q's block for this
 * rank lands at recvbuf + q*count. In place when sendbuf == recvbuf. */
braidResult_t braidAllToAll(const void* sendbuf, void* recvbuf, size_t count, braidDataType_t type,
                            braidComm_t comm);
/* Per-peer splits in elements, one entry per rank in each array (copied during the call); in
 * place when sendbuf == recvbuf with equal send and receive arrays, as MPI_IN_PLACE. */
braidResult_t braidAllToAllv(const void* sendbuf, const size_t* sendcounts, const size_t* sdispls,
                             void* recvbuf, const size_t* recvcounts, const size_t* rdispls,
                             braidDataType_t type, braidComm_t comm);
/* Every rank's sendcount elements to root's recvbuf, rank q's at recvbuf + q*sendcount. */
braidResult_t braidGather(const void* sendbuf, void* recvbuf, size_t sendcount,
                          braidDataType_t type, int root, braidComm_t comm);
/* Root's block q (recvcount elements at sendbuf + q*recvcount) to rank q's recvbuf. */
braidResult_t braidScatter(const void* sendbuf, void* recvbuf, size_t recvcount,
                           braidDataType_t type, int root, braidComm_t comm);
braidResult_t braidSend(const void* buf, size_t count, braidDataType_t type, int peer,
                        braidComm_t comm);
braidResult_t braidRecv(void* buf, size_t count, braidDataType_t type, int peer, braidComm_t comm);
/* Receives the first message with `tag` from any peer, of at most count elements (a larger one
 * is braidMismatch); sets *source to its sender and *bytes to its size (either may be NULL).
 * Per peer, messages match in posting order. */
braidResult_t braidRecvAnySource(void* buf, size_t count, braidDataType_t type, int tag,
                                 int* source, size_t* bytes, braidComm_t comm);
braidResult_t braidBarrier(braidComm_t comm);

/* Host memory the ranks of one host map into each other (braid::memAlloc in braid.hpp): an
 * all-reduce whose buffers lie in it on every rank moves its data with one copy. */
braidResult_t braidMemAlloc(void** ptr, size_t bytes);
braidResult_t braidMemFree(void* ptr);

/* Non-blocking all-reduce; finish with braidWait or poll with braidTest, then braidRequestFree. */
braidResult_t braidAllReduceAsync(const void* sendbuf, void* recvbuf, size_t count,
                                  braidDataType_t type, braidRedOp_t op, braidComm_t comm,
                                  braidRequest_t* request);
braidResult_t braidBroadcastAsync(const void* sendbuf, void* recvbuf, size_t count,
                                  braidDataType_t type, int root, braidComm_t comm,
                                  braidRequest_t* request);
/* Waits up to timeoutSeconds (< 0: until the operation ends, bounded by its own timeout). */
braidResult_t braidWait(braidRequest_t request, double timeoutSeconds);
/* braidSuccess when finished well, braidInProgress while running, else the operation's error. */
braidResult_t braidTest(braidRequest_t request);
braidResult_t braidRequestFree(braidRequest_t request);

#ifdef __cplusplus
}
#endif

#endif /* BRAID_BRAID_H_ */
