/* The entry point Omni XMP's translator emits for every coarray access (P002 fig. 1),
 * decoded into the same core call as the native API, so translator output links
 * against this library unchanged.  Argument order, after (code, desc, local_addr):
 *   (int)ndims, ndims x {(int)start, (int)length, (int)stride, (unsigned long long)distance}
 *   for the coarray, the same for the local array, (char)op, (void *)operand, then one
 *   (int) node index per codimension of desc. */
#include "xmpc_internal.h"

#include <stdarg.h>

static void read_dims(va_list *ap, xmpc_section *s, const xmpc_coarray *ca, const char *side)
{
    s->ndims = va_arg(*ap, int);
    s->extent = NULL;
    if (s->ndims < 1 || s->ndims > XMPC_MAX_DIMS)
        xmpc_fatal(ca, 0, "_XMP_coarray_rma_ARRAY: %s has %d dimensions (1..%d)", side, s->ndims,
                   XMPC_MAX_DIMS);
    for (int d = 0; d < s->ndims; ++d) {
        s->base[d] = va_arg(*ap, int);
        s->length[d] = va_arg(*ap, int);
        s->step[d] = va_arg(*ap, int);
        s->dist[d] = (size_t)va_arg(*ap, unsigned long long);
    }
}

void _XMP_coarray_rma_ARRAY(int rma_code, xmpc_coarray *desc, void *local_addr, ...)
{
    xmpc_check_handle(desc, "_XMP_coarray_rma_ARRAY"); /* before desc is read */
    if (rma_code < XMPC_RMA_GET || rma_code > XMPC_RMA_PUT_ACC)
        xmpc_fatal(desc, 0, "_XMP_coarray_rma_ARRAY: unknown rma_code %d (700..703)", rma_code);
    va_list ap;
    va_start(ap, local_addr);
    xmpc_section rs, ls;
    read_dims(&ap, &rs, desc, "the coarray");
    read_dims(&ap, &ls, desc, "the local array");
    xmpc_op op = (xmpc_op)(char)va_arg(ap, int); /* char is promoted through `...` */
    const void *operand = va_arg(ap, void *);
    int idx[XMPC_MAX_DIMS];
    for (int k = 0; k < desc->ncodims; ++k)
        idx[k] = va_arg(ap, int);
    va_end(ap);
    int acc = rma_code == XMPC_RMA_GET_ACC || rma_code == XMPC_RMA_PUT_ACC;

    /* a[b:n]:[k] = l[c:n] (or its get) on a coarray a(:)[*], the statement ping-pongs
     * and halos are made of: straight to the contiguous transfer.  It checks what the
     * path below would; anything it does not take goes on below. */
    if (!operand && rs.ndims == 1 && ls.ndims == 1 && desc->ndims == 1 && desc->ncodims == 1 &&
        desc->codims[0] == 0 && rs.step[0] == 1 && ls.step[0] == 1 && rs.dist[0] == 1 &&
        ls.dist[0] == 1 &&
        xmpc_rma_contiguous(rma_code, desc, idx[0], rs.base[0], rs.length[0], local_addr,
                            ls.base[0], ls.length[0], NULL, acc ? op : (xmpc_op)0, desc->type))
        return;

    /* The coarray's distances come from its declaration; disagreeing ones mean the
     * translator and the allocation describe different arrays. */
    rs.extent = rs.ndims == desc->ndims ? desc->dims : NULL;
    size_t dist = 1;
    for (int d = desc->ndims - 1; rs.extent && d >= 0; dist *= (size_t)desc->dims[d--])
        if (rs.dist[d] != dist)
            xmpc_fatal(desc, 0, "_XMP_coarray_rma_ARRAY: element distance %zu of dimension %d "
                       "does not match the coarray's shape (%zu)", rs.dist[d], d, dist);
    int image = xmpc_image_of(desc, idx);
    char *laddr = local_addr;
    if (operand) { /* `a[...]:[k] op= scalar`: the scalar stands for the local section */
        if (rma_code != XMPC_RMA_PUT_ACC)
            xmpc_fatal(desc, image, "_XMP_coarray_rma_ARRAY: an operand is only valid with 703");
        static const long one = 1;
        ls = (xmpc_section){.ndims = 1, .length = {1}, .step = {1}, .dist = {1}, .extent = &one};
        laddr = (char *)operand;
    }
    xmpc_rma_live(rma_code, desc, image, &rs, laddr, &ls, acc ? op : (xmpc_op)0, desc->type,
             "_XMP_coarray_rma_ARRAY");
}
