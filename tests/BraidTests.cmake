# How braid's tests are registered. Every test joins the braid_suite fixture and gets
# BRAID_SKIP_LOG, so suite.skips (tests/suite/) can audit every skip after the others ran:
#   braid_gtest(TARGET LABEL label [TIMEOUT s] [RUN_SERIAL] [PRETTY_VALUES])
#                        one CTest test per GoogleTest case of TARGET (gtest_discover_tests)
#   braid_test_area()    first line of every tests/ folder: gives the add_test tests of that
#                        folder the suite's properties when the folder is done
set(BRAID_SKIP_LOG ${PROJECT_BINARY_DIR}/Testing/braid-skips.log)
set(BRAID_SUITE_FIXTURE braid_suite)
option(BRAID_STRICT_SKIPS "Fail the suite when a test skips for a missing package or part (tools/quickstart sets it: install-deps provides them all)" OFF)

function(braid_gtest target)
  cmake_parse_arguments(A "RUN_SERIAL;PRETTY_VALUES" "LABEL;TIMEOUT" "" ${ARGN})
  if(NOT A_LABEL)
    message(FATAL_ERROR "braid_gtest(${target}): LABEL is required")
  endif()
  set(_props LABELS ${A_LABEL} ENVIRONMENT "BRAID_SKIP_LOG=${BRAID_SKIP_LOG}"
             FIXTURES_REQUIRED ${BRAID_SUITE_FIXTURE})
  if(A_TIMEOUT)
    # Sanitized builds run several times slower (tools/sanitize-suite): so may their tests.
    if(BRAID_SANITIZE OR BRAID_TSAN)
      math(EXPR A_TIMEOUT "${A_TIMEOUT} * 5")
    endif()
    list(APPEND _props TIMEOUT ${A_TIMEOUT})
  endif()
  if(A_RUN_SERIAL)
    list(APPEND _props RUN_SERIAL TRUE)
  endif()
  set(_pretty NO_PRETTY_VALUES)
  if(A_PRETTY_VALUES)
    set(_pretty "")
  endif()
  gtest_discover_tests(${target} DISCOVERY_TIMEOUT 60 ${_pretty} PROPERTIES ${_props})
endfunction()

function(braid_apply_suite_properties)
  get_property(_tests DIRECTORY PROPERTY TESTS)
  foreach(_t ${_tests})
    get_property(_setup TEST ${_t} PROPERTY FIXTURES_SETUP)
    get_property(_cleanup TEST ${_t} PROPERTY FIXTURES_CLEANUP)
    if(NOT _setup AND NOT _cleanup)  # a fixture's own setup and cleanup are not its members
      set_property(TEST ${_t} APPEND PROPERTY ENVIRONMENT "BRAID_SKIP_LOG=${BRAID_SKIP_LOG}")
      set_property(TEST ${_t} APPEND PROPERTY FIXTURES_REQUIRED ${BRAID_SUITE_FIXTURE})
    endif()
  endforeach()
endfunction()

macro(braid_test_area)
  cmake_language(DEFER CALL braid_apply_suite_properties)
endmacro()
