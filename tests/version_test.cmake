# version_test.cmake - one version everywhere. project(qkv VERSION ...) in CMakeLists.txt is
# the source of truth (passed here as VERSION); it must be what
#   - the QKV_VERSION_* macros of include/qkv.h say (source and installed copy),
#   - `qkv --version` prints on its first line (build tree and installed binary; the lines
#     after it name the SIMD path and the threads),
#   - the installed qkvConfigVersion.cmake and qkv.pc say,
#   - the man page's title line names,
#   - the shared library is named after (libqkv.so.X.Y.Z, SONAME libqkv.so.X);
# and configuring with a header that disagrees must fail.
#   cmake -DQKV=... -DBUILD_DIR=... -DSOURCE_DIR=... -DVERSION=... -DBINDIR=... -DLIBDIR=...
#         -DINCLUDEDIR=... [-DREADELF=...] -P version_test.cmake
string(RANDOM LENGTH 8 _rand)
set(tmp "${BUILD_DIR}/version_test.${_rand}")
set(prefix "${tmp}/prefix")
set(failures 0)
macro(expect what got want)
  if(NOT "${got}" STREQUAL "${want}")
    message(SEND_ERROR "${what}: '${got}', expected '${want}'")
    math(EXPR failures "${failures} + 1")
  else()
    message(STATUS "${what}: ${got}")
  endif()
endmacro()

# The header's macros.
function(header_version header out_var)
  file(STRINGS "${header}" lines REGEX "^#define QKV_VERSION_(MAJOR|MINOR|PATCH|STRING) ")
  foreach(part MAJOR MINOR PATCH STRING)
    set(${part} "?")
    foreach(line IN LISTS lines)
      if(line MATCHES "^#define QKV_VERSION_${part} +\"?([^\" ]+)\"?")
        set(${part} "${CMAKE_MATCH_1}")
      endif()
    endforeach()
  endforeach()
  set(${out_var} "${MAJOR}.${MINOR}.${PATCH} \"${STRING}\"" PARENT_SCOPE)
endfunction()
header_version("${SOURCE_DIR}/include/qkv.h" got)
expect("include/qkv.h QKV_VERSION_MAJOR.MINOR.PATCH \"QKV_VERSION_STRING\"" "${got}" "${VERSION} \"${VERSION}\"")

execute_process(COMMAND "${QKV}" --version OUTPUT_VARIABLE got OUTPUT_STRIP_TRAILING_WHITESPACE
                RESULT_VARIABLE rc)
string(REGEX REPLACE "\n.*" "" got "${got}")
expect("qkv --version (exit ${rc})" "${got}" "qkv ${VERSION}")

file(STRINGS "${SOURCE_DIR}/docs/qkv.1" got REGEX "^\\.TH ")
string(REGEX MATCH "\"qkv [^\"]*\"" got "${got}")
expect("docs/qkv.1 .TH" "${got}" "\"qkv ${VERSION}\"")

# The installed tree.
execute_process(COMMAND "${CMAKE_COMMAND}" --install "${BUILD_DIR}" --prefix "${prefix}"
                OUTPUT_QUIET ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  file(REMOVE_RECURSE "${tmp}")
  message(FATAL_ERROR "cmake --install failed: ${err}")
endif()
header_version("${prefix}/${INCLUDEDIR}/qkv.h" got)
expect("installed qkv.h" "${got}" "${VERSION} \"${VERSION}\"")
execute_process(COMMAND "${prefix}/${BINDIR}/qkv" --version OUTPUT_VARIABLE got
                OUTPUT_STRIP_TRAILING_WHITESPACE)
string(REGEX REPLACE "\n.*" "" got "${got}")
expect("installed qkv --version" "${got}" "qkv ${VERSION}")

set(PACKAGE_FIND_VERSION "${VERSION}")
string(REPLACE "." ";" _parts "${VERSION}")
list(GET _parts 0 PACKAGE_FIND_VERSION_MAJOR)
list(GET _parts 1 PACKAGE_FIND_VERSION_MINOR)
list(GET _parts 2 PACKAGE_FIND_VERSION_PATCH)
set(PACKAGE_FIND_VERSION_COUNT 3)
include("${prefix}/${LIBDIR}/cmake/qkv/qkvConfigVersion.cmake")
expect("installed qkvConfigVersion.cmake PACKAGE_VERSION" "${PACKAGE_VERSION}" "${VERSION}")
expect("qkvConfigVersion.cmake accepts ${VERSION} exactly" "${PACKAGE_VERSION_EXACT}" "TRUE")

file(STRINGS "${prefix}/${LIBDIR}/pkgconfig/qkv.pc" got REGEX "^Version:")
expect("installed qkv.pc" "${got}" "Version: ${VERSION}")

string(REGEX MATCH "^[0-9]+" major "${VERSION}")
if(NOT EXISTS "${prefix}/${LIBDIR}/libqkv.so.${VERSION}")
  message(SEND_ERROR "no ${LIBDIR}/libqkv.so.${VERSION} in the install")
  math(EXPR failures "${failures} + 1")
endif()
if(READELF)
  execute_process(COMMAND "${READELF}" -d "${prefix}/${LIBDIR}/libqkv.so.${VERSION}"
                  OUTPUT_VARIABLE dyn)
  string(REGEX MATCH "Library soname: \\[[^]]*\\]" got "${dyn}")
  expect("SONAME" "${got}" "Library soname: [libqkv.so.${major}]")
endif()

# A header that disagrees with project(): configuring must stop, naming both versions. Only
# CMakeLists.txt and the header are needed to get that far.
set(copy "${tmp}/mismatch")
file(MAKE_DIRECTORY "${copy}/include")
file(COPY "${SOURCE_DIR}/CMakeLists.txt" DESTINATION "${copy}")
file(READ "${SOURCE_DIR}/include/qkv.h" header)
string(REGEX REPLACE "#define QKV_VERSION_PATCH [0-9]+" "#define QKV_VERSION_PATCH 999" header "${header}")
file(WRITE "${copy}/include/qkv.h" "${header}")
execute_process(COMMAND "${CMAKE_COMMAND}" -S "${copy}" -B "${copy}/build"
                OUTPUT_QUIET ERROR_VARIABLE err RESULT_VARIABLE rc)
string(FIND "${err}" "update the QKV_VERSION_* macros" found)
if(rc EQUAL 0 OR found EQUAL -1)
  message(SEND_ERROR "configuring with QKV_VERSION_PATCH 999 did not fail as it should "
                     "(exit ${rc}): ${err}")
  math(EXPR failures "${failures} + 1")
else()
  message(STATUS "a header saying ${major}.x.999 stops the configuration")
endif()

file(REMOVE_RECURSE "${tmp}")
if(failures GREATER 0)
  message(FATAL_ERROR "${failures} version check(s) failed")
endif()
message(STATUS "version_test: ok, everything says ${VERSION}")
