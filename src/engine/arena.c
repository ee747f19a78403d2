/* arena.c - contexts: bump allocators that own a step's tensors and are reset in one go. */
#include "engine/internal.h"

#define ARENA_ALIGN 64
#define ARENA_DEFAULT (1u << 20)

struct arena_block {
    struct arena_block *next; /* older block */
    size_t size, used;
    _Alignas(ARENA_ALIGN) unsigned char data[];
};

static struct arena_block *block_new(qkv_ctx *ctx, size_t size) {
    struct arena_block *b = aligned_alloc(ARENA_ALIGN, (sizeof *b + size + ARENA_ALIGN - 1) /
                                                           ARENA_ALIGN * ARENA_ALIGN);
    if (!b) return NULL;
    b->next = NULL;
    b->size = size;
    b->used = 0;
    ctx->mallocs++;
    ctx->capacity += size;
    return b;
}

qkv_ctx *qkv_ctx_new(size_t capacity) {
    qkv_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx) return NULL;
    ctx->blocks = block_new(ctx, capacity ? capacity : ARENA_DEFAULT);
    if (!ctx->blocks) {
        free(ctx);
        return NULL;
    }
    return ctx;
}

void qkv_ctx_free(qkv_ctx *ctx) {
    if (!ctx) return;
    for (struct arena_block *b = ctx->blocks, *next; b; b = next) {
        next = b->next;
        free(b);
    }
    free(ctx->params);
    free(ctx);
}

void qkv_ctx_reset(qkv_ctx *ctx) {
    /* More than one block means the step outgrew the arena: replace them all with one block
     * that holds everything, so that the next step of the same shape never calls malloc. */
    if (ctx->blocks->next) {
        size_t total = ctx->capacity;
        for (struct arena_block *b = ctx->blocks, *next; b; b = next) {
            next = b->next;
            free(b);
        }
        ctx->capacity = 0;
        ctx->blocks = block_new(ctx, total);
        QKV_CHECK(ctx->blocks, "arena", "out of memory growing a context to %zu bytes", total);
    }
    ctx->blocks->used = 0;
    ctx->used = 0;
    ctx->tape = NULL;
    ctx->nparams = 0;
}

void *qkv_ctx_alloc(qkv_ctx *ctx, size_t bytes) {
    return memset(arena_alloc_raw(ctx, bytes), 0, bytes);
}

void *arena_alloc_raw(qkv_ctx *ctx, size_t bytes) {
    size_t need = (bytes + ARENA_ALIGN - 1) / ARENA_ALIGN * ARENA_ALIGN;
    struct arena_block *b = ctx->blocks;
    if (b->size - b->used < need) {
        size_t size = b->size * 2 > need ? b->size * 2 : need;
        struct arena_block *nb = block_new(ctx, size);
        QKV_CHECK(nb, "arena", "out of memory allocating %zu bytes", bytes);
        nb->next = b;
        ctx->blocks = b = nb;
    }
    void *p = b->data + b->used;
    b->used += need;
    ctx->used += need;
    return p;
}

void qkv_ctx_set_no_grad(qkv_ctx *ctx, bool no_grad) { ctx->no_grad = no_grad; }
bool qkv_ctx_no_grad(const qkv_ctx *ctx) { return ctx->no_grad; }
size_t qkv_ctx_used(const qkv_ctx *ctx) { return ctx->used; }
size_t qkv_ctx_capacity(const qkv_ctx *ctx) { return ctx->capacity; }
uint64_t qkv_ctx_mallocs(const qkv_ctx *ctx) { return ctx->mallocs; }
