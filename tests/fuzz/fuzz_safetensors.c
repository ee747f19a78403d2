/* fuzz_safetensors.c - libFuzzer target: the safetensors reader, and on top of it the model
 * loader, on arbitrary bytes.
 *
 * The input is a whole file. st_parse (qkv_st_load without the file) must refuse anything
 * malformed with a status and a message, never crash, leak or read out of bounds. What it
 * accepts is then used the way qkv uses files: every name, shape and metadata lookup, every
 * small tensor read back, and trainer_load_st, which reads a model's config from the metadata
 * and rebuilds the trainer from the tensors. A memory limit of 64 MiB keeps the models that
 * fuzzed metadata asks for small: bigger ones are refused (QKV_ERR_NOMEM) before allocating.
 *
 * Built with -fsanitize=fuzzer,address,undefined under QKV_FUZZ=ON; replay.c runs the seed
 * corpus (tests/fuzz/corpus/safetensors) through it in the normal build. */
#include "io/io.h"
#include "engine/internal.h"
#include "train/checkpoint.h"

#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    memory_limit_set(64.0 * (1 << 20));
    unsigned char *bytes = malloc(size ? size : 1);
    if (!bytes) return 0;
    memcpy(bytes, data, size);
    qkv_st *st;
    if (st_parse("fuzz.safetensors", bytes, size, &st) != QKV_OK) return 0;

    qkv_ctx *ctx = qkv_ctx_new(0);
    int n = qkv_st_count(st);
    for (int i = 0; i < n; i++) {
        const char *name = qkv_st_name(st, i);
        qkv_dtype dtype;
        int ndim;
        int64_t shape[QKV_MAX_DIMS], numel = 1;
        if (!name || !qkv_st_info(st, name, &dtype, &ndim, shape)) __builtin_trap();
        for (int d = 0; d < ndim; d++) numel = shape[d] >= 1 && numel <= (1 << 16) ? numel * shape[d] : 0;
        if (numel < 1 || numel > (1 << 16) || !ctx) continue; /* qkv tensors have no empty dims */
        qkv_tensor *t = qkv_new(ctx, dtype, ndim, shape);
        if (qkv_st_read(st, name, t) != QKV_OK) __builtin_trap(); /* its own shape and dtype */
        /* the wrong dtype must be refused, not read */
        qkv_tensor *other = qkv_new(ctx, dtype == QKV_F32 ? QKV_F64 : QKV_F32, ndim, shape);
        if (qkv_st_read(st, name, other) == QKV_OK) __builtin_trap();
    }
    (void)qkv_st_name(st, -1);
    (void)qkv_st_name(st, n);
    (void)qkv_st_info(st, "no such tensor", NULL, NULL, NULL);
    const char *keys[] = {"format", "task", "seq_len", "vocab", "d_model", "seed", "data_rng"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) (void)qkv_st_meta(st, keys[i]);
    qkv_ctx_free(ctx);

    trainer t;
    if (trainer_load_st(&t, st, "fuzz.safetensors") == QKV_OK) trainer_free(&t);
    qkv_st_free(st);
    return 0;
}
