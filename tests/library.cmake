# library.cmake - the tests of qkv as a library other programs build on (issue 7), included
# by the top-level CMakeLists.txt after the install rules:
#   consumer_test        install, then build tests/consumer with find_package and pkg-config,
#                        and import the installed Python package
#   symbols_test         libqkv.so exports the QKV_API functions of qkv.h and nothing else
#   version_test         project(), qkv.h, qkv --version, qkvConfigVersion.cmake, qkv.pc,
#                        the SONAME and the man page all say the same version
#   man_test             docs/qkv.1 names every command and option, and renders
#   example_header_sync  the example atop qkv.h is examples/header_example.c
# The two that install lock `qkv_install` (cmake --install writes install_manifest.txt in the
# build directory).
set(_qkv_san_flags "")
if(QKV_SANITIZE)
  # A sanitized libqkv needs its runtime in the program that links it.
  set(_qkv_san_flags "-fsanitize=address,undefined -fno-omit-frame-pointer")
endif()
add_test(NAME consumer_test COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/consumer_test.sh)
set_tests_properties(consumer_test PROPERTIES
  TIMEOUT 900 RESOURCE_LOCK qkv_install
  ENVIRONMENT "CMAKE_COMMAND=${CMAKE_COMMAND};QKV_BUILD_DIR=${PROJECT_BINARY_DIR};QKV_SOURCE_DIR=${PROJECT_SOURCE_DIR};QKV_VERSION=${PROJECT_VERSION};QKV_CC=${CMAKE_C_COMPILER};QKV_SAN_FLAGS=${_qkv_san_flags};PKG_CONFIG=${PKG_CONFIG_EXECUTABLE};QKV_BINDIR=${CMAKE_INSTALL_BINDIR};QKV_LIBDIR=${CMAKE_INSTALL_LIBDIR};QKV_INCLUDEDIR=${CMAKE_INSTALL_INCLUDEDIR};QKV_DATADIR=${CMAKE_INSTALL_DATADIR};QKV_MANDIR=${CMAKE_INSTALL_MANDIR};QKV_PYTHONDIR=${_qkv_pythondir};QKV_PYTHON=${QKV_INSTALL_PYTHON3};OMP_NUM_THREADS=1")

add_test(NAME symbols_test
         COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/symbols_test.sh ${CMAKE_NM}
                 $<TARGET_FILE:qkv_shared> ${PROJECT_SOURCE_DIR}/include/qkv.h)

add_test(NAME version_test
         COMMAND ${CMAKE_COMMAND} -DQKV=$<TARGET_FILE:qkv> -DBUILD_DIR=${PROJECT_BINARY_DIR}
                 -DSOURCE_DIR=${PROJECT_SOURCE_DIR} -DVERSION=${PROJECT_VERSION}
                 -DBINDIR=${CMAKE_INSTALL_BINDIR} -DLIBDIR=${CMAKE_INSTALL_LIBDIR}
                 -DINCLUDEDIR=${CMAKE_INSTALL_INCLUDEDIR} -DREADELF=${CMAKE_READELF}
                 -P ${CMAKE_CURRENT_LIST_DIR}/version_test.cmake)
set_tests_properties(version_test PROPERTIES TIMEOUT 300 RESOURCE_LOCK qkv_install)

add_test(NAME man_test
         COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/man_test.sh $<TARGET_FILE:qkv>
                 ${PROJECT_SOURCE_DIR}/docs/qkv.1)

add_test(NAME example_header_sync
         COMMAND ${CMAKE_COMMAND} -DHEADER=${PROJECT_SOURCE_DIR}/include/qkv.h
                 -DEXAMPLE=${PROJECT_SOURCE_DIR}/examples/header_example.c
                 -P ${CMAKE_CURRENT_LIST_DIR}/header_sync.cmake)
