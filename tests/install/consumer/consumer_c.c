/* Installed braid's C API from a user's C program: an all-reduce of rank-dependent doubles, checked
 * element by element, and a broadcast from the last rank. */
#include <braid/braid.h>
#include <stdio.h>
#include <stdlib.h>

#define CHECK(call)                                                                       \
  do {                                                                                    \
    braidResult_t res_ = (call);                                                          \
    if (res_ != braidSuccess) {                                                           \
      fprintf(stderr, "consumer_c: %s: %s\n", #call, braidGetLastError());                \
      return 1;                                                                           \
    }                                                                                     \
  } while (0)

int main(void) {
  braidComm_t comm;
  int rank, size;
  size_t i, count = 4099;
  double* buf = malloc(count * sizeof(double));
  CHECK(braidCommInitFromEnv(&comm));
  CHECK(braidCommRank(comm, &rank));
  CHECK(braidCommSize(comm, &size));
  for (i = 0; i < count; ++i) buf[i] = (double)(rank + 1) * (double)i;
  CHECK(braidAllReduce(buf, buf, count, braidFloat64, braidSum, comm));
  for (i = 0; i < count; ++i) {
    if (buf[i] != (double)i * size * (size + 1) / 2) {
      fprintf(stderr, "consumer_c: rank %d: element %zu is %g\n", rank, i, buf[i]);
      return 1;
    }
  }
  for (i = 0; i < count; ++i) buf[i] = rank == size - 1 ? (double)i : -1.0;
  CHECK(braidBroadcast(buf, buf, count, braidFloat64, size - 1, comm));
  for (i = 0; i < count; ++i) {
    if (buf[i] != (double)i) {
      fprintf(stderr, "consumer_c: rank %d: broadcast element %zu is %g\n", rank, i, buf[i]);
      return 1;
    }
  }
  CHECK(braidCommDestroy(comm));
  free(buf);
  printf("consumer (C): rank %d of %d ok\n", rank, size);
  return 0;
}
