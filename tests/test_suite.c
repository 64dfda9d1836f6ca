/* Tests of suite loading (check/suite.c): the two shipped workload files by name
 * and by path, a Lua suite, and the errors (bad JSON with its line number, p
 * out of range, missing axes, bad sizes, missing files) leaving the list as
 * it was. Temporary files live in /tmp and are removed. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "suite.h"

static int near(double a, double b) { return fabs(a - b) <= 1e-12 * fmax(1.0, fabs(b)); }

/* Writes text to a fresh temporary file with the given suffix; path gets its name. */
static void write_temp(char *path, size_t len, const char *suffix, const char *text) {
    snprintf(path, len, "/tmp/attnbwd_test_suite_XXXXXX%s", suffix);
    int fd = mkstemps(path, (int)strlen(suffix));
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    assert_non_null(f);
    assert_true(fputs(text, f) >= 0);
    assert_int_equal(fclose(f), 0);
}

/* Loads text as a suite file that must fail with st; returns the message. */
static const char *load_bad(const char *suffix, const char *text, attnbwd_status st, char *path, size_t len) {
    write_temp(path, len, suffix, text);
    suite_case *v = NULL;
    size_t n = 0;
    attnbwd_status got = suite_load(path, &v, &n);
    unlink(path);
    if (got != st)
        fprintf(stderr, "unexpected status %s: %s\n", attnbwd_status_name(got), attnbwd_last_error());
    assert_int_equal(got, st);
    assert_int_equal(n, 0);
    assert_null(v);
    return attnbwd_last_error();
}

static void check_sol066(const suite_case *v) {
    /* Line 1: {"batch_size": 1, "n_heads": 32, "seq_len": 512}, p 0.0 */
    assert_int_equal(v[0].shape.problem, ATTNBWD_SOFTMAX_DROPOUT_BWD);
    assert_int_equal(v[0].shape.batch, 1);
    assert_int_equal(v[0].shape.heads, 32);
    assert_int_equal(v[0].shape.seq_len, 512);
    assert_int_equal(v[0].shape.dropout, 0);
    assert_true(v[0].p_dropout == 0.0);
    assert_true(near(v[0].atol, 1e-5) && near(v[0].rtol, 1e-5));
    assert_true(near(v[0].match_ratio, 0.99));
    /* Line 3: B=2 H=16 T=541 p=0.1 */
    assert_int_equal(v[2].shape.batch, 2);
    assert_int_equal(v[2].shape.heads, 16);
    assert_int_equal(v[2].shape.seq_len, 541);
    assert_int_equal(v[2].shape.dropout, 1);
    assert_true(near(v[2].p_dropout, 0.1));
    assert_string_equal(v[2].name, "sol066_workload#3 B=2 H=16 T=541 p=0.1");
    /* Line 15: B=8 H=16 T=373 p=0.05; line 12: B=16 H=8 T=2048 */
    assert_int_equal(v[14].shape.batch, 8);
    assert_int_equal(v[14].shape.seq_len, 373);
    assert_true(near(v[14].p_dropout, 0.05));
    assert_int_equal(v[11].shape.batch, 16);
    assert_int_equal(v[11].shape.heads, 8);
    assert_int_equal(v[11].shape.seq_len, 2048);
    for (int k = 0; k < 16; k++) {
        assert_int_equal(v[k].shape.dropout, v[k].p_dropout > 0);
        assert_int_equal(v[k].shape.precision, 0);
    }
}

static void test_shipped_sol066_by_name(void **state) {
    (void)state;
    suite_case *v = NULL;
    size_t n = 0;
    assert_int_equal(suite_load("sol066_workload", &v, &n), ATTNBWD_OK);
    assert_int_equal(n, 16);
    check_sol066(v);
    /* The suffixed form is found too, and appends after what is there. */
    assert_int_equal(suite_load("sol066_workload.jsonl", &v, &n), ATTNBWD_OK);
    assert_int_equal(n, 32);
    check_sol066(v + 16);
    free(v);
}

static void test_shipped_sol072(void **state) {
    (void)state;
    suite_case *v = NULL;
    size_t n = 0;
    assert_int_equal(suite_load("sol072_workload", &v, &n), ATTNBWD_OK);
    assert_int_equal(n, 16);
    for (size_t k = 0; k < n; k++) {
        assert_int_equal(v[k].shape.problem, ATTNBWD_EDIT_ATTENTION_BWD);
        assert_int_equal(v[k].shape.heads, 16);
        assert_int_equal(v[k].shape.dropout, 1);
        assert_true(near(v[k].p_dropout, 0.1));
        assert_true(near(v[k].rtol, 1e-5));
        assert_true(near(v[k].match_ratio, 0.98));
    }
    /* Line 1: B=64 T=128 atol 0.089; line 15: B=32 T=773 atol 0.14 */
    assert_int_equal(v[0].shape.batch, 64);
    assert_int_equal(v[0].shape.seq_len, 128);
    assert_true(near(v[0].atol, 0.08900000000000001));
    assert_int_equal(v[14].shape.batch, 32);
    assert_int_equal(v[14].shape.seq_len, 773);
    assert_true(near(v[14].atol, 0.13999999999999999));
    assert_string_equal(v[0].name, "sol072_workload#1 B=64 H=16 T=128 p=0.1");
    free(v);
}

/* The same file read from the repository by path (ctest sets the folder). */
static void test_file_by_path(void **state) {
    (void)state;
    const char *dir = getenv("ATTNBWD_SOURCE_DIR");
    if (!dir)
        skip();
    char path[1024];
    snprintf(path, sizeof path, "%s/suites/sol066_workload.jsonl", dir);
    suite_case *v = NULL;
    size_t n = 0;
    assert_int_equal(suite_load(path, &v, &n), ATTNBWD_OK);
    assert_int_equal(n, 16);
    check_sol066(v);
    free(v);
}

static void test_lua_suite(void **state) {
    (void)state;
    char path[256];
    write_temp(path, sizeof path, ".lua",
               "-- our own cases\n"
               "local cases = {\n"
               "  { problem = 'softmax_dropout_bwd', batch = 2, heads = 3, seq_len = 17, p_dropout = 0.2 },\n"
               "  { batch = 1, heads = 1, seq_len = 1 },\n"
               "}\n"
               "for t = 1000, 1001 do\n"
               "  cases[#cases + 1] = { problem = 'softmax_dropout_bwd', batch = 1, heads = 5, seq_len = t,\n"
               "                        atol = 2e-5, rtol = 0, match_ratio = 1, name = string.format('odd %d', t) }\n"
               "end\n"
               "cases[#cases + 1] = { problem = 'edit_attention_bwd', batch = 4, seq_len = 640, atol = 0.053 }\n"
               "return cases\n");
    suite_case *v = NULL;
    size_t n = 0;
    attnbwd_status st = suite_load(path, &v, &n);
    if (st != ATTNBWD_OK)
        fprintf(stderr, "%s\n", attnbwd_last_error());
    assert_int_equal(st, ATTNBWD_OK);
    assert_int_equal(n, 5);
    assert_int_equal(v[0].shape.problem, ATTNBWD_SOFTMAX_DROPOUT_BWD);
    assert_int_equal(v[0].shape.batch, 2);
    assert_int_equal(v[0].shape.heads, 3);
    assert_int_equal(v[0].shape.seq_len, 17);
    assert_int_equal(v[0].shape.dropout, 1);
    assert_true(near(v[0].p_dropout, 0.2));
    assert_true(near(v[0].atol, 1e-5) && near(v[0].rtol, 1e-5) && near(v[0].match_ratio, 0.99));
    assert_non_null(strstr(v[0].name, "#1 B=2 H=3 T=17 p=0.2"));
    assert_int_equal(v[1].shape.dropout, 0); /* p defaults to 0 */
    assert_int_equal(v[3].shape.seq_len, 1001);
    assert_true(v[3].rtol == 0.0 && v[3].match_ratio == 1.0 && near(v[3].atol, 2e-5));
    assert_string_equal(v[3].name, "odd 1001");
    assert_int_equal(v[4].shape.problem, ATTNBWD_EDIT_ATTENTION_BWD);
    assert_int_equal(v[4].shape.heads, 16);
    assert_true(near(v[4].p_dropout, 0.1));
    assert_int_equal(v[4].shape.dropout, 1);
    free(v);
    unlink(path);
}

static void test_lua_errors(void **state) {
    (void)state;
    char path[256];
    const char *m = load_bad(".lua", "return { { batch = 1, heads = 1, seq_len = 4, p_dropout = 1.5 } }\n",
                             ATTNBWD_ERR_INVALID_ARGUMENT, path, sizeof path);
    assert_non_null(strstr(m, path));
    assert_non_null(strstr(m, "case 1"));
    assert_non_null(strstr(m, "p_dropout"));
    m = load_bad(".lua", "return {\n  { batch = 1, heads = 1, seq_len = 4 },\n  { batch = 1, seqlen = 4 },\n}\n",
                 ATTNBWD_ERR_INVALID_ARGUMENT, path, sizeof path);
    assert_non_null(strstr(m, "case 2"));
    assert_non_null(strstr(m, "seqlen"));
    m = load_bad(".lua", "local x = 1\nreturn {{ batch = 1,, }}\n", ATTNBWD_ERR_INVALID_ARGUMENT, path,
                 sizeof path);
    assert_non_null(strstr(m, ":2:")); /* the syntax error's line */
    m = load_bad(".lua", "error('no suite here')\n", ATTNBWD_ERR_INVALID_ARGUMENT, path, sizeof path);
    assert_non_null(strstr(m, "no suite here"));
    m = load_bad(".lua", "return { { batch = 0, heads = 1, seq_len = 4 } }\n", ATTNBWD_ERR_INVALID_ARGUMENT,
                 path, sizeof path);
    assert_non_null(strstr(m, "batch"));
    m = load_bad(".lua", "return { { problem = 'edit_attention_bwd', batch = 1, seq_len = 4, heads = 8, atol = 1 } }\n",
                 ATTNBWD_ERR_INVALID_ARGUMENT, path, sizeof path);
    assert_non_null(strstr(m, "16"));
    m = load_bad(".lua", "return 42\n", ATTNBWD_ERR_INVALID_ARGUMENT, path, sizeof path);
    (void)m;
}

/* A suite is data: text chunks only and no file access, so a shared suite
 * file cannot run bytecode (which Lua does not verify) or read the user's
 * files; a loop that does not end stops under the instruction budget. */
static void test_lua_sandbox(void **state) {
    (void)state;
    char path[256];
    /* Bytecode made in the suite itself: string.dump is gone. */
    const char *m = load_bad(".lua",
                             "local d = string.dump(function() return {{ batch = 1, heads = 1, seq_len = 4 }} end)\n"
                             "return load(d)()\n",
                             ATTNBWD_ERR_INVALID_ARGUMENT, path, sizeof path);
    assert_non_null(strstr(m, "dump"));
    /* A binary chunk as a string: refused by load, whatever mode it asks for. */
    m = load_bad(".lua", "local f, why = load('\\27LuaT\\0' .. string.rep('\\0', 64))\nreturn assert(f, why)()\n",
                 ATTNBWD_ERR_INVALID_ARGUMENT, path, sizeof path);
    assert_non_null(strstr(m, "binary chunk"));
    m = load_bad(".lua", "local f, why = load('\\27Lua', 'x', 'b')\nreturn assert(f, why)()\n",
                 ATTNBWD_ERR_INVALID_ARGUMENT, path, sizeof path);
    assert_non_null(strstr(m, "only text chunks"));
    /* No file access: the error names neither the file nor what is in it. */
    m = load_bad(".lua", "return {dofile(\"/etc/passwd\")}\n", ATTNBWD_ERR_INVALID_ARGUMENT, path, sizeof path);
    assert_null(strstr(m, "passwd"));
    assert_null(strstr(m, "root"));
    assert_non_null(strstr(m, "dofile"));
    /* None of the ways to a file or a process is there. */
    write_temp(path, sizeof path, ".lua",
               "local gone = not (io or os or require or package or loadfile or dofile or debug)\n"
               "return {{ batch = 1, heads = 1, seq_len = 4, name = tostring(gone) }}\n");
    suite_case *v = NULL;
    size_t n = 0;
    assert_int_equal(suite_load(path, &v, &n), ATTNBWD_OK);
    unlink(path);
    assert_int_equal(n, 1);
    assert_string_equal(v[0].name, "true");
    free(v);
    /* Text chunks still load. */
    write_temp(path, sizeof path, ".lua",
               "return load('return {{ batch = 2, heads = 1, seq_len = 4 }}', 'cases', 't', {})()\n");
    v = NULL;
    n = 0;
    assert_int_equal(suite_load(path, &v, &n), ATTNBWD_OK);
    unlink(path);
    assert_int_equal(n, 1);
    assert_int_equal(v[0].shape.batch, 2);
    free(v);
    /* A loop that does not end is an error within seconds, naming the file. */
    time_t t0 = time(NULL);
    m = load_bad(".lua", "while true do end\n", ATTNBWD_ERR_INVALID_ARGUMENT, path, sizeof path);
    assert_true(time(NULL) - t0 < 20);
    assert_non_null(strstr(m, "budget"));
    assert_non_null(strstr(m, path));
}

#define LINE066(B, H, T, P)                                                                               \
    "{\"axes\": {\"batch_size\": " #B ", \"n_heads\": " #H ", \"seq_len\": " #T "}, \"inputs\": "           \
    "{\"p_dropout\": {\"type\": \"scalar\", \"value\": " #P "}}, \"tolerance\": {\"max_atol\": 1e-05, "     \
    "\"max_rtol\": 1e-05}}\n"

static void test_jsonl_errors(void **state) {
    (void)state;
    char path[256], want[300];
    /* A good file of our own first: blank lines are fine. */
    write_temp(path, sizeof path, ".jsonl", LINE066(3, 5, 7, 0.25) "\n" LINE066(1, 1, 1, 0.0));
    suite_case *v = NULL;
    size_t n = 0;
    assert_int_equal(suite_load(path, &v, &n), ATTNBWD_OK);
    unlink(path);
    assert_int_equal(n, 2);
    assert_int_equal(v[0].shape.heads, 5);
    assert_true(near(v[0].p_dropout, 0.25));
    assert_int_equal(v[1].shape.seq_len, 1);
    assert_non_null(strstr(v[1].name, "#2 B=1 H=1 T=1 p=0"));

    /* Bad JSON on line 3: the error names the file and the line, and the
     * list the caller passed is left as it was. */
    write_temp(path, sizeof path, ".jsonl", LINE066(1, 2, 3, 0.1) LINE066(1, 2, 3, 0.1) "{\"axes\": {\n");
    assert_int_equal(suite_load(path, &v, &n), ATTNBWD_ERR_INVALID_ARGUMENT);
    unlink(path);
    assert_int_equal(n, 2);
    snprintf(want, sizeof want, "%s:3:", path);
    assert_non_null(strstr(attnbwd_last_error(), want));
    free(v);

    const char *m = load_bad(".jsonl", LINE066(1, 2, 3, 1.5), ATTNBWD_ERR_INVALID_ARGUMENT, path, sizeof path);
    snprintf(want, sizeof want, "%s:1:", path);
    assert_non_null(strstr(m, want));
    assert_non_null(strstr(m, "p_dropout"));
    m = load_bad(".jsonl", LINE066(1, 2, 3, -0.1), ATTNBWD_ERR_INVALID_ARGUMENT, path, sizeof path);
    assert_non_null(strstr(m, "p_dropout"));
    m = load_bad(".jsonl", "{\"inputs\": {}}\n", ATTNBWD_ERR_INVALID_ARGUMENT, path, sizeof path);
    assert_non_null(strstr(m, "axes"));
    m = load_bad(".jsonl", "\n" LINE066(1, 0, 3, 0.1), ATTNBWD_ERR_INVALID_ARGUMENT, path, sizeof path);
    assert_non_null(strstr(m, ":2:"));
    assert_non_null(strstr(m, "n_heads"));
    m = load_bad(".jsonl", LINE066(1, 2, -3, 0.1), ATTNBWD_ERR_INVALID_ARGUMENT, path, sizeof path);
    assert_non_null(strstr(m, "seq_len"));
    m = load_bad(".jsonl", LINE066(1.5, 2, 3, 0.1), ATTNBWD_ERR_INVALID_ARGUMENT, path, sizeof path);
    assert_non_null(strstr(m, "batch_size"));
    m = load_bad(".jsonl", LINE066(1, 2, 3, 0.1) "{} trailing\n", ATTNBWD_ERR_INVALID_ARGUMENT, path, sizeof path);
    assert_non_null(strstr(m, ":2:"));
    m = load_bad(".jsonl", "\n\n", ATTNBWD_ERR_INVALID_ARGUMENT, path, sizeof path);
    (void)m;
}

static void test_missing_files(void **state) {
    (void)state;
    suite_case *v = NULL;
    size_t n = 0;
    assert_int_equal(suite_load("/nonexistent/dir/suite.jsonl", &v, &n), ATTNBWD_ERR_IO);
    assert_non_null(strstr(attnbwd_last_error(), "/nonexistent/dir/suite.jsonl"));
    assert_int_equal(suite_load("no_such_suite_anywhere", &v, &n), ATTNBWD_ERR_IO);
    assert_non_null(strstr(attnbwd_last_error(), "no_such_suite_anywhere"));
    assert_int_equal(suite_load("/tmp", &v, &n), ATTNBWD_ERR_IO);
    assert_int_equal(n, 0);
    assert_null(v);
    assert_int_equal(suite_load(NULL, &v, &n), ATTNBWD_ERR_INVALID_ARGUMENT);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shipped_sol066_by_name),
        cmocka_unit_test(test_shipped_sol072),
        cmocka_unit_test(test_file_by_path),
        cmocka_unit_test(test_lua_suite),
        cmocka_unit_test(test_lua_errors),
        cmocka_unit_test(test_lua_sandbox),
        cmocka_unit_test(test_jsonl_errors),
        cmocka_unit_test(test_missing_files),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
