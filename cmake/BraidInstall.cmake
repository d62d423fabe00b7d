# What `cmake --install build --prefix P` (and the Debian package, cmake/BraidPackage.cmake) gives a
# user: libbraid.so with its SONAME, the public headers under P/include/braid/, the tools and the
# bench binaries in P/bin, braid_torch where the chosen Python finds it, a CMake package
# (find_package(braid) -> braid::braid) and a pkg-config file (pkg-config --cflags --libs braid).
# Every destination is relative to the prefix, so the tree can be moved (dpkg -x, --prefix).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# The library and its headers; the exported target carries the include directory.
target_include_directories(braid INTERFACE $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
                                           $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
install(TARGETS braid EXPORT braidTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime NAMELINK_COMPONENT dev)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/braid DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        COMPONENT dev FILES_MATCHING PATTERN "*.h" PATTERN "*.hpp")

# The CMake package.
set(_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/braid)
install(EXPORT braidTargets NAMESPACE braid:: DESTINATION ${_cmake_dir} COMPONENT dev)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/package/braidConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/package/braidConfig.cmake
                              INSTALL_DESTINATION ${_cmake_dir})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/package/braidConfigVersion.cmake
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/package/braidConfig.cmake
              ${PROJECT_BINARY_DIR}/package/braidConfigVersion.cmake
        DESTINATION ${_cmake_dir} COMPONENT dev)

# The pkg-config file finds the prefix from its own place (${pcfiledir}), so it moves with it.
file(RELATIVE_PATH BRAID_PC_TO_PREFIX /prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig /prefix)
configure_file(${PROJECT_SOURCE_DIR}/cmake/package/braid.pc.in ${PROJECT_BINARY_DIR}/package/braid.pc
               @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/package/braid.pc
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT dev)

# Programs: the launcher, the topology tools, the trainer, and the nccl-tests style benches.
foreach(_prog braidrun braid-topo braid-sim braid-train all_reduce_perf reduce_scatter_perf
              all_gather_perf broadcast_perf reduce_perf)
  if(TARGET ${_prog})
    install(TARGETS ${_prog} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT runtime)
  endif()
endforeach()
install(PROGRAMS ${PROJECT_SOURCE_DIR}/tools/plot/braid-plot ${PROJECT_SOURCE_DIR}/tools/plot/braid-plot-train
                 ${PROJECT_SOURCE_DIR}/tools/trace/braid-trace ${PROJECT_SOURCE_DIR}/tools/doctor/braid-doctor
        DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT runtime)
# braid-cluster finds its package beside its real path: the folder goes to share/, a link to bin/.
set(_cluster_dir ${CMAKE_INSTALL_DATADIR}/braid/cluster)
install(PROGRAMS ${PROJECT_SOURCE_DIR}/tools/cluster/braid-cluster
                 ${PROJECT_SOURCE_DIR}/tools/cluster/netns-rsh
        DESTINATION ${_cluster_dir} COMPONENT runtime)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/tools/cluster/braidcluster DESTINATION ${_cluster_dir}
        COMPONENT runtime FILES_MATCHING PATTERN "*.py" PATTERN "__pycache__" EXCLUDE)
file(RELATIVE_PATH _cluster_link /prefix/${CMAKE_INSTALL_BINDIR}
     /prefix/${_cluster_dir}/braid-cluster)
file(MAKE_DIRECTORY ${PROJECT_BINARY_DIR}/package/bin)
file(CREATE_LINK ${_cluster_link} ${PROJECT_BINARY_DIR}/package/bin/braid-cluster SYMBOLIC)
install(FILES ${PROJECT_BINARY_DIR}/package/bin/braid-cluster DESTINATION ${CMAKE_INSTALL_BINDIR}
        COMPONENT runtime)
