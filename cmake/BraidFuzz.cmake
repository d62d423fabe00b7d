# The FUZZ part: fuzz/'s libFuzzer targets. libFuzzer needs clang while the main build uses g++,
# so fuzz/ is a CMake project of its own, configured with clang++ and built by this one as an
# ExternalProject into build/fuzz/ (fuzz/README.md). Found when clang++ links a fuzzer with ASan
# and UBSan: Debian's clang alone lacks the runtimes, which are in libclang-rt-dev.
set(_fuzz_found FALSE)
set(_fuzz_reason "no clang++ found (apt-get install clang libclang-rt-dev)")
if(NOT BRAID_WITH_FUZZ STREQUAL "OFF")
  find_program(BRAID_FUZZ_CXX NAMES clang++ DOC "clang++ that builds fuzz/ (the FUZZ part)")
  if(BRAID_FUZZ_CXX)
    set(_dir ${PROJECT_BINARY_DIR}/CMakeFiles/braid-fuzz-check)
    file(WRITE ${_dir}/check.cc
         "#include <cstddef>\n#include <cstdint>\n"
         "extern \"C\" int LLVMFuzzerTestOneInput(const uint8_t*, size_t) { return 0; }\n")
    execute_process(
      COMMAND ${BRAID_FUZZ_CXX} -fsanitize=fuzzer,address,undefined check.cc -o check
      WORKING_DIRECTORY ${_dir} RESULT_VARIABLE _rc OUTPUT_QUIET ERROR_QUIET)
    if(_rc EQUAL 0)
      set(_fuzz_found TRUE)
    else()
      set(_fuzz_reason
          "${BRAID_FUZZ_CXX} cannot link -fsanitize=fuzzer,address,undefined (apt-get install libclang-rt-dev)")
    endif()
  endif()
endif()
braid_resolve(FUZZ _fuzz_found "${_fuzz_reason}")

include(${PROJECT_SOURCE_DIR}/fuzz/targets.cmake)
set(BRAID_FUZZ_DIR ${PROJECT_BINARY_DIR}/fuzz)
if(BRAID_HAVE_FUZZ)
  include(ExternalProject)
  set(_fuzz_binaries "")
  foreach(_name ${BRAID_FUZZ_TARGETS})
    list(APPEND _fuzz_binaries ${BRAID_FUZZ_DIR}/fuzz_${_name})
  endforeach()
  # BUILD_ALWAYS: the sources are braid's, outside what ExternalProject watches; the inner
  # build decides what changed (nothing to do costs a second).
  ExternalProject_Add(braid_fuzz
    SOURCE_DIR ${PROJECT_SOURCE_DIR}/fuzz
    BINARY_DIR ${BRAID_FUZZ_DIR}
    CMAKE_ARGS -DCMAKE_CXX_COMPILER=${BRAID_FUZZ_CXX}
    INSTALL_COMMAND ""
    BUILD_ALWAYS TRUE
    BUILD_BYPRODUCTS ${_fuzz_binaries})
  braid_part_artifacts(FUZZ ${_fuzz_binaries})
endif()
