# `cmake --install` puts the library, its public headers and an exported package config in the
# prefix, so a consumer writes find_package(kiln) and links kiln::kiln (and kiln::lm for the
# language-model toolkit).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(TARGETS kiln kiln_lm EXPORT kilnTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
foreach(dir core nn optim data lm)
  install(DIRECTORY ${dir}/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/kiln/${dir}
          FILES_MATCHING PATTERN "*.h" PATTERN "cuda" EXCLUDE PATTERN "cpu" EXCLUDE)
endforeach()
# dist/'s public headers; the rest of dist/ (backends, watchdog, start-up) is internal.
install(FILES dist/communicator.h dist/gradient_sync.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/kiln/dist)
install(EXPORT kilnTargets NAMESPACE kiln:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/kiln)
configure_package_config_file(cmake/kilnConfig.cmake.in ${PROJECT_BINARY_DIR}/kilnConfig.cmake
                              INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/kiln)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/kilnConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/kilnConfig.cmake ${PROJECT_BINARY_DIR}/kilnConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/kiln)
