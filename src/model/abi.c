/* abi.c - the sizes of the public structs, for bindings from other languages (qkv.h:
 * qkv_struct_size). A binding that copies a layout (python/qkv/_lib.py) checks its copy's size
 * against the library's, so that a field added here is an error there, not wrong memory. */
#include "qkv.h"

#include <string.h>

size_t qkv_struct_size(const char *name) {
    static const struct {
        const char *name;
        size_t size;
    } sizes[] = {
        {"qkv_tensor", sizeof(qkv_tensor)},
        {"qkv_rng", sizeof(qkv_rng)},
        {"qkv_model_config", sizeof(qkv_model_config)},
        {"qkv_model", sizeof(qkv_model)},
        {"qkv_task", sizeof(qkv_task)},
        {"qkv_layer_trace", sizeof(qkv_layer_trace)},
        {"qkv_head_edit", sizeof(qkv_head_edit)},
        {"qkv_probe", sizeof(qkv_probe)},
    };
    for (size_t i = 0; name && i < sizeof sizes / sizeof sizes[0]; i++)
        if (!strcmp(name, sizes[i].name)) return sizes[i].size;
    return 0;
}
