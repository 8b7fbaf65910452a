/* The sweep analysis that turns P000's curves into crossover numbers. */
#include <math.h>
#include <stdio.h>

#include "umbench.h"

static int failures;
#define EXPECT(cond, ...)                                                           \
    do {                                                                            \
        if (!(cond)) {                                                              \
            ++failures;                                                             \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);                             \
            printf(__VA_ARGS__);                                                    \
            printf("\n");                                                           \
        }                                                                           \
    } while (0)

int main(void)
{
    /* Fraction sweep: managed (a) wins up to 60% then loses; the boundary lies
     * between the last winning and the first losing point, interpolated. */
    const double f[] = {0, 20, 40, 60, 80, 100};
    const double managed[] = {10, 30, 50, 70, 110, 130};
    const double expl[] = {90, 90, 90, 90, 90, 90};
    double b = umb_last_win_boundary(f, managed, expl, 6);
    EXPECT(fabs(b - 70.0) < 1e-9, "boundary %g, expected 70 (d=-20 at 60, +20 at 80)", b);
    /* Noise: a stray win after the crossover moves the boundary to the last win. */
    const double noisy[] = {10, 30, 50, 100, 85, 130};
    b = umb_last_win_boundary(f, noisy, expl, 6);
    EXPECT(b > 80.0 && b < 100.0, "noisy boundary %g should follow the last win at 80", b);
    const double never[] = {95, 95, 95, 95, 95, 95};
    EXPECT(umb_last_win_boundary(f, never, expl, 6) == -1.0, "no win gives -1");
    const double always[] = {1, 1, 1, 1, 1, 1};
    EXPECT(umb_last_win_boundary(f, always, expl, 6) == 100.0, "a win at the end gives the last x");

    /* Stride sweep: managed flat and slow up to 120 KiB, wins from 128 KiB on. */
    const double s[] = {112, 120, 128, 136, 144};
    const double m2[] = {2600, 2600, 1300, 1200, 1100};
    const double e2[] = {1500, 1500, 1500, 1500, 1500};
    EXPECT(umb_final_win_start(s, m2, e2, 5) == 128.0, "final win starts at 128");
    const double m3[] = {1000, 2600, 1300, 1200, 1100}; /* an early stray win is ignored */
    EXPECT(umb_final_win_start(s, m3, e2, 5) == 128.0, "an isolated early win is not the crossover");
    const double m4[] = {1000, 1000, 1000, 1000, 2000};
    EXPECT(umb_final_win_start(s, m4, e2, 5) == -1.0, "losing at the last point gives -1");

    /* Plateau: flat within 25% of the head's median, then a sustained drop; one
     * stray low point (1500) inside the plateau is noise, not its end. */
    const double v[] = {2148, 1990, 2050, 1500, 2089, 2175, 1410, 1256, 1243, 1161};
    EXPECT(umb_plateau_end(v, 10, 0.25) == 5, "plateau ends at index 5, got %zu", umb_plateau_end(v, 10, 0.25));
    EXPECT(umb_plateau_end(v, 1, 0.25) == 0, "one point is its own plateau");
    const double flat[] = {100, 104, 97, 99};
    EXPECT(umb_plateau_end(flat, 4, 0.10) == 3, "an all-flat curve is all plateau");
    const double tail[] = {100, 104, 97, 99, 50, 40};
    EXPECT(umb_plateau_end(tail, 6, 0.10) == 3, "a drop shorter than the run length at the end still ends it, got %zu",
           umb_plateau_end(tail, 6, 0.10));
    const double fall[] = {100, 100, 100, 50, 45, 40, 35};
    EXPECT(umb_plateau_end(fall, 7, 0.10) == 2, "the plateau ends before the drop, got %zu", umb_plateau_end(fall, 7, 0.10));

    /* The exact expected sum of a pass: a[i] = i % 3343, +1 where touched. */
    umb_touch t = {100, 7};
    EXPECT(umb_touch_count(t) == 15, "0,7,..,98 is 15 elements, got %zu", umb_touch_count(t));
    double want = 0;
    for (size_t i = 0; i < 10000; ++i) want += (double)(i % 3343) + (i < 100 && i % 7 == 0);
    EXPECT(umb_p000_expected(10000, t) == want, "expected sum %.17g vs %.17g", umb_p000_expected(10000, t), want);

    if (!failures) printf("umbench analysis: all passed\n");
    return failures != 0;
}
