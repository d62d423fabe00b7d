# braid's optional parts. Each has BRAID_WITH_<PART>=AUTO|ON|OFF: AUTO builds it where its
# dependencies are found, ON requires them (configure fails naming the package), OFF leaves it out.
# tools/quickstart asks for every part whose dependencies tools/install-deps provides as ON, so a
# new machine never loses one silently. braid_report_parts() prints one line with every part's
# state and writes it to braid-parts.txt for the suite.parts test.
set(BRAID_PARTS CUDA UCX MPI HWLOC TORCH TORCH2 TRAINER)
set(_braid_part_doc_CUDA "device kernels, the CUDA IPC transport and DeviceCommunicator (nvcc)")
set(_braid_part_doc_UCX "the UCX transport between hosts (libucx-dev)")
set(_braid_part_doc_MPI "the MPI bootstrap and the bench's MPI baseline (libopenmpi-dev)")
set(_braid_part_doc_HWLOC "hwloc topology discovery (libhwloc-dev)")
set(_braid_part_doc_TORCH "braid_torch, the PyTorch backend (python3-torch libtorch-dev)")
set(_braid_part_doc_TORCH2 "braid_torch for PyTorch 2.x (BRAID_TORCH2_PYTHON, a venv from tools/torch2-env)")
set(_braid_part_doc_TRAINER "braid-train and its layers (libopenblas-dev libdnnl-dev libcli11-dev)")
foreach(_part ${BRAID_PARTS})
  set(BRAID_WITH_${_part} AUTO CACHE STRING "Build ${_braid_part_doc_${_part}}: AUTO|ON|OFF")
  set_property(CACHE BRAID_WITH_${_part} PROPERTY STRINGS AUTO ON OFF)
  if(NOT BRAID_WITH_${_part} MATCHES "^(AUTO|ON|OFF)$")
    message(FATAL_ERROR "braid: BRAID_WITH_${_part}=${BRAID_WITH_${_part}}: must be AUTO, ON or OFF")
  endif()
endforeach()

# braid_resolve(PART FOUND_VAR REASON): decides whether PART is built. Sets BRAID_HAVE_<PART> (0/1)
# in the caller's scope; fails configure when the part was asked ON and FOUND_VAR is false.
function(braid_resolve part found reason)
  if(BRAID_WITH_${part} STREQUAL "OFF")
    set(_have 0)
    set(_state "off (BRAID_WITH_${part}=OFF)")
  elseif(${found})
    set(_have 1)
    set(_state "on")
  elseif(BRAID_WITH_${part} STREQUAL "ON")
    message(FATAL_ERROR "braid: BRAID_WITH_${part}=ON but ${reason}")
  else()
    set(_have 0)
    set(_state "off (${reason})")
  endif()
  message(STATUS "braid: ${part} ${_state}")
  set_property(GLOBAL PROPERTY BRAID_PART_STATE_${part} "${_state}")
  set(BRAID_HAVE_${part} ${_have} PARENT_SCOPE)
endfunction()

# braid_part_artifacts(PART FILE...): files (generator expressions allowed) a built PART must
# have produced; suite.parts checks they exist.
function(braid_part_artifacts part)
  set_property(GLOBAL APPEND PROPERTY BRAID_PART_ARTIFACTS_${part} ${ARGN})
endfunction()

# The one summary line, and braid-parts.txt: "PART<TAB>asked<TAB>state<TAB>artifact;..." per part.
function(braid_report_parts)
  set(_line "")
  set(_file "")
  foreach(_part ${BRAID_PARTS})
    get_property(_state GLOBAL PROPERTY BRAID_PART_STATE_${_part})
    if(NOT _state)
      message(FATAL_ERROR "braid: part ${_part} was never resolved (a braid_resolve call is missing)")
    endif()
    get_property(_artifacts GLOBAL PROPERTY BRAID_PART_ARTIFACTS_${_part})
    string(APPEND _line " ${_part}=${_state}")
    string(REPLACE ";" "|" _artifacts "${_artifacts}")
    string(APPEND _file "${_part}\t${BRAID_WITH_${_part}}\t${_state}\t${_artifacts}\n")
  endforeach()
  message(STATUS "braid parts:${_line}")
  file(GENERATE OUTPUT ${PROJECT_BINARY_DIR}/braid-parts.txt CONTENT "${_file}")
endfunction()
