# Cross-compiling qkv for 64-bit ARM Linux with Debian's cross toolchain, and running its tests
# under qemu-user:
#
#   apt-get install gcc-aarch64-linux-gnu qemu-user        (the compiler, libgomp, the emulator)
#   dpkg --add-architecture arm64 && apt-get update
#   apt-get install check:arm64 libcjson-dev:arm64 liblapack-dev:arm64   (the arm64 libraries)
#   cmake -S . -B build-aarch64 -DCMAKE_TOOLCHAIN_FILE=cmake/toolchain-aarch64-linux-gnu.cmake
#   cmake --build build-aarch64 && ctest --test-dir build-aarch64 -L unit
#
# ctest runs every test program through CMAKE_CROSSCOMPILING_EMULATOR (qemu-aarch64 with the
# arm64 C library's directory as its prefix). scripts/setup.sh --cross installs all of the above.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(_qkv_triple aarch64-linux-gnu)

set(CMAKE_C_COMPILER ${_qkv_triple}-gcc)
# Debian's multiarch layout: the arm64 libraries live in /usr/lib/aarch64-linux-gnu, the C
# library of the cross compiler in /usr/aarch64-linux-gnu. Programs and build tools (pkg-config)
# come from the host; libraries and headers only from the target's directories.
set(CMAKE_FIND_ROOT_PATH /usr/${_qkv_triple})
set(CMAKE_LIBRARY_ARCHITECTURE ${_qkv_triple})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
# pkg-config reads the arm64 .pc files only (check, libcjson, lapack), never amd64's.
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/${_qkv_triple}/pkgconfig:/usr/share/pkgconfig)
set(ENV{PKG_CONFIG_PATH} "")

find_program(QKV_QEMU_AARCH64 NAMES qemu-aarch64 qemu-aarch64-static)
if(QKV_QEMU_AARCH64)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${QKV_QEMU_AARCH64} -L /usr/${_qkv_triple})
endif()
