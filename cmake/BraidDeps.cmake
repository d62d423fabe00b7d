# Finds the optional dependencies of the parts in BraidParts.cmake (torch: python/, the trainer:
# trainer/nn/) and resolves each part, one line each.
find_package(PkgConfig QUIET)

# MPI (the bench baseline and the mpirun bootstrap).
set(_mpi_found FALSE)
if(NOT BRAID_WITH_MPI STREQUAL "OFF")
  find_package(MPI QUIET COMPONENTS C)
  if(MPI_C_FOUND AND MPIEXEC_EXECUTABLE)
    set(_mpi_found TRUE)
  endif()
endif()
braid_resolve(MPI _mpi_found "no MPI or no mpirun found (apt-get install libopenmpi-dev openmpi-bin)")
if(BRAID_HAVE_MPI)
  braid_part_artifacts(MPI ${MPIEXEC_EXECUTABLE})
endif()

# hwloc (topology discovery).
set(_hwloc_found FALSE)
if(NOT BRAID_WITH_HWLOC STREQUAL "OFF" AND PKG_CONFIG_FOUND)
  pkg_check_modules(HWLOC QUIET IMPORTED_TARGET hwloc)
  if(HWLOC_FOUND)
    set(_hwloc_found TRUE)
  endif()
endif()
braid_resolve(HWLOC _hwloc_found "no hwloc found (apt-get install libhwloc-dev)")

# UCX (inter-node transport).
set(_ucx_found FALSE)
if(NOT BRAID_WITH_UCX STREQUAL "OFF" AND PKG_CONFIG_FOUND)
  pkg_check_modules(UCX QUIET IMPORTED_TARGET ucx)
  if(UCX_FOUND)
    set(_ucx_found TRUE)
  endif()
endif()
braid_resolve(UCX _ucx_found "no UCX found (apt-get install libucx-dev)")

# libfabric (the ofi transport).
set(_ofi_found FALSE)
if(NOT BRAID_WITH_OFI STREQUAL "OFF" AND PKG_CONFIG_FOUND)
  pkg_check_modules(OFI QUIET IMPORTED_TARGET libfabric)
  if(OFI_FOUND)
    set(_ofi_found TRUE)
  endif()
endif()
braid_resolve(OFI _ofi_found "no libfabric found (apt-get install libfabric-dev)")

# libibverbs (the verbs transport, rdma-core).
set(_verbs_found FALSE)
if(NOT BRAID_WITH_VERBS STREQUAL "OFF" AND PKG_CONFIG_FOUND)
  pkg_check_modules(VERBS QUIET IMPORTED_TARGET libibverbs)
  if(VERBS_FOUND)
    set(_verbs_found TRUE)
  endif()
endif()
braid_resolve(VERBS _verbs_found "no libibverbs found (apt-get install libibverbs-dev)")

# CUDA (device kernels and transports): only where nvcc exists.
set(_cuda_found FALSE)
if(NOT BRAID_WITH_CUDA STREQUAL "OFF")
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    set(_cuda_found TRUE)
  endif()
endif()
braid_resolve(CUDA _cuda_found "no nvcc found")

if(BRAID_HAVE_CUDA)
  # A100 and H100/H200 machine code, plus PTX for newer GPUs.
  if(NOT CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES "80-real;90-real;90-virtual")
  endif()
  enable_language(CUDA)
  find_package(CUDAToolkit REQUIRED)
endif()
