#!/bin/sh
# consumer_test.sh - qkv as a library: installs this build into a temporary prefix, then builds
# tests/consumer (a project that sees only the installed tree) four ways and runs each:
#   1. find_package(qkv), linking qkv::qkv         (the shared library)
#   2. find_package(qkv), linking qkv::qkv_static  (libqkv.a and its dependencies)
#   3. pkg-config from CMake: pkg_check_modules(QKV qkv)
#   4. pkg-config by hand: cc $(pkg-config --cflags --libs qkv), and the static link from
#      pkg-config --static (Libs.private, Requires.private) with libqkv.a
# It also checks the installed files and runs the installed qkv.
# Environment (set by tests/CMakeLists.txt): CMAKE_COMMAND, QKV_BUILD_DIR, QKV_SOURCE_DIR,
# QKV_VERSION, QKV_CC, QKV_SAN_FLAGS (the -fsanitize flags of a QKV_SANITIZE build, to pass on),
# PKG_CONFIG, QKV_BINDIR, QKV_LIBDIR, QKV_INCLUDEDIR, QKV_DATADIR, QKV_MANDIR, QKV_PYTHONDIR
# (install dirs, relative to the prefix), QKV_PYTHON (a python3 for the Python package).
set -eu

tmp=$(mktemp -d "${TMPDIR:-/tmp}/qkv-consumer.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
trap 'exit 1' INT TERM
prefix=$tmp/prefix
src=$QKV_SOURCE_DIR/tests/consumer
libdir=$prefix/$QKV_LIBDIR
major=${QKV_VERSION%%.*}
san=${QKV_SAN_FLAGS:-}

fail() {
    echo "consumer_test: FAILED: $*" >&2
    exit 1
}
# Runs a command with its output in a log, shown only when it fails.
quiet() {
    log=$tmp/log.txt
    if ! "$@" >"$log" 2>&1; then
        cat "$log" >&2
        fail "$*"
    fi
}

echo "== cmake --install $QKV_BUILD_DIR --prefix $prefix"
quiet "$CMAKE_COMMAND" --install "$QKV_BUILD_DIR" --prefix "$prefix"
for f in "$QKV_INCLUDEDIR/qkv.h" "$QKV_BINDIR/qkv" \
         "$QKV_LIBDIR/libqkv.a" "$QKV_LIBDIR/libqkv.so" "$QKV_LIBDIR/libqkv.so.$major" \
         "$QKV_LIBDIR/libqkv.so.$QKV_VERSION" \
         "$QKV_LIBDIR/cmake/qkv/qkvConfig.cmake" "$QKV_LIBDIR/cmake/qkv/qkvConfigVersion.cmake" \
         "$QKV_LIBDIR/cmake/qkv/qkvTargets.cmake" "$QKV_LIBDIR/pkgconfig/qkv.pc" \
         "$QKV_MANDIR/man1/qkv.1" "$QKV_DATADIR/qkv/scripts/attention.gp"; do
    [ -e "$prefix/$f" ] || fail "cmake --install did not install $f"
done
for gp in "$QKV_SOURCE_DIR"/scripts/*.gp; do
    [ -e "$prefix/$QKV_DATADIR/qkv/scripts/${gp##*/}" ] || fail "${gp##*/} is not installed"
done
[ -L "$libdir/libqkv.so" ] && [ -L "$libdir/libqkv.so.$major" ] ||
    fail "libqkv.so and libqkv.so.$major should be symbolic links to libqkv.so.$QKV_VERSION"
got=$("$prefix/$QKV_BINDIR/qkv" --version | head -n 1) || fail "the installed qkv --version failed"
[ "$got" = "qkv $QKV_VERSION" ] || fail "the installed qkv says '$got', expected 'qkv $QKV_VERSION'"

# The installed qkv plots with the installed scripts (found from the binary, before the
# source tree's), when gnuplot is there.
if command -v gnuplot >/dev/null 2>&1; then
    echo "== installed qkv train + plot"
    quiet env QKV_SCRIPTS= "$prefix/$QKV_BINDIR/qkv" train --steps 2 --eval-every 1 --quiet \
        --threads 1 --out "$tmp/run"
    quiet env QKV_SCRIPTS= "$prefix/$QKV_BINDIR/qkv" plot "$tmp/run"
    [ -s "$tmp/run/plots/curves.png" ] || fail "the installed qkv plot made no curves.png"
fi

# The installed Python package loads the installed libqkv (the path its _install.py gives),
# when there is a python3 with numpy (QKV_PYTHON, QKV_PYTHONDIR: from tests/library.cmake)
# and the library is not built with a sanitizer (whose runtime python3 would not load first).
if [ -z "$san" ] && [ -n "${QKV_PYTHON:-}" ] && "$QKV_PYTHON" -c "import numpy" >/dev/null 2>&1; then
    echo "== installed Python package"
    [ -e "$prefix/$QKV_PYTHONDIR/qkv/__init__.py" ] && [ -e "$prefix/$QKV_PYTHONDIR/qkv/_install.py" ] ||
        fail "cmake --install did not install the Python package into $QKV_PYTHONDIR/qkv"
    quiet "$prefix/$QKV_BINDIR/qkv" train --task induction --steps 2 --eval-every 2 --quiet \
        --threads 1 --out "$tmp/py_run"
    quiet env -u QKV_LIBRARY PYTHONPATH="$prefix/$QKV_PYTHONDIR" "$QKV_PYTHON" -c "
import os, sys, qkv
want = os.path.realpath('$libdir/libqkv.so.$major')
if os.path.realpath(qkv.library_path) != want:
    sys.exit('qkv.library_path is %s, not the installed %s' % (qkv.library_path, want))
m = qkv.load('$tmp/py_run')
logits, cache = m.run_with_cache(m.to_tokens(' '.join(['1'] * m.cfg.n_ctx)))
assert logits.shape == (1, m.cfg.n_ctx, m.cfg.d_vocab) and 'blocks.0.attn.hook_pattern' in cache
"
fi

ld_path="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# Runs a consumer binary; `shared` or `static` says what it must (not) be linked to.
run() {
    exe=$1 kind=$2
    if command -v readelf >/dev/null 2>&1; then
        needed=$(readelf -d "$exe" | grep NEEDED || true)
        case $kind in
        shared) echo "$needed" | grep -q "\[libqkv\.so\.$major\]" ||
                    fail "$exe does not need libqkv.so.$major: $needed" ;;
        static) ! echo "$needed" | grep -q libqkv || fail "$exe needs libqkv.so: $needed" ;;
        esac
    fi
    if [ "$kind" = shared ] && command -v ldd >/dev/null 2>&1; then
        LD_LIBRARY_PATH=$ld_path ldd "$exe" | grep -q "libqkv\.so\.$major => $libdir/" ||
            fail "$exe does not load the installed libqkv: $(LD_LIBRARY_PATH=$ld_path ldd "$exe")"
    fi
    mkdir -p "$tmp/files"
    LD_LIBRARY_PATH=$ld_path "$exe" "$tmp/files" || fail "$exe failed"
}

# A CMake build of tests/consumer. $1: the build's name; the rest: options to cmake.
cmake_consumer() {
    name=$1
    shift
    echo "== cmake consumer: $name"
    quiet "$CMAKE_COMMAND" -S "$src" -B "$tmp/$name" -DCMAKE_BUILD_TYPE=Debug \
        -DCMAKE_C_COMPILER="$QKV_CC" -DCMAKE_C_FLAGS="$san" -DCMAKE_EXE_LINKER_FLAGS="$san" \
        -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF "$@"
    quiet "$CMAKE_COMMAND" --build "$tmp/$name"
}

cmake_consumer find-package-shared -DCMAKE_PREFIX_PATH="$prefix" -DQKV_LINK=shared
grep -q "^qkv_DIR:PATH=$libdir/cmake/qkv\$" "$tmp/find-package-shared/CMakeCache.txt" ||
    fail "find_package(qkv) did not find the install in $prefix: $(grep qkv_DIR "$tmp/find-package-shared/CMakeCache.txt")"
run "$tmp/find-package-shared/consumer" shared

cmake_consumer find-package-static -DCMAKE_PREFIX_PATH="$prefix" -DQKV_LINK=static
run "$tmp/find-package-static/consumer" static

PKG_CONFIG_PATH="$libdir/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
export PKG_CONFIG_PATH
cmake_consumer pkg-check-modules -DQKV_LINK=pkg-config -DPKG_CONFIG_EXECUTABLE="$PKG_CONFIG"
run "$tmp/pkg-check-modules/consumer" shared

echo "== pkg-config and cc"
got=$("$PKG_CONFIG" --modversion qkv) || fail "pkg-config does not find qkv in $libdir/pkgconfig"
[ "$got" = "$QKV_VERSION" ] || fail "pkg-config --modversion qkv says $got, expected $QKV_VERSION"
cflags=$("$PKG_CONFIG" --cflags qkv)
libs=$("$PKG_CONFIG" --libs qkv)
echo "   --cflags: $cflags"
echo "   --libs:   $libs"
found=
for flag in $cflags; do
    case $flag in -I*) [ "${flag#-I}/qkv.h" -ef "$prefix/$QKV_INCLUDEDIR/qkv.h" ] && found=1 ;; esac
done
[ -n "$found" ] || fail "pkg-config --cflags qkv does not name $prefix/$QKV_INCLUDEDIR: $cflags"
mkdir -p "$tmp/pkg-config-cc"
# shellcheck disable=SC2086 # the flags are lists of words
quiet "$QKV_CC" -std=c11 -Wall -Wextra -Wpedantic -Werror $san $cflags \
    -o "$tmp/pkg-config-cc/consumer" "$src/main.c" $libs -lm
run "$tmp/pkg-config-cc/consumer" shared
# Static: libqkv.a by path in place of -lqkv (the linker would take libqkv.so), and the rest
# from Libs.private and Requires.private.
static_libs=$("$PKG_CONFIG" --static --libs qkv)
echo "   --static --libs: $static_libs"
static_libs=$(echo " $static_libs " | sed "s# -lqkv # $libdir/libqkv.a #")
# shellcheck disable=SC2086
quiet "$QKV_CC" -std=c11 -Wall -Wextra -Wpedantic -Werror $san $cflags \
    -o "$tmp/pkg-config-cc/consumer-static" "$src/main.c" $static_libs -lm
run "$tmp/pkg-config-cc/consumer-static" static

echo "consumer_test: ok (find_package shared and static, pkg_check_modules, pkg-config + cc shared and static)"
