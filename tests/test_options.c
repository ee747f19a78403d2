/* test_options.c - train's option schema (src/train/options.c) against everything that repeats
 * it: the help of each row names its default, the man page has an entry for every option with
 * the same default and range, a run's summary.json saves every option a run is made of, the
 * library refuses what the command line refuses, and qkv_train_defaults gives what the
 * schema's defaults say. */
#include "qkv.h"
#include "engine/engine.h"
#include "train/options.h"
#include "train/run.h"

#include "fixtures.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef QKV_SOURCE_DIR
#error "QKV_SOURCE_DIR must name the source tree (tests/CMakeLists.txt sets it)"
#endif

static char *read_file(const char *path) {
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    char *text = malloc((size_t)n + 1);
    ck_assert_ptr_nonnull(text);
    ck_assert_int_eq(fread(text, 1, (size_t)n, f), (size_t)n);
    text[n] = '\0';
    fclose(f);
    return text;
}

/* The page's text of `qkv train`'s section, "\-" read as "-". */
static char *man_train_section(void) {
    char *page = read_file(QKV_SOURCE_DIR "/docs/qkv.1");
    char *w = page;
    for (const char *r = page; *r; r++) {
        if (r[0] == '\\' && r[1] == '-') r++;
        *w++ = *r;
    }
    *w = '\0';
    char *start = strstr(page, ".SS \"qkv train");
    ck_assert_ptr_nonnull(start);
    char *end = strstr(start + 4, "\n.SS ");
    ck_assert_ptr_nonnull(end);
    *end = '\0';
    memmove(page, start, strlen(start) + 1);
    return page;
}

/* The man page's entry of --flag: from its ".BI --flag" or ".B --flag" line to the next ".TP"
 * or ".PP" (NULL when the page has none). Cut in place in `section`'s copy `entry`. */
static bool man_entry(const char *section, const char *flag, char *entry, size_t len) {
    char bi[64], b[64];
    snprintf(bi, sizeof bi, "\n.BI --%s ", flag);
    snprintf(b, sizeof b, "\n.B --%s\n", flag);
    const char *at = strstr(section, bi);
    if (!at) at = strstr(section, b);
    if (!at) return false;
    snprintf(entry, len, "%s", at + 1);
    for (char *p = entry; *p; p++)
        if (!strncmp(p, "\n.TP", 4) || !strncmp(p, "\n.PP", 4)) {
            *p = '\0';
            break;
        }
    return true;
}

START_TEST(test_help_names_each_default) {
    for (const train_option *r = train_option_table; r->flag || r->help; r++) {
        if (!r->flag || !r->deflt) continue;
        char want[128], want_colon[128];
        snprintf(want, sizeof want, "default %s", r->deflt);
        snprintf(want_colon, sizeof want_colon, "default: %s", r->deflt);
        /* the help's lines joined: a default may wrap */
        char help[512];
        snprintf(help, sizeof help, "%s", r->help);
        for (char *p = help; *p; p++)
            if (*p == '\n') *p = ' ';
        ck_assert_msg(strstr(help, want) || strstr(help, want_colon),
                      "--%s: its help does not say its default '%s'", r->flag, r->deflt);
    }
}
END_TEST

START_TEST(test_man_page_has_every_option) {
    char *section = man_train_section();
    char entry[4096];
    for (const train_option *r = train_option_table; r->flag || r->help; r++) {
        if (!r->flag) continue;
        ck_assert_msg(man_entry(section, r->flag, entry, sizeof entry),
                      "docs/qkv.1 has no entry for train --%s", r->flag);
        for (char *p = entry; *p; p++)
            if (*p == '\n') *p = ' ';
        if (r->deflt) {
            char want[160];
            snprintf(want, sizeof want, "Default: %s", r->deflt);
            ck_assert_msg(strstr(entry, want), "docs/qkv.1, train --%s: no '%s' in: %s", r->flag,
                          want, entry);
        }
        /* a range the page states is the schema's */
        const char *dots = strstr(entry, "..");
        while (dots && (dots == entry || dots[-1] < '0' || dots[-1] > '9'))
            dots = strstr(dots + 1, "..");
        if (r->type == OPTION_INT && dots) {
            const char *lo = dots;
            while (lo > entry && lo[-1] >= '0' && lo[-1] <= '9') lo--;
            char want[64];
            snprintf(want, sizeof want, "%.0f..%.0f", r->lo, r->hi);
            ck_assert_msg(!strncmp(lo, want, strlen(want)),
                          "docs/qkv.1, train --%s: the range is not %s: %s", r->flag, want, entry);
        }
    }
    /* and no entry for an option the schema lacks */
    for (const char *p = strstr(section, "\n.BI --"); p; p = strstr(p + 1, "\n.BI --")) {
        char flag[64] = "";
        sscanf(p + strlen("\n.BI --"), "%63[a-z0-9-]", flag);
        ck_assert_msg(train_option_find(flag) != NULL,
                      "docs/qkv.1 describes train --%s, which the schema does not have", flag);
    }
    free(section);
}
END_TEST

/* The schema's defaults that do not depend on the task are what train_options_init and
 * qkv_train_defaults("copy") give. */
START_TEST(test_defaults_agree) {
    qkv_task_defaults d = qkv_train_defaults("copy");
    train_options o;
    train_options_init(&o);
    char text[64];
    struct {
        const char *flag;
        long value;
    } sized[] = {{"seq-len", d.seq_len}, {"d-model", d.d_model}, {"heads", d.heads},
                 {"layers", d.layers},   {"steps", (long)d.steps}};
    for (size_t i = 0; i < sizeof sized / sizeof sized[0]; i++) {
        snprintf(text, sizeof text, "%ld", sized[i].value);
        ck_assert_str_eq(train_option_find(sized[i].flag)->deflt, text);
    }
    ck_assert_str_eq(train_option_find("residual")->deflt, d.residual ? "on" : "off");
    /* the training options modular sets otherwise (-1 in the options: the task's) */
    struct {
        const char *flag;
        double value;
    } trained[] = {{"mlp", d.mlp}, {"batch", d.batch}, {"clip", d.clip},
                   {"weight-decay", d.weight_decay}, {"beta2", d.beta2}};
    for (size_t i = 0; i < sizeof trained / sizeof trained[0]; i++) {
        snprintf(text, sizeof text, "%g", trained[i].value);
        ck_assert_str_eq(train_option_find(trained[i].flag)->deflt, text);
    }
    ck_assert_str_eq(train_option_find("schedule")->deflt, d.cosine ? "cosine" : "constant");
    ck_assert_int_eq(d.warmup, -1);
    ck_assert_str_eq(train_option_find("warmup")->deflt, "steps/20");
    /* the rest from the options as nothing was given */
    snprintf(text, sizeof text, "%g", o.beta1);
    ck_assert_str_eq(train_option_find("beta1")->deflt, text);
    snprintf(text, sizeof text, "%g", o.train_frac);
    ck_assert_str_eq(train_option_find("train-frac")->deflt, text);
    /* the scheme of the weights by task, and --init-scale by scheme (-1 in the options: the
     * scheme's, 1 for the paper's own scales) */
    ck_assert_int_eq(o.init, -1);
    ck_assert_str_eq(train_option_find("init")->choices[d.init], train_option_find("init")->deflt);
    ck_assert_int_eq(qkv_train_defaults("modular").init, QKV_INIT_PAPER);
    ck_assert(o.init_scale < 0);
    train_config run;
    ck_assert_int_eq(train_options_to_config(&o, false, &run), QKV_OK);
    snprintf(text, sizeof text, "%g", run.model.init_scale);
    ck_assert_str_eq(train_option_find("init-scale")->deflt, text);
    ck_assert_int_eq(run.model.init, QKV_INIT_QKV);
    train_options mod = o;
    mod.task = "modular";
    ck_assert_int_eq(train_options_to_config(&mod, false, &run), QKV_OK);
    ck_assert(run.model.init == QKV_INIT_PAPER && run.model.init_scale == 1);
    mod.init = QKV_INIT_QKV;
    ck_assert_int_eq(train_options_to_config(&mod, false, &run), QKV_OK);
    ck_assert(run.model.init == QKV_INIT_QKV && run.model.init_scale == 0.5);
    mod.init_scale = 0.25;
    ck_assert_int_eq(train_options_to_config(&mod, false, &run), QKV_OK);
    ck_assert(run.model.init == QKV_INIT_QKV && run.model.init_scale == 0.25);
    const char *plain[] = {"seed", "optim", "dtype", "task", "modulus", "op", "data-seed"};
    for (size_t i = 0; i < sizeof plain / sizeof plain[0]; i++) {
        const train_option *r = train_option_find(plain[i]);
        train_option_format(&o, r, text, sizeof text);
        ck_assert_msg(!strcmp(r->deflt, text), "--%s: the schema says %s, the options %s",
                      plain[i], r->deflt, text);
    }
    /* the learning rate by optimizer, as --lr's default says */
    char lr[128];
    snprintf(lr, sizeof lr, "adam %g, momentum %g, sgd %g", d.lr[QKV_ADAM], d.lr[QKV_MOMENTUM],
             d.lr[QKV_SGD]);
    ck_assert_str_eq(train_option_find("lr")->deflt, lr);
    /* induction as --task's help says it */
    qkv_task_defaults ind = qkv_train_defaults("induction");
    char said[160];
    snprintf(said, sizeof said, "--seq-len %d --layers %d --heads %d --residual --steps %lld",
             ind.seq_len, ind.layers, ind.heads, (long long)ind.steps);
    char help[512];
    snprintf(help, sizeof help, "%s", train_option_find("task")->help);
    for (char *p = help; *p; p++)
        if (*p == '\n') *p = ' ';
    ck_assert_msg(strstr(help, said), "--task's help does not say induction's defaults: %s",
                  said);
    ck_assert(ind.residual);
}
END_TEST

/* What the command line refuses, the library refuses too. */
START_TEST(test_library_checks_ranges) {
    train_options o;
    train_options_init(&o);
    train_config base;
    ck_assert_int_eq(train_options_to_config(&o, false, &base), QKV_OK);
    ck_assert_int_eq(trainer_check_config(&base), QKV_OK);
    train_config c = base;
    c.steps = 0;
    ck_assert_int_eq(trainer_check_config(&c), QKV_ERR_VALUE);
    ck_assert_ptr_nonnull(strstr(qkv_last_error(), "steps 0 is out of range"));
    c = base, c.steps = TRAIN_MAX_STEPS + 1;
    ck_assert_int_eq(trainer_check_config(&c), QKV_ERR_VALUE);
    c = base, c.warmup = -1;
    ck_assert_int_eq(trainer_check_config(&c), QKV_ERR_VALUE);
    ck_assert_ptr_nonnull(strstr(qkv_last_error(), "warmup"));
    c = base, c.weight_decay = NAN;
    ck_assert_int_eq(trainer_check_config(&c), QKV_ERR_VALUE);
    c = base, c.weight_decay = 2 * TRAIN_MAX_WEIGHT_DECAY;
    ck_assert_int_eq(trainer_check_config(&c), QKV_ERR_VALUE);
    c = base, c.clip = -1;
    ck_assert_int_eq(trainer_check_config(&c), QKV_ERR_VALUE);
    ck_assert_ptr_nonnull(strstr(qkv_last_error(), "clip"));
    c = base, c.clip = 0; /* off */
    ck_assert_int_eq(trainer_check_config(&c), QKV_OK);
    c = base, c.lr = 0;
    ck_assert_int_eq(trainer_check_config(&c), QKV_ERR_VALUE);
    c = base, c.batch = 0;
    ck_assert_int_eq(trainer_check_config(&c), QKV_ERR_VALUE);
    /* run options */
    trainer t;
    c = base, c.steps = 2;
    ck_assert_int_eq(trainer_init(&t, &c), QKV_OK);
    training_run run;
    run_options ro = {.eval_every = TRAIN_MAX_STEPS + 1};
    ck_assert_int_eq(trainer_run(&t, &ro, NULL, NULL, &run), QKV_ERR_VALUE);
    ck_assert_ptr_nonnull(strstr(qkv_last_error(), "eval_every"));
    ro = (run_options){.save_every = -1};
    ck_assert_int_eq(trainer_run(&t, &ro, NULL, NULL, &run), QKV_ERR_VALUE);
    trainer_free(&t);
}
END_TEST

/* A run's summary.json saves one key for every option the schema says a run saves, and no
 * other; and train_options_to_config on them gives the run's config back. */
START_TEST(test_summary_saves_every_option) {
    char dir[] = "/tmp/qkv-options-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char out[256], path[300];
    snprintf(out, sizeof out, "%s/run", dir);
    train_options o;
    train_options_init(&o);
    o.task = "induction", o.steps = 3, o.d_model = 16, o.seed = (UINT64_C(1) << 60) + 3;
    o.dtype = QKV_F64, o.optim = QKV_MOMENTUM, o.schedule = 1, o.clip = 0.25;
    train_config cfg;
    ck_assert_int_eq(train_options_to_config(&o, true, &cfg), QKV_OK);
    trainer t;
    ck_assert_int_eq(trainer_init(&t, &cfg), QKV_OK);
    training_run run;
    run_options ro = {.out_dir = out, .eval_every = 1, .save_every = 2};
    ck_assert_int_eq(trainer_run(&t, &ro, NULL, NULL, &run), QKV_OK);
    ck_assert_int_eq(trainer_run_end(&run, &t, 0, NULL), QKV_OK);
    trainer_free(&t);
    snprintf(path, sizeof path, "%s/summary.json", out);
    char *text = read_file(path);
    cJSON *root = cJSON_Parse(text);
    free(text);
    const cJSON *config = cJSON_GetObjectItemCaseSensitive(root, "config");
    ck_assert(cJSON_IsObject(config));
    int want = 0;
    for (const train_option *r = train_option_table; r->flag || r->help; r++) {
        if (!r->flag || r->saved == SAVED_NOT || r->saved == SAVED_DATA ||
            r->saved == SAVED_MODULAR)
            continue;
        want++;
        const cJSON *item = cJSON_GetObjectItemCaseSensitive(config, r->key);
        ck_assert_msg(item != NULL, "summary.json's config has no \"%s\"", r->key);
        char text_of[64];
        train_options saved;
        train_options_of_run(&cfg, 1, 2, 0, &saved);
        train_option_format(&saved, r, text_of, sizeof text_of);
        if (cJSON_IsString(item)) ck_assert_str_eq(item->valuestring, text_of);
        else if (cJSON_IsBool(item))
            ck_assert_str_eq(cJSON_IsTrue(item) ? "true" : "false", text_of);
        else ck_assert_double_eq(item->valuedouble, strtod(text_of, NULL));
    }
    ck_assert_int_eq(cJSON_GetArraySize(config), want);
    ck_assert_str_eq(cJSON_GetObjectItemCaseSensitive(config, "seed")->valuestring,
                     "1152921504606846979");
    /* and the summary's numbers (train/hints.c): the report of the last evaluation */
    const cJSON *report = cJSON_GetObjectItemCaseSensitive(root, "report");
    ck_assert(cJSON_IsObject(report));
    ck_assert(cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(report, "phase_changes")));
    ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(report, "head_scores")),
                     2 * 2);
    cJSON_Delete(root);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

/* The library's messages name config fields; the command line names them by the schema's
 * flags (cli_flag_of_field): each field the library names has its row. */
START_TEST(test_fields_have_flags) {
    static const struct {
        const char *field, *flag;
    } named[] = {
        {"seq_len", "seq-len"}, {"vocab", "vocab"},     {"d_model", "d-model"},
        {"heads", "heads"},     {"layers", "layers"},   {"init_scale", "init-scale"},
        {"init", "init"},
        {"dtype", "dtype"},     {"batch", "batch"},     {"lr", "lr"},
        {"data_path", "data"},  {"heldout_path", "heldout"}, {"steps", "steps"},
        {"warmup", "warmup"},   {"weight_decay", "weight-decay"}, {"clip", "clip"},
        {"residual", "residual"},
    };
    for (size_t i = 0; i < sizeof named / sizeof named[0]; i++) {
        const train_option *r = train_option_of_field(named[i].field);
        ck_assert_msg(r != NULL, "no schema row for the field %s", named[i].field);
        ck_assert_str_eq(r->flag, named[i].flag);
    }
    ck_assert_ptr_null(train_option_of_field("target_len")); /* no flag sets it */
    ck_assert_ptr_null(train_option_of_field("data")); /* the key of data_path */
}
END_TEST

/* The text with every run of white space as one space. */
static void squeeze(char *text) {
    char *w = text;
    for (const char *r = text; *r; r++)
        if (!(*r == ' ' || *r == '\n') || (w > text && w[-1] != ' ')) *w++ = *r == '\n' ? ' ' : *r;
    *w = '\0';
}

/* The task defaults as the man page and the README state them come from qkv_train_defaults. */
START_TEST(test_docs_state_task_defaults) {
    qkv_task_defaults ind = qkv_train_defaults("induction"), rec = qkv_train_defaults("recall"),
                      srt = qkv_train_defaults("sort"), tr = qkv_train_defaults("translate"),
                      cp = qkv_train_defaults("copy");
    /* the sentences group induction and recall, which share their sizes */
    ck_assert_int_eq(ind.seq_len, rec.seq_len);
    ck_assert_int_eq(ind.layers, rec.layers);
    ck_assert_int_eq(ind.heads, rec.heads);
    ck_assert(ind.residual && rec.residual && !srt.residual && !tr.residual && !cp.residual);
    ck_assert(srt.layers == 1 && tr.layers == 1 && cp.layers == 1 && cp.heads == 1);
    char want[512];
    snprintf(want, sizeof want, "Options not given take the task's defaults: induction and "
             "recall: seq-len %d, %d layers, %d heads, residual, %lld and %lld steps; sort: "
             "seq-len %d, %lld steps; translate: seq-len %d, %lld steps; the others: seq-len %d, "
             "1 layer, 1 head, %lld steps.", ind.seq_len, ind.layers, ind.heads,
             (long long)ind.steps, (long long)rec.steps, srt.seq_len, (long long)srt.steps,
             tr.seq_len, (long long)tr.steps, cp.seq_len, (long long)cp.steps);
    char *man = man_train_section();
    squeeze(man);
    ck_assert_msg(strstr(man, want), "docs/qkv.1 does not say: %s", want);
    free(man);
    snprintf(want, sizeof want, "Options not given take the task's defaults: induction and "
             "recall use `--seq-len %d --layers %d --heads %d --residual` (%lld and %lld steps), "
             "sort `--seq-len %d` (%lld steps), translate `--seq-len %d` (%lld steps); the "
             "others `--seq-len %d`, one layer, one head and %lld steps.", ind.seq_len,
             ind.layers, ind.heads, (long long)ind.steps, (long long)rec.steps, srt.seq_len,
             (long long)srt.steps, tr.seq_len, (long long)tr.steps, cp.seq_len,
             (long long)cp.steps);
    char *readme = read_file(QKV_SOURCE_DIR "/README.md");
    squeeze(readme);
    ck_assert_msg(strstr(readme, want), "README.md does not say: %s", want);
    free(readme);
}
END_TEST

/* ---- numbers in text: the one syntax of engine/numbers.c, read by every parser ---- */

START_TEST(test_numbers_strict) {
    /* taken, with their values */
    static const struct {
        const char *text;
        double value;
    } reals[] = {{"0", 0},       {"12", 12},   {"007", 7},     {"-3", -3},      {"0.5", 0.5},
                 {"1.", 1},      {"1e-3", 1e-3}, {"2E+2", 200}, {"-0.25e1", -2.5}, {"1e308", 1e308}};
    for (size_t i = 0; i < sizeof reals / sizeof reals[0]; i++) {
        double v = NAN;
        ck_assert_msg(number_real(reals[i].text, &v) == NUMBER_OK && v == reals[i].value,
                      "'%s' read as %g", reals[i].text, v);
    }
    /* what strtod, strtol and sscanf take, and qkv does not */
    static const char *const not_real[] = {"",     " 1",   "1 ",  "+1",   ".5",    "-.5",  "0x10",
                                           "inf",  "-inf", "nan", "1e",   "1e+",   "1.+1", "--1",
                                           "-",    "1,2",  "1e999", "1e-999", "1\n", "\t1", "1f"};
    for (size_t i = 0; i < sizeof not_real / sizeof not_real[0]; i++) {
        double v;
        ck_assert_msg(number_real(not_real[i], &v) == NUMBER_BAD, "'%s' taken", not_real[i]);
    }
    int64_t w;
    uint64_t u;
    ck_assert(number_int("42", 0, 100, &w) == NUMBER_OK && w == 42);
    ck_assert(number_int("-42", -100, 100, &w) == NUMBER_OK && w == -42);
    ck_assert(number_int("-9223372036854775808", INT64_MIN, 0, &w) == NUMBER_OK && w == INT64_MIN);
    ck_assert(number_int("101", 0, 100, &w) == NUMBER_RANGE && w == 101);
    ck_assert(number_int("-1", 0, 100, &w) == NUMBER_RANGE && w == -1);
    ck_assert(number_u64("18446744073709551615", &u) == NUMBER_OK && u == UINT64_MAX);
    static const char *const not_whole[] = {"", " 1", "+1", "1.0", "1e2", "0x1", "4294967297.1",
                                            "9223372036854775808", "-9223372036854775809",
                                            "99999999999999999999", "1-1", "--1", "-"};
    for (size_t i = 0; i < sizeof not_whole / sizeof not_whole[0]; i++)
        ck_assert_msg(number_int(not_whole[i], INT64_MIN, INT64_MAX, &w) == NUMBER_BAD,
                      "'%s' taken as a whole number", not_whole[i]);
    ck_assert(number_u64("-0", &u) == NUMBER_BAD);
    ck_assert(number_u64("18446744073709551616", &u) == NUMBER_BAD); /* 2^64 does not wrap */
    ck_assert(number_u64("4294967297", &u) == NUMBER_OK && u == 4294967297u);
}
END_TEST

static Suite *options_suite(void) {
    Suite *s = suite_create("options");
    TCase *tc = tcase_create("schema");
    tcase_add_test(tc, test_help_names_each_default);
    tcase_add_test(tc, test_man_page_has_every_option);
    tcase_add_test(tc, test_defaults_agree);
    tcase_add_test(tc, test_library_checks_ranges);
    tcase_add_test(tc, test_summary_saves_every_option);
    tcase_add_test(tc, test_fields_have_flags);
    tcase_add_test(tc, test_docs_state_task_defaults);
    suite_add_tcase(s, tc);
    tc = tcase_create("numbers");
    tcase_add_test(tc, test_numbers_strict);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return run_suite(options_suite()); }
