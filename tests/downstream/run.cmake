# Installs the kiln of BUILD_DIR into a temporary prefix, then configures, builds and runs the
# consumer project against it with find_package(kiln). Used by CTest (tests/CMakeLists.txt).
set(prefix ${WORK_DIR}/prefix)
file(REMOVE_RECURSE ${WORK_DIR})
execute_process(COMMAND ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix}
                RESULT_VARIABLE status)
if(status)
  message(FATAL_ERROR "installing kiln failed")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${WORK_DIR}/consumer
                        -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_BUILD_TYPE=Release
                RESULT_VARIABLE status)
if(status)
  message(FATAL_ERROR "configuring the consumer with find_package(kiln) failed")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${WORK_DIR}/consumer RESULT_VARIABLE status)
if(status)
  message(FATAL_ERROR "building the consumer failed")
endif()
file(STRINGS ${WORK_DIR}/consumer/CMakeFiles/consumer.dir/flags.make flags REGEX "CXX_FLAGS")
if(flags MATCHES "march=|trapping-math")
  message(FATAL_ERROR "kiln's own code generation flags leaked to the consumer: ${flags}")
endif()
execute_process(COMMAND ${WORK_DIR}/consumer/consumer RESULT_VARIABLE status)
if(status)
  message(FATAL_ERROR "the consumer failed")
endif()
