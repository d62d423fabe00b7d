// Under mpirun: rank 0 makes a unique id and MPI broadcasts it (built only with MPI).
// C bindings only: Open MPI and MPICH otherwise pull in their C++ bindings.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <cstdlib>

#include "braid/braid.hpp"
#include "common/error.h"

namespace braid {

Communicator fromMpiEnvironment(const Options& options) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = 0;
    BRAID_ENFORCE(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided) == MPI_SUCCESS,
                  ErrorCode::kSystemError, "MPI_Init_thread failed");
    std::atexit([] {
      int finalized = 0;
      MPI_Finalized(&finalized);
      if (!finalized) MPI_Finalize();
    });
  }
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  UniqueId id;
  if (rank == 0) id = Communicator::uniqueId();
  BRAID_ENFORCE(MPI_Bcast(id.bytes.data(), static_cast<int>(id.bytes.size()), MPI_BYTE, 0,
                          MPI_COMM_WORLD) == MPI_SUCCESS,
                ErrorCode::kSystemError, "rank {}: MPI_Bcast of the braid unique id failed", rank);
  return Communicator::fromUniqueId(id, rank, size, options);
}

}  // namespace braid
