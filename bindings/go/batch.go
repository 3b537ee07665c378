// batch.go owns the calls of a Conn that take many checkouts at once (the
// batch functions), the audit, and the statistics.

package reserve

/*
#include <stdlib.h>
#include <string.h>
#include "shim.h"
*/
import "C"

import (
	"context"
	"runtime/cgo"
	"time"
	"unsafe"
)

// ReserveRequest is one entry of ReserveBatch: as ReserveOne's arguments.
type ReserveRequest struct {
	Shop     uint64
	Token    string
	Item     uint64
	Location uint64
	Quantity int64
}

// Checkout names one checkout, for ClaimBatch and ReleaseBatch.
type Checkout struct {
	Shop  uint64
	Token string
}

// cTokens copies tokens into C memory: the library takes an array of
// pointers, which Go memory may not hold.  free releases it.
type cTokens struct {
	ptrs  unsafe.Pointer // const void *[n]
	lens  unsafe.Pointer // size_t[n]
	bytes unsafe.Pointer
}

func newCTokens(tokens []string) *cTokens {
	n, total := len(tokens), 1
	for _, t := range tokens {
		total += len(t)
	}
	ct := &cTokens{
		ptrs:  C.calloc(C.size_t(n), C.size_t(unsafe.Sizeof(uintptr(0)))),
		lens:  C.calloc(C.size_t(n), C.sizeof_size_t),
		bytes: C.malloc(C.size_t(total)),
	}
	ptrs := unsafe.Slice((*unsafe.Pointer)(ct.ptrs), n)
	lens := unsafe.Slice((*C.size_t)(ct.lens), n)
	off := 0
	for i, t := range tokens {
		dst := unsafe.Add(ct.bytes, off)
		if len(t) > 0 {
			C.memcpy(dst, unsafe.Pointer(&[]byte(t)[0]), C.size_t(len(t)))
		}
		ptrs[i], lens[i] = dst, C.size_t(len(t))
		off += len(t)
	}
	return ct
}

func (ct *cTokens) free() {
	C.free(ct.ptrs)
	C.free(ct.lens)
	C.free(ct.bytes)
}

// batch runs one batch function and turns its per-entry codes into one
// error per entry (nil for OK).  The returned error is the whole batch's
// failure (nothing per entry then).
func (c *Conn) batch(ctx context.Context, op string, n int, call func(p *C.rsv_ctx, res *C.int) C.int) ([]error, error) {
	if n == 0 || n > BatchMax {
		return nil, argError(op, ErrInvalid, "a batch takes 1..%d entries, not %d", BatchMax, n)
	}
	res := make([]C.int, n)
	err := c.blocking(ctx, op, func(p *C.rsv_ctx) C.int { return call(p, &res[0]) })
	if err != nil {
		return nil, err
	}
	out := make([]error, n)
	for i, rc := range res {
		if rc != 0 {
			out[i] = newError(op, Code(rc), "")
		}
	}
	return out, nil
}

// ReserveBatch reserves many one-line checkouts at once (at most
// BatchMax), in one statement and one commit where it can.  Each entry's
// error is what ReserveOne would have returned for it.
func (c *Conn) ReserveBatch(ctx context.Context, reqs []ReserveRequest, ttl time.Duration) ([]error, error) {
	const op = "reserve batch"
	ms, err := ttlMillis(op, ttl)
	if err != nil {
		return nil, err
	}
	n := len(reqs)
	tokens := make([]string, n)
	shops, items, locs := make([]C.uint64_t, n+1), make([]C.uint64_t, n+1), make([]C.uint64_t, n+1)
	qty := make([]C.int64_t, n+1)
	for i, r := range reqs {
		tokens[i] = r.Token
		shops[i], items[i], locs[i], qty[i] = C.uint64_t(r.Shop), C.uint64_t(r.Item), C.uint64_t(r.Location), C.int64_t(r.Quantity)
	}
	ct := newCTokens(tokens)
	defer ct.free()
	return c.batch(ctx, op, n, func(p *C.rsv_ctx, res *C.int) C.int {
		return C.go_rsv_reserve_batch(p, C.size_t(n), &shops[0], (*unsafe.Pointer)(ct.ptrs), (*C.size_t)(ct.lens), &items[0], &locs[0], &qty[0], ms, res)
	})
}

// CartRequest is one checkout of a cart, for ReserveCartBatch.
type CartRequest struct {
	Shop  uint64
	Token string
	Lines []Line
}

// CartResult is what ReserveCartBatch answers for one entry: where each
// line is held, or the error Reserve would have returned for it.
type CartResult struct {
	Allocations [][]Allocation
	Err         error
}

// ReserveCartBatch reserves many checkouts of carts at once (at most
// BatchMax), in one statement and one commit where it can; each entry
// answers what Reserve would have.
func (c *Conn) ReserveCartBatch(ctx context.Context, reqs []CartRequest, ttl time.Duration) ([]CartResult, error) {
	const op = "reserve cart batch"
	ms, err := ttlMillis(op, ttl)
	if err != nil {
		return nil, err
	}
	n := len(reqs)
	tokens := make([]string, n)
	shops := make([]C.uint64_t, n+1)
	carts := make([]*C.rsv_cart, n+1) // (C pointers only: cgo may pass it)
	defer func() {
		for _, cart := range carts {
			if cart != nil {
				C.go_rsv_cart_free(cart)
			}
		}
	}()
	for i, r := range reqs {
		tokens[i], shops[i] = r.Token, C.uint64_t(r.Shop)
		if carts[i], err = newCart(op, r.Lines); err != nil {
			return nil, err
		}
	}
	ct := newCTokens(tokens)
	defer ct.free()
	errs, err := c.batch(ctx, op, n, func(p *C.rsv_ctx, res *C.int) C.int {
		return C.go_rsv_reserve_cart_batch(p, C.size_t(n), &shops[0], (*unsafe.Pointer)(ct.ptrs), (*C.size_t)(ct.lens), &carts[0], ms, res)
	})
	if err != nil {
		return nil, err
	}
	out := make([]CartResult, n)
	for i, e := range errs {
		out[i].Allocations, out[i].Err = cartAnswer(carts[i], len(reqs[i].Lines), e)
	}
	return out, nil
}

func (c *Conn) settleBatch(ctx context.Context, op string, cos []Checkout, claim bool) ([]error, error) {
	n := len(cos)
	tokens := make([]string, n)
	shops := make([]C.uint64_t, n+1)
	for i, co := range cos {
		tokens[i], shops[i] = co.Token, C.uint64_t(co.Shop)
	}
	ct := newCTokens(tokens)
	defer ct.free()
	return c.batch(ctx, op, n, func(p *C.rsv_ctx, res *C.int) C.int {
		if claim {
			return C.go_rsv_claim_batch(p, C.size_t(n), &shops[0], (*unsafe.Pointer)(ct.ptrs), (*C.size_t)(ct.lens), res)
		}
		return C.go_rsv_release_batch(p, C.size_t(n), &shops[0], (*unsafe.Pointer)(ct.ptrs), (*C.size_t)(ct.lens), res)
	})
}

// ClaimBatch claims many checkouts at once; each entry's error is what
// Claim would have returned for it.
func (c *Conn) ClaimBatch(ctx context.Context, checkouts []Checkout) ([]error, error) {
	return c.settleBatch(ctx, "claim batch", checkouts, true)
}

// ReleaseBatch releases many checkouts at once; each entry's error is
// what Release would have returned for it.
func (c *Conn) ReleaseBatch(ctx context.Context, checkouts []Checkout) ([]error, error) {
	return c.settleBatch(ctx, "release batch", checkouts, false)
}

// Violation is one broken invariant found by Audit.
type Violation struct {
	Shop, Item, Location uint64
	Problem              string
}

//export rsvgoAuditViolation
func rsvgoAuditViolation(h C.uintptr_t, shop, item, loc C.uint64_t, problem *C.char) {
	out := cgo.Handle(h).Value().(*[]Violation)
	*out = append(*out, Violation{uint64(shop), uint64(item), uint64(loc), C.GoString(problem)})
}

// Audit checks the invariants (stock never oversold, pools within their
// caps, ...) on one snapshot, for one shop or every shop, and returns what
// it found broken: nothing, in a healthy database.
func (c *Conn) Audit(ctx context.Context, shop uint64, allShops bool) ([]Violation, error) {
	var found []Violation
	h := cgo.NewHandle(&found)
	defer h.Delete()
	all := C.int(0)
	if allShops {
		all = 1
	}
	err := c.blocking(ctx, "audit", func(p *C.rsv_ctx) C.int {
		return C.rsvgo_audit(p, C.uint64_t(shop), all, C.uintptr_t(h))
	})
	return found, err
}

// Op is a kind of operation, for the statistics.
type Op uint32

// The operation kinds (enum rsv_op_kind).
const (
	OpAll Op = iota
	OpReserve
	OpClaim
	OpRelease
	OpExtend
	OpStatus
	OpReplenish
	OpSweep
	OpStock
	OpAudit
)

// Stat is a counter of the statistics (enum rsv_stat; see reserve.h for
// which mean the same in every release).
type Stat uint32

// The counters.
const (
	StatCalls Stat = iota
	StatOK
	StatExpected
	StatFailed
	StatRetries
	StatDeadlocks
	StatLockWaitTimeouts
	StatInlineRefills
	StatSlowPaths
	StatShortReads
	StatStatements
	StatLatencyMicros
	StatLatencyMaxMicros
	StatOneTrip
)

// Stat reads one counter of the calls made on this Conn.
func (c *Conn) Stat(ctx context.Context, s Stat, op Op) (uint64, error) {
	var v C.uint64_t
	err := c.blocking(ctx, "stats", func(p *C.rsv_ctx) C.int {
		return C.go_rsv_stats_get(p, C.uint32_t(s), C.uint32_t(op), &v)
	})
	return uint64(v), err
}
