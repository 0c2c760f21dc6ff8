# Writes build_info.cpp from core/build_info.cpp.in with the commit checked out when kiln is
# built, not when it was configured: a build after a new commit names that commit, and a build
# of a tree with uncommitted changes to tracked files says "-dirty". Run with cmake -P at every
# build (CMakeLists.txt's kiln_build_info target); configure_file leaves the file as it is when
# nothing changed, so nothing recompiles.
#
# Inputs (-D): KILN_SOURCE_DIR, KILN_BUILD_INFO_OUTPUT, PROJECT_VERSION, KILN_BUILD_FLAGS,
# KILN_WITH_CUDA_BOOL, KILN_CUDA_EMULATED_BOOL.
execute_process(COMMAND git rev-parse --short=12 HEAD WORKING_DIRECTORY ${KILN_SOURCE_DIR}
                OUTPUT_VARIABLE KILN_GIT_COMMIT OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(NOT KILN_GIT_COMMIT)
  set(KILN_GIT_COMMIT unknown)
else()
  execute_process(COMMAND git diff --quiet HEAD -- WORKING_DIRECTORY ${KILN_SOURCE_DIR}
                  RESULT_VARIABLE _kiln_tree_changed ERROR_QUIET)
  if(_kiln_tree_changed EQUAL 1)
    string(APPEND KILN_GIT_COMMIT "-dirty")
  endif()
endif()
configure_file(${KILN_SOURCE_DIR}/core/build_info.cpp.in ${KILN_BUILD_INFO_OUTPUT} @ONLY)
