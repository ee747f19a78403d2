/* maps.h - attention maps as text: one gnuplot-ready matrix per layer and head, queries as
 * rows and keys as columns, each labelled position:token (attention/, gradients/, snapshots/
 * of a run directory; docs/plots.md reads them). */
#ifndef QKV_IO_MAPS_H
#define QKV_IO_MAPS_H

#include "qkv.h"

#define MAP_LABEL 32 /* bytes of a token's label */

/* What the maps of one example are of: their sizes, and the labels of their rows and columns. */
typedef struct {
    const char *task;   /* the task's name, for the header line */
    int layers, heads;
    int keys, queries;  /* columns T, rows Tq (T, or an encoder-decoder's To) */
    bool decoder;       /* rows are decoder positions, labelled by their targets */
    const char (*key_label)[MAP_LABEL];   /* [keys]: the tokens */
    const char (*query_label)[MAP_LABEL]; /* [queries]: the tokens, or the targets ("_": none) */
} map_labels;

/* Writes maps (layers, heads, queries, keys) as DIR/SUB/<prefix>layer<L>_head<H><suffix>.dat,
 * each headed by a comment saying `what` they are, under temporary names (io/atomic.c). SUB
 * is created if missing, and must be a real directory. */
qkv_status maps_write(const char *dir, const char *sub, const char *prefix, const char *suffix,
                      const char *what, const map_labels *labels, const float *maps);

/* Reads maps that maps_write wrote back into maps (layers, heads, queries, keys): the numbers
 * as the files hold them (6 significant digits). QKV_ERR_IO when a file cannot be opened,
 * QKV_ERR_FORMAT when one does not hold a queries x keys map. */
qkv_status maps_read(const char *dir, const char *sub, const char *prefix, const char *suffix,
                     int layers, int heads, int queries, int keys, float *maps);

#endif
