# `cmake --install` puts the layers' libraries, their public headers and an exported package
# config in the prefix, so a consumer writes find_package(kiln) and links
#   kiln::kiln         every layer but lm: kiln::core, kiln::nn, kiln::optim, kiln::data and
#                      kiln::distributed (each can be linked alone too)
#   kiln::lm           the language-model toolkit (Trainer, checkpoints, evaluation, generation)
# An emulated build (KILN_CUDA=EMULATE, a test build) installs the emulator beside them, which
# its kiln::core needs; a release build has none.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(kiln_installed_targets kiln kiln_core kiln_nn kiln_optim kiln_data kiln_distributed kiln_lm)
if(KILN_CUDA_EMULATED)
  list(APPEND kiln_installed_targets kiln_cuda_emulator)
endif()
install(TARGETS ${kiln_installed_targets} EXPORT kilnTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
foreach(dir core nn optim data lm)
  install(DIRECTORY ${dir}/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/kiln/${dir}
          FILES_MATCHING PATTERN "*.h" PATTERN "cuda" EXCLUDE PATTERN "cpu" EXCLUDE)
endforeach()
# distributed/'s public headers; the rest (backends, watchdog, start-up) is internal.
install(FILES distributed/communicator.h distributed/gradient_sync.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/kiln/distributed)
install(EXPORT kilnTargets NAMESPACE kiln:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/kiln)
configure_package_config_file(cmake/kilnConfig.cmake.in ${PROJECT_BINARY_DIR}/kilnConfig.cmake
                              INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/kiln)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/kilnConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/kilnConfig.cmake ${PROJECT_BINARY_DIR}/kilnConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/kiln)
