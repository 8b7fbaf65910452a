/* Unit tests of the support library: JSON escaping and shape, size/dims parsing, median. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "umstudy/support.h"

#include "expect.h"

int main(void)
{
    size_t s;
    EXPECT(ums_parse_size("4096", &s) == 0 && s == 4096);
    EXPECT(ums_parse_size("64K", &s) == 0 && s == 65536);
    EXPECT(ums_parse_size("8GiB", &s) == 0 && s == 8ULL << 30);
    EXPECT(ums_parse_size("1m", &s) == 0 && s == 1 << 20);
    EXPECT(ums_parse_size("-1", &s) != 0);
    EXPECT(ums_parse_size("12Q", &s) != 0);
    EXPECT(ums_parse_size("", &s) != 0);
    EXPECT(ums_parse_size("99999999999T", &s) != 0);

    long long d[3];
    EXPECT(ums_parse_dims("513x513x1025", d, 3) == 3 && d[0] == 513 && d[2] == 1025);
    EXPECT(ums_parse_dims("8,9", d, 3) == 2 && d[1] == 9);
    EXPECT(ums_parse_dims("8x", d, 3) == -1);
    EXPECT(ums_parse_dims("8x0x1", d, 3) == -1);
    EXPECT(ums_parse_dims("1x2x3x4", d, 3) == -1);
    EXPECT(ums_parse_dims("", d, 3) == -1);

    double v[] = {5, 1, 4, 2, 3};
    EXPECT(ums_median(v, 5) == 3);
    double w[] = {4, 1, 3, 2};
    EXPECT(ums_median(w, 4) == 2.5);
    EXPECT(isnan(ums_median(w, 0)));

    /* JSON: capture stdout through a pipe and compare the exact line. */
    int fd[2];
    EXPECT(pipe(fd) == 0);
    fflush(stdout);
    int saved = dup(1);
    dup2(fd[1], 1);
    ums_json_init("unit");
    ums_param_str("name", "a\"b\\c\n");
    ums_param_int("n", -3);
    ums_rec r;
    ums_rec_begin(&r, "bw", 1.5, "GB/s");
    ums_rec_num(&r, "nan", NAN);
    ums_rec_bool(&r, "ok", 1);
    ums_rec_emit(&r);
    fflush(stdout);
    dup2(saved, 1);
    close(fd[1]);
    char buf[1024] = {0};
    ssize_t n = read(fd[0], buf, sizeof buf - 1);
    EXPECT(n > 0);
    const char *want = "{\"bench\":\"unit\",\"metric\":\"bw\",\"value\":1.5,\"unit\":\"GB/s\","
                       "\"nan\":null,\"ok\":true,\"params\":{\"name\":\"a\\\"b\\\\c\\u000a\",\"n\":-3}}\n";
    EXPECT(strcmp(buf, want) == 0);
    if (strcmp(buf, want)) fprintf(stderr, "got:  %swant: %s", buf, want);

    double t0 = ums_now(), t1 = ums_now();
    EXPECT(t1 >= t0 && t0 > 0);
    printf("support tests: %s\n", fails ? "FAILED" : "ok");
    return fails != 0;
}
