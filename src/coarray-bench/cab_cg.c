/* cab-cg: NPB CG (NPB 3.x) in XMP local view (P002 §4.3, §5.2), three variants of
 * q = A.p across images:
 *
 *   --variant get     fig. 7: each image forms w = A(:, its columns) . p(its columns),
 *                     a full-length partial product in the coarray w; after a barrier
 *                     each image sums its slice of everyone's w with coarray gets
 *                     (get-accumulate, `q[0:len] += w[start:len]:[k]`), then a barrier
 *                     before w is overwritten
 *   --variant putacc  §5.2: the same sum pushed instead, `qacc[0:len_k]:[k] += w[start_k:
 *                     len_k]` as put-accumulate; sync memory completes them and one
 *                     barrier tells the targets (double-buffered, so that is the only
 *                     synchronisation per product, against two barriers for get)
 *   --variant mpi     two-sided reference: row blocks, MPI_Allgatherv of p, then a
 *                     local product; dot products with MPI_Allreduce
 *
 * Decomposition (any power-of-two image count): the n rows/columns are cut into
 * contiguous blocks, block k = [k*n/P + min(k, n%P) ...) (sizes differ by at most 1);
 * every vector (x, z, p, q, r) is distributed by these blocks.  The coarray variants
 * hold the column block of A (all n rows, their columns: NPB-MPI's layout with one
 * process row), the mpi variant the row block (all columns).  Dot products in the
 * coarray variants reduce through coarrays (cab_allreduce_sum), as xmpc has no
 * reduction directive.
 *
 * The kernel is NPB 3.x CG (NPB3.x-MPI/CG/cg.f: makea with sprnvc/vecset/sparse, the
 * matrix generated once per image for its block, conj_grad with 25 iterations, NITER
 * power-method iterations after one untimed), verified as NPB does: |zeta - zeta_ref|
 * / zeta_ref <= 1e-10 with the official zeta for classes S W A B C; Mop/s by NPB's
 * formula 2 niter na (3 + nz(nz+1) + 25 (5 + nz(nz+1)) + 3) / t / 10^6, nz = nonzer,
 * t = the slowest image's time (--trials N: the fastest of N runs, each from x = 1,
 * every one verified).  comm_share (P002 table 3) = the images' mean time in
 * communication (the q = A.p exchange and the dot-product reductions, synchronisation
 * waits included) / t. */
#include "cab_common.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef CAB_HAVE_MPI
#include <mpi.h>
#endif

enum { CGITMAX = 25 };

/* NPB 3.x cg.f: class parameters and the verification zeta. */
typedef struct {
    char name;
    int na, nonzer, niter;
    double shift, zeta_verify;
} cg_class;

static const cg_class k_classes[] = {
    {'S', 1400, 7, 15, 10.0, 8.5971775078648},
    {'W', 7000, 8, 15, 12.0, 10.362595087124},
    {'A', 14000, 11, 15, 20.0, 17.130235054029},
    {'B', 75000, 13, 75, 60.0, 22.712745482631},
    {'C', 150000, 15, 75, 110.0, 28.973605592845},
};
static const double RCOND = 0.1;

enum { V_GET, V_PUTACC, V_MPI };
static int g_variant, me, np; /* me: 0-based */
static int na, len, first;    /* this image's block: [first, first + len) */
static int *blk_first, *blk_len;
/* The local matrix in CSR: nrows rows (local row j is global row row0 + j), global
 * column indices. */
static int nrows, row0, *rowstr, *colidx;
static double *a;
static double *x, *z, *p, *q, *r, *w, *pfull;
static xmpc_coarray *ca_w, *ca_qacc[2];
static int g_qhalf;
static double t_comm;

/* ---- matrix generation (NPB makea, sprnvc, vecset, sparse) ------------------------------- */

static double tran, amult; /* NPB's /urando/ */

/* A sparse n-vector with nz distinct random positions (1-based in iv). */
static void sprnvc(int n, int nz, int nn1, double *v, int *iv, int *mark)
{
    int nzv = 0;
    while (nzv < nz) {
        double vecelt = cab_randlc(&tran, amult);
        double vecloc = cab_randlc(&tran, amult);
        int i = (int)(nn1 * vecloc) + 1; /* icnvrt: an integer in 1..nn1 */
        if (i > n || mark[i])
            continue;
        mark[i] = 1;
        v[nzv] = vecelt;
        iv[nzv++] = i;
    }
    for (int k = 0; k < nzv; ++k)
        mark[iv[k]] = 0;
}

/* Sets element i of the sparse vector (v, iv) to val, appending it if absent. */
static void vecset(double *v, int *iv, int *nzv, int i, double val)
{
    int set = 0;
    for (int k = 0; k < *nzv; ++k)
        if (iv[k] == i) {
            v[k] = val;
            set = 1;
        }
    if (!set) {
        v[*nzv] = val;
        iv[(*nzv)++] = i;
    }
}

typedef struct {
    int *row, *col;
    double *val;
    long n, cap;
} triples;

static void add_triple(triples *t, int row, int col, double val)
{
    if (t->n == t->cap) {
        t->cap = t->cap ? 2 * t->cap : 1 << 16;
        t->row = realloc(t->row, sizeof(int) * (size_t)t->cap);
        t->col = realloc(t->col, sizeof(int) * (size_t)t->cap);
        t->val = realloc(t->val, sizeof(double) * (size_t)t->cap);
        if (!t->row || !t->col || !t->val) {
            fprintf(stderr, "cab-cg: out of memory for %ld matrix elements\n", t->cap);
            xmpc_abort(UMS_EXIT_FAILED);
        }
    }
    t->row[t->n] = row;
    t->col[t->n] = col;
    t->val[t->n++] = val;
}

/* NPB sparse(): triples -> CSR of rows [firstrow, lastrow], duplicates summed in
 * generation order, zeros dropped (1-based rows/cols in, 0-based CSR out). */
static void sparse(triples *t, int n, int firstrow, int lastrow)
{
    nrows = lastrow - firstrow + 1;
    row0 = firstrow - 1;
    rowstr = cab_xalloc(sizeof(int) * ((size_t)nrows + 1));
    colidx = cab_xalloc(sizeof(int) * (size_t)t->n);
    a = cab_xalloc(sizeof(double) * (size_t)t->n);
    double *xs = cab_xalloc(sizeof(double) * ((size_t)n + 1));
    int *mark = cab_xalloc(sizeof(int) * ((size_t)n + 1)), *nzloc = cab_xalloc(sizeof(int) * ((size_t)n + 1));
    for (long k = 0; k < t->n; ++k)
        rowstr[t->row[k] - firstrow + 1]++;
    for (int j = 1; j <= nrows; ++j)
        rowstr[j] += rowstr[j - 1];
    /* bucket sort by row, stable: duplicates keep their generation order */
    for (long k = 0; k < t->n; ++k) {
        int j = t->row[k] - firstrow, pos = rowstr[j]++;
        a[pos] = t->val[k];
        colidx[pos] = t->col[k];
    }
    for (int j = nrows; j >= 1; --j)
        rowstr[j] = rowstr[j - 1];
    rowstr[0] = 0;
    /* sum duplicates row by row, columns in order of first nonzero appearance */
    int nza = 0, start = rowstr[0];
    for (int j = 0; j < nrows; ++j) {
        int nzrow = 0;
        for (int k = start; k < rowstr[j + 1]; ++k) {
            int i = colidx[k];
            xs[i] += a[k];
            if (!mark[i] && xs[i] != 0.0) {
                mark[i] = 1;
                nzloc[nzrow++] = i;
            }
        }
        for (int k = 0; k < nzrow; ++k) {
            int i = nzloc[k];
            mark[i] = 0;
            double xi = xs[i];
            xs[i] = 0.0;
            if (xi != 0.0) {
                a[nza] = xi;
                colidx[nza++] = i - 1; /* 0-based global column */
            }
        }
        start = rowstr[j + 1];
        rowstr[j + 1] = nza;
    }
    free(xs);
    free(mark);
    free(nzloc);
}

/* NPB makea for the rows [firstrow, lastrow] and columns [firstcol, lastcol] (1-based):
 * A = sum over the n outer products of random sparse vectors (each with 0.5 at its own
 * index), geometrically scaled, plus (rcond - shift) I.  Every image draws all n
 * vectors, so the matrix does not depend on the decomposition. */
static void makea(int n, int nonzer, double shift, int firstrow, int lastrow, int firstcol,
                  int lastcol)
{
    double size = 1.0, ratio = pow(RCOND, 1.0 / (double)n);
    int nn1 = 1;
    while (nn1 < n)
        nn1 *= 2; /* smallest power of two >= n */
    double *v = cab_xalloc(sizeof(double) * (size_t)(nonzer + 2));
    int *iv = cab_xalloc(sizeof(int) * (size_t)(nonzer + 2)), *mark = cab_xalloc(sizeof(int) * ((size_t)n + 1));
    triples t = {0};
    for (int iouter = 1; iouter <= n; ++iouter) {
        int nzv = nonzer;
        sprnvc(n, nzv, nn1, v, iv, mark);
        vecset(v, iv, &nzv, iouter, 0.5);
        for (int ivelt = 0; ivelt < nzv; ++ivelt) {
            int jcol = iv[ivelt];
            if (jcol < firstcol || jcol > lastcol)
                continue;
            double scale = size * v[ivelt];
            for (int ivelt1 = 0; ivelt1 < nzv; ++ivelt1) {
                int irow = iv[ivelt1];
                if (irow >= firstrow && irow <= lastrow)
                    add_triple(&t, irow, jcol, v[ivelt1] * scale);
            }
        }
        size *= ratio;
    }
    for (int i = firstrow; i <= lastrow; ++i)
        if (i >= firstcol && i <= lastcol)
            add_triple(&t, i, i, RCOND - shift);
    sparse(&t, n, firstrow, lastrow);
    free(t.row);
    free(t.col);
    free(t.val);
    free(v);
    free(iv);
    free(mark);
}

/* ---- communication ------------------------------------------------------------------------ */

static double dot_allreduce(double *v, int n)
{
    double t0 = ums_now();
#ifdef CAB_HAVE_MPI
    if (g_variant == V_MPI)
        MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    else
#endif
        cab_allreduce_sum(v, n);
    t_comm += ums_now() - t0;
    return v[0];
}

/* y = this image's part of A . x: one loop for every variant, so they differ only in
 * decomposition and communication, never in the code (or the code's placement) of the
 * product itself. */
static __attribute__((noinline)) void spmv(const double *x, double *y)
{
    for (int j = 0; j < nrows; ++j) {
        double sum = 0.0;
        for (int k = rowstr[j]; k < rowstr[j + 1]; ++k)
            sum += a[k] * x[colidx[k]];
        y[j] = sum;
    }
}

/* out = A . in (both distributed by blocks). */
static void matvec(const double *in, double *out)
{
    if (g_variant == V_MPI) {
#ifdef CAB_HAVE_MPI
        double t0 = ums_now();
        MPI_Allgatherv(in, len, MPI_DOUBLE, pfull, blk_len, blk_first, MPI_DOUBLE, MPI_COMM_WORLD);
        t_comm += ums_now() - t0;
        spmv(pfull, out); /* my rows, every column */
#endif
        return;
    }
    spmv(in, w); /* w = A(:, my columns) . in (block-relative columns): every row */
    double t0 = ums_now();
    if (g_variant == V_GET) {
        xmpc_sync_all(); /* #pragma xmp barrier: every w is complete */
        memcpy(out, w + first, sizeof(double) * (size_t)len);
        for (int k = 1; k < np; ++k) {
            int img = (me + k) % np + 1; /* everyone starts at a different image */
            /* q[0:len] += w[first:len]:[img]; */
            CAB_RMA1(XMPC_RMA_GET_ACC, ca_w, out, first, len, 0, XMPC_OP_SUM, img);
        }
        xmpc_sync_all(); /* #pragma xmp barrier: w may be overwritten */
    } else {
        xmpc_coarray *qacc = ca_qacc[g_qhalf];
        for (int k = 1; k < np; ++k) {
            int t = (me + k) % np;
            /* qacc[0:len_t]:[t] += w[first_t:len_t]; */
            CAB_RMA1(XMPC_RMA_PUT_ACC, qacc, w, 0, blk_len[t], blk_first[t], XMPC_OP_SUM, t + 1);
        }
        memcpy(out, w + first, sizeof(double) * (size_t)len);
        xmpc_sync_memory(); /* #pragma xmp sync_memory: my accumulates are complete */
        xmpc_barrier();     /* ... and so are everyone's */
        double *acc = xmpc_coarray_data(qacc);
        for (int j = 0; j < len; ++j) {
            out[j] += acc[j];
            acc[j] = 0.0; /* reused two products later, after another barrier */
        }
        g_qhalf ^= 1;
    }
    t_comm += ums_now() - t0;
}

/* ---- NPB conj_grad ------------------------------------------------------------------------- */

static double conj_grad(void)
{
    for (int j = 0; j < len; ++j) {
        q[j] = z[j] = 0.0;
        r[j] = p[j] = x[j];
    }
    double rho = 0.0;
    for (int j = 0; j < len; ++j)
        rho += r[j] * r[j];
    rho = dot_allreduce(&rho, 1);
    for (int cgit = 1; cgit <= CGITMAX; ++cgit) {
        matvec(p, q);
        double d = 0.0;
        for (int j = 0; j < len; ++j)
            d += p[j] * q[j];
        d = dot_allreduce(&d, 1);
        double alpha = rho / d, rho0 = rho;
        for (int j = 0; j < len; ++j) {
            z[j] += alpha * p[j];
            r[j] -= alpha * q[j];
        }
        rho = 0.0;
        for (int j = 0; j < len; ++j)
            rho += r[j] * r[j];
        rho = dot_allreduce(&rho, 1);
        double beta = rho / rho0;
        for (int j = 0; j < len; ++j)
            p[j] = r[j] + beta * p[j];
    }
    /* ||r|| = ||x - A.z|| */
    matvec(z, r);
    double sum = 0.0;
    for (int j = 0; j < len; ++j) {
        double d = x[j] - r[j];
        sum += d * d;
    }
    return sqrt(dot_allreduce(&sum, 1));
}

/* zeta = shift + 1/(x.z); x = z/||z||.  Returns zeta. */
static double power_step(double shift)
{
    double norm[2] = {0.0, 0.0};
    for (int j = 0; j < len; ++j) {
        norm[0] += x[j] * z[j];
        norm[1] += z[j] * z[j];
    }
    dot_allreduce(norm, 2);
    double inv = 1.0 / sqrt(norm[1]);
    for (int j = 0; j < len; ++j)
        x[j] = inv * z[j];
    return shift + 1.0 / norm[0];
}

int main(int argc, char **argv)
{
    const char *cls = "S", *variant = "get";
    long long trials = 1;
    const ums_arg args[] = {
        {"class", UMS_ARG_CHOICE, &cls, "NPB problem class", 0, -1, "S|W|A|B|C"},
        {"variant", UMS_ARG_CHOICE, &variant,
         "q = A.p reduction: coarray gets (P002 fig. 7), put-accumulate (§5.2) or two-sided MPI",
         0, -1, "get|putacc|mpi"},
        CAB_TRIALS_ARG(&trials),
    };
    ums_args_parse(argc, argv,
                   "NPB CG (NPB 3.x) in XMP local view, 1-D block distribution; images: a power "
                   "of two.  JSON lines on stdout, verification on stderr.",
                   args, sizeof args / sizeof args[0]);
    const cg_class *C = NULL;
    for (size_t i = 0; i < sizeof k_classes / sizeof k_classes[0]; ++i)
        if (k_classes[i].name == cls[0])
            C = &k_classes[i];
    g_variant = !strcmp(variant, "get") ? V_GET : !strcmp(variant, "putacc") ? V_PUTACC : V_MPI;

    cab_start("cab-cg", &argc, &argv);
    me = xmpc_this_image() - 1;
    np = xmpc_num_images();
    ums_param_str("class", cls);
    ums_param_str("variant", variant);
    ums_param_int("trials", trials);
    na = C->na;
    if (!cab_is_pow2(np) || np > na)
        cab_usage_fail("NPB CG needs a power-of-two number of images (at most %d), got %d", na, np);
    if (g_variant == V_MPI && !cab_mpi_usable())
        cab_unsupported("--variant mpi needs MPI and an MPI-based backend (mpi3, armci); "
                        "backend is %s", xmpc_backend_name());

    blk_first = cab_xalloc(sizeof(int) * (size_t)np);
    blk_len = cab_xalloc(sizeof(int) * (size_t)np);
    int maxlen = 0;
    for (int k = 0; k < np; ++k) {
        blk_len[k] = na / np + (k < na % np);
        blk_first[k] = k * (na / np) + (k < na % np ? k : na % np);
        maxlen = blk_len[k] > maxlen ? blk_len[k] : maxlen;
    }
    first = blk_first[me];
    len = blk_len[me];

    /* NPB: the generator's first draw precedes makea (zeta = randlc(tran, amult)). */
    tran = 314159265.0;
    amult = 1220703125.0;
    cab_randlc(&tran, amult);
    if (g_variant == V_MPI)
        makea(na, C->nonzer, C->shift, first + 1, first + len, 1, na); /* row block */
    else {
        makea(na, C->nonzer, C->shift, 1, na, first + 1, first + len); /* column block */
        /* columns relative to the block once here, not per nonzero in every product */
        for (int k = 0; k < rowstr[nrows]; ++k)
            colidx[k] -= first;
    }

    x = cab_xalloc(sizeof(double) * (size_t)maxlen);
    z = cab_xalloc(sizeof(double) * (size_t)maxlen);
    p = cab_xalloc(sizeof(double) * (size_t)maxlen);
    q = cab_xalloc(sizeof(double) * (size_t)maxlen);
    r = cab_xalloc(sizeof(double) * (size_t)maxlen);
    if (g_variant == V_MPI) {
        pfull = cab_xalloc(sizeof(double) * (size_t)na);
    } else if (g_variant == V_GET) {
        long dims[] = {na};
        ca_w = xmpc_coarray_alloc("w", XMPC_DOUBLE, sizeof(double), 1, dims); /* double w[na]:[*] */
        w = xmpc_coarray_data(ca_w);
    } else {
        long dims[] = {maxlen};
        w = cab_xalloc(sizeof(double) * (size_t)na);
        ca_qacc[0] = xmpc_coarray_alloc("qacc0", XMPC_DOUBLE, sizeof(double), 1, dims);
        ca_qacc[1] = xmpc_coarray_alloc("qacc1", XMPC_DOUBLE, sizeof(double), 1, dims);
    }

    double time = 0, share = 0, zeta = 0, err = 0;
    int verified = 1;
    for (long long k = 0; k < trials; ++k) {
        /* NPB's start every trial (x = 1: the power method's only state; the rest is
         * rebuilt from x): one untimed power step (pages, connections), then x = 1. */
        for (int j = 0; j < len; ++j)
            x[j] = 1.0;
        conj_grad();
        power_step(C->shift);
        for (int j = 0; j < len; ++j)
            x[j] = 1.0;
        t_comm = 0.0;
        xmpc_sync_all();

        double t0 = ums_now(), zeta_k = 0.0, rnorm = 0.0;
        for (int it = 1; it <= C->niter; ++it) {
            rnorm = conj_grad();
            zeta_k = power_step(C->shift);
            if (me == 0 && (it == 1 || it == C->niter))
                fprintf(stderr, "cab-cg: iteration %3d  ||r|| = %.14e  zeta = %.13f\n", it, rnorm,
                        zeta_k);
        }
        double t_total = ums_now() - t0;

        /* Bookkeeping (untimed): the slowest image's time, the mean communication time. */
        double tmax[1] = {t_total}, comm[1] = {t_comm};
        cab_allreduce_max(tmax, 1);
        cab_allreduce_sum(comm, 1);
        const double err_k = fabs(zeta_k - C->zeta_verify) / C->zeta_verify;
        const int ok = err_k <= 1e-10;
        if (cab_trial_best(k, trials, tmax[0], ok, &time))
            share = 100.0 * comm[0] / np / time;
        verified &= ok;
        if (k == 0 || !(err_k <= err)) { /* zeta and error: the worst trial's */
            err = err_k;
            zeta = zeta_k;
        }
    }
    const double nzz = (double)C->nonzer * (C->nonzer + 1);
    const double mops = 2.0 * C->niter * na * (3.0 + nzz + 25.0 * (5.0 + nzz) + 3.0) / time / 1e6;
    if (me == 0) {
        const char *metrics[] = {"mops", "time", "comm_share"}, *units[] = {"Mop/s", "s", "%"};
        const double values[] = {mops, time, share};
        for (int i = 0; i < 3; ++i) {
            ums_rec rec;
            ums_rec_begin(&rec, metrics[i], values[i], units[i]);
            ums_rec_bool(&rec, "verified", verified);
            ums_rec_num(&rec, "zeta", zeta);
            ums_rec_num(&rec, "zeta_expected", C->zeta_verify);
            ums_rec_num(&rec, "rel_error", err);
            ums_rec_emit(&rec);
        }
        fprintf(stderr, "cab-cg: class %c, %d images, %s, %s: zeta %.13f (expected %.13f, error "
                "%.2e): %.3f s, %.2f Mop/s, comm %.1f%%: verification %s\n", C->name, np, variant,
                xmpc_backend_name(), zeta, C->zeta_verify, err, time, mops, share,
                verified ? "SUCCESSFUL" : "UNSUCCESSFUL");
    }
    cab_exit(verified ? 0 : UMS_EXIT_FAILED);
}
