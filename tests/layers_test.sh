#!/usr/bin/env bash
# layers_test.sh SRC - the headers mean what they say (docs/architecture.md, "Headers"):
#   1. only src/engine/ includes engine/internal.h, the engine's own shared declarations;
#   2. nothing in src/cli/ includes kernels/kernels.h or omp.h: the CLI reaches the kernels
#      (the SIMD path, the threads, the fused backward's form) through the library's calls.
set -u
SRC=${1:?usage: layers_test.sh path/to/src}
status=0
bad=$(grep -rlE '#include "(engine/)?internal.h"' "$SRC" --include='*.c' --include='*.h' |
    grep -v "^$SRC/engine/")
[ -z "$bad" ] || { echo "layers_test: engine/internal.h included outside src/engine: $bad"; status=1; }
bad=$(grep -lE '#include [<"](kernels/)?(kernels\.h|omp\.h)[>"]' "$SRC"/cli/*.c "$SRC"/cli/*.h)
[ -z "$bad" ] || { echo "layers_test: src/cli reaches into the kernels: $bad"; status=1; }
[ "$status" = 0 ] && echo "layers_test: internal.h stays in src/engine; src/cli includes no kernels.h or omp.h"
exit $status
