/* Put-accumulate and get-accumulate for every op (+ - * / min max) and type (int,
 * long, float, double), on strided sections.  Every image accumulates into every
 * image at once, so the result also checks per-element atomicity.  Operands are
 * powers of two and quotients of positive integers, so the result does not depend
 * on the order the images' contributions arrive in. */
#include "xmpc_test.h"

#include <limits.h>
#include <string.h>

static const xmpc_op k_ops[] = {XMPC_OP_SUM, XMPC_OP_DIFF, XMPC_OP_PROD,
                                XMPC_OP_DIV, XMPC_OP_MIN, XMPC_OP_MAX};
static const xmpc_type k_types[] = {XMPC_INT, XMPC_LONG, XMPC_FLOAT, XMPC_DOUBLE};
static const char *const k_type_names[] = {"byte", "int", "long", "float", "double"};

/* Values are carried as doubles in the test and stored in the element type. */
static void store(xmpc_type t, void *base, size_t i, double v)
{
    switch (t) {
    case XMPC_INT: ((int *)base)[i] = (int)v; break;
    case XMPC_LONG: ((long *)base)[i] = (long)v; break;
    case XMPC_FLOAT: ((float *)base)[i] = (float)v; break;
    default: ((double *)base)[i] = v; break;
    }
}

static double load(xmpc_type t, const void *base, size_t i)
{
    switch (t) {
    case XMPC_INT: return ((const int *)base)[i];
    case XMPC_LONG: return (double)((const long *)base)[i];
    case XMPC_FLOAT: return ((const float *)base)[i];
    default: return ((const double *)base)[i];
    }
}

/* a op b in the element type's arithmetic (integer division truncates). */
static double apply(xmpc_op op, xmpc_type t, double a, double b)
{
    int integer = t == XMPC_INT || t == XMPC_LONG;
    switch (op) {
    case XMPC_OP_SUM: return a + b;
    case XMPC_OP_DIFF: return a - b;
    case XMPC_OP_PROD: return a * b;
    case XMPC_OP_DIV: return integer ? (double)((long)a / (long)b) : a / b;
    case XMPC_OP_MIN: return a < b ? a : b;
    default: return a > b ? a : b;
    }
}

static double initial(size_t flat) { return flat % 2 ? 1 << 20 : 1; }
static double operand(int image, size_t k) { return 1 << ((image + (int)k) % 3); }

static size_t esize(xmpc_type t)
{
    return t == XMPC_INT ? sizeof(int) : t == XMPC_LONG ? sizeof(long)
         : t == XMPC_FLOAT ? sizeof(float) : sizeof(double);
}

static void put_acc(xmpc_type t, xmpc_op op)
{
    const int n = xmpc_num_images();
    long dims[] = {4, 6}, ldims[] = {8};
    xmpc_range r[] = {{0, 2, 2}, {1, 3, 2}}, lr[] = {{1, 6, 1}};
    size_t ri[6];
    section_indices(2, dims, r, ri);
    xmpc_coarray *c = xmpc_coarray_alloc("acc", t, esize(t), 2, dims);
    for (size_t f = 0; f < 24; ++f)
        store(t, xmpc_coarray_data(c), f, initial(f));
    xmpc_sync_all();
    char local[8 * sizeof(double)];
    for (size_t k = 0; k < 8; ++k)
        store(t, local, k, k >= 1 && k <= 6 ? operand(xmpc_this_image(), k - 1) : 0);
    xmpc_local l = {local, 1, ldims, lr};
    for (int target = 1; target <= n; ++target)
        xmpc_put_acc(c, target, r, op, t, &l);
    xmpc_sync_all();
    for (size_t k = 0, s = 0; k < 24; ++k) {
        double want = initial(k);
        if (s < 6 && ri[s] == k) {
            for (int img = 1; img <= n; ++img)
                want = apply(op, t, want, operand(img, s));
            ++s;
        }
        double got = load(t, xmpc_coarray_data(c), k);
        CHECK(got == want, "put-acc %s '%c': element %zu is %g, want %g", k_type_names[t],
              (char)op, k, got, want);
    }
    xmpc_coarray_free(c);
}

/* `c[0:5:2]:[k] op= x;` with a scalar operand. */
static void put_acc_scalar(xmpc_type t, xmpc_op op)
{
    long dims[] = {10}, one[] = {1};
    xmpc_range r[] = {{0, 5, 2}}, lr[] = {{0, 1, 1}};
    xmpc_coarray *c = xmpc_coarray_alloc("acc_scalar", t, esize(t), 1, dims);
    for (size_t f = 0; f < 10; ++f)
        store(t, xmpc_coarray_data(c), f, 64);
    xmpc_sync_all();
    char x[sizeof(double)];
    store(t, x, 0, 2);
    xmpc_local l = {x, 1, one, lr};
    xmpc_put_acc(c, next_image(), r, op, t, &l);
    xmpc_sync_all();
    for (size_t f = 0; f < 10; ++f) {
        double want = f % 2 ? 64 : apply(op, t, 64, 2), got = load(t, xmpc_coarray_data(c), f);
        CHECK(got == want, "put-acc scalar %s '%c': element %zu is %g, want %g", k_type_names[t],
              (char)op, f, got, want);
    }
    xmpc_coarray_free(c);
}

static void get_acc(xmpc_type t, xmpc_op op)
{
    const int me = xmpc_this_image(), n = xmpc_num_images();
    long dims[] = {3, 4, 5}, ldims[] = {2, 8};
    xmpc_range r[] = {{0, 2, 2}, {1, 1, 1}, {0, 3, 2}}, lr[] = {{0, 2, 1}, {1, 3, 3}};
    size_t ri[6], li[6];
    section_indices(3, dims, r, ri);
    section_indices(2, ldims, lr, li);
    xmpc_coarray *c = xmpc_coarray_alloc("getacc", t, esize(t), 3, dims);
    for (size_t f = 0; f < 60; ++f)
        store(t, xmpc_coarray_data(c), f, operand(me, f));
    xmpc_sync_all();
    for (int target = 1; target <= n; ++target) {
        char local[16 * sizeof(double)];
        for (size_t f = 0; f < 16; ++f)
            store(t, local, f, initial(f));
        xmpc_local l = {local, 2, ldims, lr};
        xmpc_get_acc(c, target, r, op, t, &l);
        for (size_t f = 0; f < 16; ++f) {
            double want = initial(f);
            for (size_t k = 0; k < 6; ++k)
                if (li[k] == f)
                    want = apply(op, t, want, operand(target, ri[k]));
            double got = load(t, local, f);
            CHECK(got == want, "get-acc %s '%c' from %d: element %zu is %g, want %g",
                  k_type_names[t], (char)op, target, f, got, want);
        }
    }
    xmpc_coarray_free(c);
}

/* Every backend computes exactly the plain C expression `remote op local`: signed zeros
 * (x - y is not 0 - y added to x: -0.0 - 0.0 is -0.0), infinities, and integer + - *
 * wrapping in two's complement.  Image 1 accumulates into the last image (put-acc,
 * where mpi3 and armci use the transport's own ops) and from it (get-acc); results
 * are compared bit for bit. */
#define EDGE_CASE(T, XT, NAME, ...)                                                            \
    do {                                                                                       \
        static const T pairs[][2] = {__VA_ARGS__};                                             \
        enum { K = sizeof pairs / sizeof pairs[0] };                                           \
        const int me = xmpc_this_image(), last = xmpc_num_images();                            \
        long dims[] = {K};                                                                     \
        xmpc_range all[] = {{0, K, 1}};                                                        \
        for (size_t j = 0; j < sizeof k_ops / sizeof k_ops[0]; ++j) {                          \
            xmpc_op op = k_ops[j];                                                             \
            T d[K], s[K], want[K], loc[K];                                                     \
            for (int k = 0; k < K; ++k) {                                                      \
                d[k] = pairs[k][0];                                                            \
                s[k] = pairs[k][1];                                                            \
                if (op == XMPC_OP_DIV && (s[k] == 0 || s[k] == (T)-1)) /* errors: see errors */ \
                    s[k] = 2;                                                                  \
                want[k] = edge_##NAME(op, d[k], s[k]);                                         \
            }                                                                                  \
            xmpc_coarray *c = xmpc_coarray_alloc("edge", XT, sizeof(T), 1, dims);              \
            T *cd = xmpc_coarray_data(c);                                                      \
            memcpy(cd, d, sizeof d);                                                           \
            xmpc_sync_all();                                                                   \
            xmpc_local ls = {s, 1, dims, all};                                                 \
            if (me == 1)                                                                       \
                xmpc_put_acc(c, last, all, op, XT, &ls);                                       \
            xmpc_sync_all();                                                                   \
            if (me == last)                                                                    \
                for (int k = 0; k < K; ++k)                                                    \
                    CHECK(!memcmp(&cd[k], &want[k], sizeof(T)),                                \
                          "put-acc " #NAME " '%c' pair %d: got %a, want %a", (char)op, k,      \
                          (double)cd[k], (double)want[k]);                                     \
            memcpy(cd, s, sizeof s);                                                           \
            memcpy(loc, d, sizeof d);                                                          \
            xmpc_sync_all();                                                                   \
            xmpc_local ll = {loc, 1, dims, all};                                               \
            if (me == 1) {                                                                     \
                xmpc_get_acc(c, last, all, op, XT, &ll);                                       \
                for (int k = 0; k < K; ++k)                                                    \
                    CHECK(!memcmp(&loc[k], &want[k], sizeof(T)),                               \
                          "get-acc " #NAME " '%c' pair %d: got %a, want %a", (char)op, k,      \
                          (double)loc[k], (double)want[k]);                                    \
            }                                                                                  \
            xmpc_coarray_free(c);                                                              \
        }                                                                                      \
    } while (0)

/* The C expressions, written out (integers through unsigned: defined wrap-around). */
#define EDGE_FN(NAME, T, ADD, SUB, MUL)                                                        \
    static T edge_##NAME(xmpc_op op, T d, T s)                                                 \
    {                                                                                          \
        switch (op) {                                                                          \
        case XMPC_OP_SUM: return ADD;                                                          \
        case XMPC_OP_DIFF: return SUB;                                                         \
        case XMPC_OP_PROD: return MUL;                                                         \
        case XMPC_OP_DIV: return d / s;                                                        \
        case XMPC_OP_MIN: return s < d ? s : d;                                                \
        default: return s > d ? s : d;                                                         \
        }                                                                                      \
    }
EDGE_FN(double, double, d + s, d - s, d * s)
EDGE_FN(float, float, d + s, d - s, d * s)
EDGE_FN(int, int, (int)((unsigned)d + (unsigned)s), (int)((unsigned)d - (unsigned)s),
        (int)((unsigned)d * (unsigned)s))

static void exact_edges(void)
{
    EDGE_CASE(double, XMPC_DOUBLE, double, {-0.0, 0.0}, {-0.0, -0.0}, {0.0, 0.0}, {0.0, -0.0},
              {-1.5, 1.5}, {1e308, 1e308}, {-1e308, 1e308}, {-0.0, 2.0});
    EDGE_CASE(float, XMPC_FLOAT, float, {-0.0f, 0.0f}, {-0.0f, -0.0f}, {0.0f, -0.0f},
              {-2.5f, 2.5f}, {3e38f, 3e38f});
    EDGE_CASE(int, XMPC_INT, int, {INT_MAX, 1}, {INT_MIN, 1}, {INT_MIN, -1}, {INT_MAX, INT_MAX},
              {-7, 2}, {7, -2}, {0, INT_MIN});
}

int main(int argc, char **argv)
{
    test_begin("xmpc-test-accumulate", &argc, &argv);
    exact_edges();
    for (size_t i = 0; i < sizeof k_types / sizeof k_types[0]; ++i)
        for (size_t j = 0; j < sizeof k_ops / sizeof k_ops[0]; ++j) {
            put_acc(k_types[i], k_ops[j]);
            put_acc_scalar(k_types[i], k_ops[j]);
            get_acc(k_types[i], k_ops[j]);
        }
    return test_end();
}
