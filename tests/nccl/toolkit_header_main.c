/* Built against the CUDA toolkit's own nccl.h (not braid's) and linked with braid's
 * libnccl.so.2: proves the exports match NCCL's signatures, types and values. Two processes
 * (fork) all-reduce host buffers (braid's extension: stream NULL) and check every element; the
 * id goes through a pipe. Exit 0 when every element is right on both. */
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#define COUNT 1031
#define CHECK(call)                                                                      \
  do {                                                                                   \
    ncclResult_t r_ = (call);                                                            \
    if (r_ != ncclSuccess) {                                                             \
      fprintf(stderr, "%s failed: %s: %s\n", #call, ncclGetErrorString(r_),              \
              ncclGetLastError(NULL));                                                   \
      return 1;                                                                          \
    }                                                                                    \
  } while (0)

static int runRank(int rank, int nranks, ncclUniqueId id) {
  ncclComm_t comm;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER; /* a 2.28 config: braid reads within size */
  CHECK(ncclCommInitRankConfig(&comm, nranks, id, rank, &config));
  int count = 0, me = -1;
  CHECK(ncclCommCount(comm, &count));
  CHECK(ncclCommUserRank(comm, &me));
  if (count != nranks || me != rank) return 1;
  float* send = malloc(COUNT * sizeof(float));
  float* recv = malloc(COUNT * sizeof(float));
  for (int i = 0; i < COUNT; ++i) send[i] = (float)(i % 17 + rank);
  CHECK(ncclAllReduce(send, recv, COUNT, ncclFloat, ncclSum, comm, (cudaStream_t)0));
  for (int i = 0; i < COUNT; ++i) {
    float want = 0;
    for (int r = 0; r < nranks; ++r) want += (float)(i % 17 + r);
    if (recv[i] != want) {
      fprintf(stderr, "rank %d: element %d is %g, want %g\n", rank, i, recv[i], want);
      return 1;
    }
  }
  int version = 0;
  CHECK(ncclGetVersion(&version));
  if (version != 22100) return 1;
  CHECK(ncclCommDestroy(comm));
  free(send);
  free(recv);
  return 0;
}

int main(void) {
  int fds[2];
  if (pipe(fds) != 0) return 1;
  pid_t child = fork();
  if (child == 0) {
    ncclUniqueId id;
    if (read(fds[0], &id, sizeof id) != (ssize_t)sizeof id) _exit(1);
    _exit(runRank(1, 2, id));
  }
  ncclUniqueId id;
  CHECK(ncclGetUniqueId(&id));
  if (write(fds[1], &id, sizeof id) != (ssize_t)sizeof id) return 1;
  int mine = runRank(0, 2, id);
  int status = 0;
  waitpid(child, &status, 0);
  int theirs = WIFEXITED(status) ? WEXITSTATUS(status) : 1;
  printf("rank 0: %s, rank 1: %s\n", mine ? "FAILED" : "ok", theirs ? "FAILED" : "ok");
  return mine || theirs;
}
