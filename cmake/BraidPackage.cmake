# `cpack -G DEB` (run in the build tree) packs the tree cmake/BraidInstall.cmake installs into one
# Debian package, prefix /usr; its dependencies come from dpkg-shlibdeps (dpkg-dev) over the
# binaries, plus the Python modules braid_torch and the tools import.
set(CPACK_PACKAGE_NAME braid)
set(CPACK_PACKAGE_VENDOR "braid")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "collective communications library: all-reduce and friends over shm, UCX, libfabric and TCP")
set(CPACK_PACKAGE_CONTACT "braid developers <braid@localhost>")
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(_braid_deb_depends python3)
if(BRAID_HAVE_TORCH)
  list(APPEND _braid_deb_depends python3-torch)
endif()
string(REPLACE ";" ", " CPACK_DEBIAN_PACKAGE_DEPENDS "${_braid_deb_depends}")
# libfabric and UCX are loaded when their transport is first used, not linked (so
# dpkg-shlibdeps does not see them): recommended where this build has those transports.
set(_braid_deb_recommends python3-matplotlib iproute2)
if(BRAID_HAVE_OFI)
  list(APPEND _braid_deb_recommends libfabric1)
endif()
if(BRAID_HAVE_UCX)
  list(APPEND _braid_deb_recommends libucx0)
endif()
string(REPLACE ";" ", " CPACK_DEBIAN_PACKAGE_RECOMMENDS "${_braid_deb_recommends}")
include(CPack)
