/* paths.h - the sizes of the buffers that hold a path, each named for what it holds. Each
 * size leaves room for what qkv appends to the one before it; a path that does not fit is
 * refused ("path too long"), never cut short. (The plots' own, PLOT_PATH_LEN, is plot.h's.) */
#ifndef QKV_PATHS_H
#define QKV_PATHS_H

/* A path as qkv takes it in: a file the user names (--data, --heldout), as a model file
 * records it; a run's directory as run_files writes into it; a file atomic_open writes. */
#define FILE_PATH_LEN 1024
/* A run directory (--out), or a path the user gives with the file name qkv appends to it
 * (DIR/model.safetensors, DIR/scaling.dat): FILE_PATH_LEN and 76 bytes for "/" and a name. */
#define RUN_PATH_LEN 1100
/* A file or folder directly in a run directory (DIR/metrics.csv, DIR/attention): RUN_PATH_LEN
 * and 100 bytes for its name. */
#define RUN_FILE_PATH_LEN 1200
/* An entry that readdir lists in a run directory or one of its folders
 * (DIR/snapshots/step100_...): RUN_FILE_PATH_LEN and 300 bytes, more than any name (NAME_MAX
 * is 255). */
#define RUN_ENTRY_PATH_LEN 1500
/* A path the system hands over or takes whole: Linux's PATH_MAX (readlink of /proc/self/exe,
 * every parent directory io_make_dirs creates). */
#define SYSTEM_PATH_LEN 4096

#endif
