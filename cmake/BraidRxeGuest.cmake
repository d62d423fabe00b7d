# The Soft-RoCE guest's binaries (rxe.verbs, tools/rxe-vm/README.md). The guest is an emulated CPU
# without this host's instructions, so rxe.verbs runs the binaries of a -DBRAID_NATIVE=OFF build of
# braid itself. Where the guest can run here (the VERBS part on, qemu-system-x86_64 found and the
# image built: tools/rxe-vm/build-image --check), this build makes them as an ExternalProject in
# build/rxe-guest/, so the test command's build provides what rxe.verbs runs; elsewhere rxe.verbs
# skips with its reason (kind device) and nothing is built. BRAID_RXE_GUEST_BUILD=OFF turns it
# off (the inner build does, so it does not recurse).
option(BRAID_RXE_GUEST_BUILD "Build the Soft-RoCE guest's binaries when its VM can run here" ON)
set(BRAID_RXE_GUEST_DIR ${PROJECT_BINARY_DIR}/rxe-guest)
set(BRAID_RXE_GUEST_TARGETS verbs_test conformance_test rdma_collectives_test braidrun
    all_reduce_perf)
set(_rxe_guest_why "")
if(NOT BRAID_RXE_GUEST_BUILD)
  set(_rxe_guest_why "BRAID_RXE_GUEST_BUILD=OFF")
elseif(NOT BRAID_HAVE_VERBS OR NOT BRAID_BUILD_TESTS)
  set(_rxe_guest_why "no VERBS part or no tests")
else()
  find_program(BRAID_QEMU qemu-system-x86_64)
  if(NOT BRAID_QEMU)
    set(_rxe_guest_why "no qemu-system-x86_64")
  else()
    execute_process(COMMAND ${PROJECT_SOURCE_DIR}/tools/rxe-vm/build-image --check
                    RESULT_VARIABLE _rc OUTPUT_QUIET ERROR_QUIET)
    if(NOT _rc EQUAL 0)
      set(_rxe_guest_why "the guest image is not built (tools/rxe-vm/build-image)")
    endif()
  endif()
endif()

if(_rxe_guest_why STREQUAL "")
  include(ExternalProject)
  set(_launchers "")
  foreach(_lang C CXX)
    if(CMAKE_${_lang}_COMPILER_LAUNCHER)
      list(APPEND _launchers -DCMAKE_${_lang}_COMPILER_LAUNCHER=${CMAKE_${_lang}_COMPILER_LAUNCHER})
    endif()
  endforeach()
  # Only what the guest runs: no GPU, Python, trainer or fuzz parts.
  # BUILD_ALWAYS: the sources are this project's; the inner ninja decides what changed.
  ExternalProject_Add(braid_rxe_guest
    SOURCE_DIR ${PROJECT_SOURCE_DIR}
    BINARY_DIR ${BRAID_RXE_GUEST_DIR}
    CMAKE_GENERATOR Ninja
    CMAKE_ARGS -DCMAKE_BUILD_TYPE=Release -DBRAID_NATIVE=OFF -DBRAID_RXE_GUEST_BUILD=OFF
               -DBRAID_WITH_VERBS=ON -DBRAID_WITH_CUDA=OFF -DBRAID_WITH_TORCH=OFF
               -DBRAID_WITH_TORCH2=OFF -DBRAID_WITH_TRAINER=OFF -DBRAID_WITH_FUZZ=OFF
               ${_launchers}
    BUILD_COMMAND ${CMAKE_COMMAND} --build ${BRAID_RXE_GUEST_DIR} --target ${BRAID_RXE_GUEST_TARGETS}
    INSTALL_COMMAND ""
    BUILD_ALWAYS TRUE)
  message(STATUS "braid: the Soft-RoCE guest's binaries are built in ${BRAID_RXE_GUEST_DIR}")
else()
  message(STATUS "braid: the Soft-RoCE guest's binaries are not built: ${_rxe_guest_why}")
endif()
