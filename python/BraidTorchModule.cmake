# braid_torch_module(PART TARGET PYTHON OUTPUT_DIR [HINT text] [MAJOR n] [CUDA]): the braid_torch package
# (the _C extension plus the pure-Python files) built against the torch of the Python `PYTHON`, into
# OUTPUT_DIR/braid_torch.
# python/CMakeLists.txt calls it twice: for part TORCH (Debian's 1.13, build/python) and for part
# TORCH2 (a PyTorch 2.x venv, build/python-torch2). Resolves PART (cmake/BraidParts.cmake) with
# the reason when that torch cannot be built against (HINT appended: what to install or run;
# MAJOR: torch's major version must be n; CUDA: CUDA tensors through braid's device path where
# braid has CUDA and that torch has libc10_cuda, else cuda_path_stub.cc). In the caller's scope it sets
# BRAID_HAVE_<PART> (0/1), BRAID_<PART>_VERSION (torch's version) and BRAID_<PART>_PLATLIB (where
# that Python's packages go relative to an install prefix).

# One query for everything: version, headers, libraries, Python headers, extension suffix, ABI,
# and where the install goes.
set(_braid_torch_query [=[
import sys, sysconfig, torch, torch.utils.cpp_extension as ce
print(torch.__version__)
print(torch.utils.cmake_prefix_path)
print(",".join(ce.include_paths()))
print(",".join(ce.library_paths()))
print(sysconfig.get_paths()["include"])
print(sysconfig.get_config_var("EXT_SUFFIX"))
print(int(torch._C._GLIBCXX_USE_CXX11_ABI))
# Where packages go relative to an install prefix: Debian's Python reads
# <prefix>/lib/python3.N/dist-packages for both /usr and /usr/local; others use their scheme.
if "deb_system" in sysconfig.get_scheme_names():
    print(f"lib/python3.{sys.version_info.minor}/dist-packages")
else:
    print(sysconfig.get_path("platlib", vars={"base": "/", "platbase": "/"}).lstrip("/"))
]=])

set(BRAID_TORCH_MODULE_SOURCES
  src/c10d_store.cc
  src/types.cc
  src/staging.cc
  src/watcher.cc
  src/work.cc
  src/process_group.cc
  src/module.cc
)
set(BRAID_TORCH_PY_SOURCES braid_torch/__init__.py)

function(braid_torch_module part target python output_dir)
  cmake_parse_arguments(A "CUDA" "HINT;MAJOR" "" ${ARGN})
  set(_found FALSE)
  set(_version "")
  if(NOT python)
    set(_reason "no Python given")
  elseif(NOT EXISTS "${python}")
    set(_reason "no ${python}")
  else()
    execute_process(COMMAND "${python}" -c "${_braid_torch_query}"
                    OUTPUT_VARIABLE _out ERROR_VARIABLE _err RESULT_VARIABLE _rc
                    OUTPUT_STRIP_TRAILING_WHITESPACE)
    set(_reason "")
    if(_rc EQUAL 0)
      string(REPLACE "\n" ";" _lines "${_out}")
      list(LENGTH _lines _n)
      if(_n GREATER_EQUAL 8)
        # The last 8 lines (torch may print warnings to stdout first).
        math(EXPR _first "${_n} - 8")
        list(SUBLIST _lines ${_first} 8 _lines)
        list(GET _lines 0 _version)
        list(GET _lines 2 _includes)
        list(GET _lines 3 _libdirs)
        list(GET _lines 4 _py_include)
        list(GET _lines 5 _ext_suffix)
        list(GET _lines 6 _cxx11_abi)
        list(GET _lines 7 _platlib)
        string(REPLACE "," ";" _includes "${_includes}")
        string(REPLACE "," ";" _libdirs "${_libdirs}")
      else()
        set(_reason "${python}'s torch query printed too little: ${_out}")
      endif()
    else()
      # The last line of Python's error says why (no torch, or a module torch needs).
      string(STRIP "${_err}" _err)
      string(REGEX REPLACE ".*\n" "" _err "${_err}")
      set(_reason "${python} cannot import torch.utils.cpp_extension: ${_err}")
    endif()
  endif()

  if(_version)
    find_path(_pg_header torch/csrc/distributed/c10d/ProcessGroup.hpp
              PATHS ${_includes} NO_DEFAULT_PATH NO_CACHE)
    # torch's own pybind11 first (the extension must share its pybind11 ABI), else the system's.
    find_path(_pybind11_header pybind11/pybind11.h PATHS ${_includes} NO_DEFAULT_PATH NO_CACHE)
    if(NOT _pybind11_header)
      find_path(_pybind11_header pybind11/pybind11.h NO_CACHE)
    endif()
    find_path(_python_header Python.h PATHS "${_py_include}" NO_DEFAULT_PATH NO_CACHE)
    set(_libs)
    foreach(_lib c10 torch torch_cpu torch_python)
      find_library(_lib_${_lib} ${_lib} PATHS ${_libdirs} NO_DEFAULT_PATH NO_CACHE)
      if(_lib_${_lib})
        list(APPEND _libs ${_lib_${_lib}})
      else()
        set(_reason "torch ${_version} has no lib${_lib} in ${_libdirs}")
      endif()
    endforeach()
    if(NOT _pg_header)
      set(_reason "torch ${_version} without C++ headers")
    elseif(NOT _pybind11_header)
      set(_reason "no pybind11 headers (apt-get install pybind11-dev)")
    elseif(NOT _python_header)
      set(_reason "no Python headers in ${_py_include} (apt-get install python3-dev)")
    elseif(A_MAJOR AND NOT _version MATCHES "^${A_MAJOR}\\.")
      set(_reason "${python} has torch ${_version}, not ${A_MAJOR}.x")
    elseif(_cxx11_abi STREQUAL "0" AND NOT CMAKE_CXX_FLAGS MATCHES "_GLIBCXX_USE_CXX11_ABI=0")
      # braid's libraries pass std::string across into the module: everything must share the ABI.
      set(_reason "torch ${_version} uses the pre-C++11 libstdc++ ABI; configure braid with \
-DCMAKE_CXX_FLAGS=-D_GLIBCXX_USE_CXX11_ABI=0")
    elseif(_reason STREQUAL "")
      set(_found TRUE)
    endif()
  endif()
  if(NOT _found AND A_HINT)
    string(APPEND _reason " ${A_HINT}")
  endif()

  braid_resolve(${part} _found "${_reason}")
  set(BRAID_HAVE_${part} ${BRAID_HAVE_${part}} PARENT_SCOPE)
  set(BRAID_${part}_VERSION "${_version}" PARENT_SCOPE)
  set(BRAID_${part}_PLATLIB "${_platlib}" PARENT_SCOPE)
  if(NOT BRAID_HAVE_${part})
    return()
  endif()
  message(STATUS "braid: ${part} is torch ${_version} of ${python}")

  # CUDA tensors: braid's DeviceCommunicator (braid_device) and torch's c10_cuda (its streams).
  set(_cuda_path FALSE)
  if(A_CUDA AND BRAID_HAVE_CUDA AND TARGET braid_device)
    find_library(_lib_c10_cuda c10_cuda PATHS ${_libdirs} NO_DEFAULT_PATH NO_CACHE)
    if(_lib_c10_cuda)
      set(_cuda_path TRUE)
    endif()
  endif()
  set(_package_dir ${output_dir}/braid_torch)
  if(_cuda_path)
    message(STATUS "braid: ${part} takes CUDA tensors (braid's device path)")
    add_library(${target} MODULE ${BRAID_TORCH_MODULE_SOURCES} src/cuda_path.cc)
    target_link_libraries(${target} PRIVATE braid_device ${_lib_c10_cuda})
    target_include_directories(${target} SYSTEM PRIVATE ${CUDAToolkit_INCLUDE_DIRS})
  else()
    add_library(${target} MODULE ${BRAID_TORCH_MODULE_SOURCES} src/cuda_path_stub.cc)
  endif()
  target_include_directories(${target} PRIVATE ${PROJECT_SOURCE_DIR} src)
  # torch's include folders first: its bundled pybind11 wins over the system's.
  target_include_directories(${target} SYSTEM PRIVATE ${_includes} ${_pybind11_header}
                             ${_py_include})
  target_compile_definitions(${target} PRIVATE _GLIBCXX_USE_CXX11_ABI=${_cxx11_abi}
                             TORCH_EXTENSION_NAME=_C TORCH_API_INCLUDE_EXTENSION_H)
  # PyPI's torch 2.x bundles its own fmt (12.x) in its include folder, which comes first: the
  # module then uses that fmt header-only, not the system's libfmt (9.x, which braid's libraries
  # link). Debian's torch has none of its own.
  find_path(_torch_fmt fmt/format.h PATHS ${_includes} NO_DEFAULT_PATH NO_CACHE)
  if(_torch_fmt AND NOT _torch_fmt STREQUAL "/usr/include")
    target_compile_definitions(${target} PRIVATE FMT_HEADER_ONLY)
    set(_fmt_lib)
  else()
    set(_fmt_lib fmt::fmt)
  endif()
  target_link_libraries(${target} PRIVATE braid_comm ${_libs} ${_fmt_lib} Threads::Threads)
  set_target_properties(${target} PROPERTIES
    OUTPUT_NAME _C PREFIX "" SUFFIX "${_ext_suffix}"
    CXX_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON
    LIBRARY_OUTPUT_DIRECTORY ${_package_dir})
  braid_part_artifacts(${part} $<TARGET_FILE:${target}>)

  # The pure-Python part next to the extension, so PYTHONPATH=<output_dir> imports the package.
  foreach(_src ${BRAID_TORCH_PY_SOURCES})
    configure_file(${_src} ${output_dir}/${_src} COPYONLY)
  endforeach()
endfunction()
