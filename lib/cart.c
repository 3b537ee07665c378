/*
 * cart.c - the cart object: lines the caller adds, validated as they are
 * added, and the per-line allocation a reserve fills in.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

RSV_EXTERN int rsv_cart_new(rsv_cart **out)
{
    if (!out)
        return RSV_EINVAL;
    *out = calloc(1, sizeof **out);
    if (!*out)
        return RSV_ENOMEM;
    (*out)->failed_line = (size_t)-1;
    return RSV_OK;
}

static void line_free(cart_line *l)
{
    free(l->locs);
    free(l->alloc);
}

RSV_EXTERN void rsv_cart_clear(rsv_cart *cart)
{
    if (!cart)
        return;
    for (size_t i = 0; i < cart->n; i++)
        line_free(&cart->lines[i]);
    cart->n = 0;
    cart->failed_line = (size_t)-1;
}

RSV_EXTERN void rsv_cart_free(rsv_cart *cart)
{
    if (!cart)
        return;
    rsv_cart_clear(cart);
    free(cart->lines);
    free(cart);
}

RSV_EXTERN int rsv_cart_add(rsv_cart *cart, uint64_t item_id,
                            const uint64_t *location_ids, size_t n_locations,
                            int64_t quantity, uint32_t flags)
{
    if (!cart || !location_ids || n_locations == 0)
        return RSV_EINVAL;
    if (flags & ~RSV_LINE_SPLIT)
        return RSV_EINVAL;
    if (quantity < 1 || quantity > RSV_QUANTITY_MAX)
        return RSV_EQUANTITY;
    if (n_locations > RSV_LINE_MAX_LOCATIONS || cart->n >= RSV_CART_MAX_LINES)
        return RSV_ETOOBIG;
    for (size_t i = 0; i < n_locations; i++)
        for (size_t j = 0; j < i; j++)
            if (location_ids[i] == location_ids[j])
                return RSV_EINVAL;
    if (cart->n == cart->cap) {
        size_t cap = cart->cap ? cart->cap * 2 : 8;
        cart_line *l = realloc(cart->lines, cap * sizeof *l);
        if (!l)
            return RSV_ENOMEM;
        cart->lines = l;
        cart->cap = cap;
    }
    cart_line *l = &cart->lines[cart->n];
    memset(l, 0, sizeof *l);
    l->locs = malloc(n_locations * sizeof *l->locs);
    l->alloc = calloc(n_locations, sizeof *l->alloc);
    if (!l->locs || !l->alloc) {
        line_free(l);
        return RSV_ENOMEM;
    }
    memcpy(l->locs, location_ids, n_locations * sizeof *l->locs);
    l->item = item_id;
    l->n_locs = n_locations;
    l->qty = quantity;
    l->flags = flags;
    cart->n++;
    return RSV_OK;
}

RSV_EXTERN size_t rsv_cart_lines(const rsv_cart *cart)
{
    return cart ? cart->n : 0;
}

RSV_EXTERN int rsv_cart_allocation_count(const rsv_cart *cart, size_t line,
                                         size_t *count_out)
{
    if (!cart || !count_out)
        return RSV_EINVAL;
    if (line >= cart->n)
        return RSV_ERANGE;
    size_t n = 0;
    for (size_t j = 0; j < cart->lines[line].n_locs; j++)
        n += cart->lines[line].alloc[j] > 0;
    *count_out = n;
    return RSV_OK;
}

RSV_EXTERN int rsv_cart_allocation(const rsv_cart *cart, size_t line,
                                   size_t idx, uint64_t *location_out,
                                   int64_t *quantity_out)
{
    if (!cart || !location_out || !quantity_out)
        return RSV_EINVAL;
    if (line >= cart->n)
        return RSV_ERANGE;
    const cart_line *l = &cart->lines[line];
    for (size_t j = 0; j < l->n_locs; j++) {
        if (l->alloc[j] <= 0)
            continue;
        if (idx-- == 0) {
            *location_out = l->locs[j];
            *quantity_out = l->alloc[j];
            return RSV_OK;
        }
    }
    return RSV_ERANGE;
}

RSV_EXTERN size_t rsv_cart_failed_line(const rsv_cart *cart)
{
    return cart ? cart->failed_line : (size_t)-1;
}
