// batcher.go owns Batcher: the library's batcher (rsv_batcher_*), shared
// by any number of goroutines.  Requests go in through the non-blocking
// starts; one goroutine per Batcher collects the answers from the
// batcher's descriptor and hands each to the goroutine that asked, so
// waiting callers hold no OS thread.

package reserve

/*
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"context"
	"sync"
	"time"
	"unsafe"
)

// Batcher coalesces the reserves, claims and releases of many goroutines
// onto a few connections of its own, as batches (one statement and one
// commit for many checkouts).  Every method may be called from any
// goroutine at any time.  Each call answers what the single call on a
// Conn would (ReserveOne, Claim, Release); there is no per-call message.
type Batcher struct {
	ptr  *C.rsv_batcher
	wake *waiter

	mu      sync.Mutex
	waiting map[*C.rsv_batcher_call]chan Code // answered by collect
	// the carts of calls whose caller stopped waiting: freed by collect
	// once their call completes (a worker uses the cart until then)
	orphans  map[*C.rsv_batcher_call]*C.rsv_cart
	closing  bool
	drained  *sync.Cond // signalled when waiting empties
	loopDone chan struct{}
}

// OpenBatcher opens a Batcher with the given number of connections
// (1..64), each opened as Open opens one.
func OpenBatcher(ctx context.Context, dsn string, opts *Options, connections int) (*Batcher, error) {
	const op = "open batcher"
	if connections < 1 || connections > 64 {
		return nil, argError(op, ErrInvalid, "connections must be 1..64, not %d", connections)
	}
	var p *C.rsv_batcher
	var rc C.int
	err := opening(ctx, op, dsn, opts, func(cdsn *C.char, o *C.rsv_options) {
		rc = C.go_rsv_batcher_open(&p, cdsn, o, C.uint32_t(connections))
	})
	if err != nil {
		return nil, err
	}
	if rc != 0 {
		return nil, newError(op, Code(rc), "the batcher keeps no message: open a Conn with the same dsn to see why")
	}
	w, err := newWaiter(int(C.go_rsv_batcher_fd(p)))
	if err != nil {
		C.go_rsv_batcher_close(p)
		return nil, newError(op, ErrNoMemory, err.Error())
	}
	b := &Batcher{ptr: p, wake: w, waiting: map[*C.rsv_batcher_call]chan Code{},
		orphans: map[*C.rsv_batcher_call]*C.rsv_cart{}, loopDone: make(chan struct{})}
	b.drained = sync.NewCond(&b.mu)
	go b.collect()
	return b, nil
}

// collect hands every completed call to its waiting goroutine, until the
// waiter is closed.
func (b *Batcher) collect() {
	defer close(b.loopDone)
	for {
		for {
			var done *C.rsv_batcher_call
			var code C.int
			if C.go_rsv_batcher_next_done(b.ptr, &done, &code) != 0 {
				break
			}
			b.mu.Lock()
			ch := b.waiting[done]
			orphan := b.orphans[done]
			delete(b.waiting, done)
			delete(b.orphans, done)
			if len(b.waiting) == 0 {
				b.drained.Broadcast()
			}
			b.mu.Unlock()
			C.go_rsv_batcher_call_free(done)
			if orphan != nil {
				C.go_rsv_cart_free(orphan)
			}
			if ch != nil {
				ch <- Code(code) // buffered: never blocks
			}
		}
		if !b.wake.wait() {
			return
		}
	}
}

// call starts one request and waits for its answer.  When ctx ends first
// the request cannot be taken back: the caller is told ErrInDoubt (repeat
// it with the same token to learn its outcome) matching ctx's error too.
func (b *Batcher) call(ctx context.Context, op string, start func(out **C.rsv_batcher_call) C.int) error {
	return b.callWith(ctx, op, nil, start)
}

// callWith is call for a request that uses *cart until it completes: the
// cart is the caller's again once callWith returns, unless ctx ended
// first; then collect frees it once the request completes, and *cart is
// set to nil.
func (b *Batcher) callWith(ctx context.Context, op string, cart **C.rsv_cart, start func(out **C.rsv_batcher_call) C.int) error {
	if ctx.Err() != nil {
		return ctxError(op, ctx)
	}
	ch := make(chan Code, 1)
	b.mu.Lock()
	if b.closing {
		b.mu.Unlock()
		return ErrClosed
	}
	// Registered under the lock the collector takes to look it up, so
	// an answer cannot arrive before its waiter is known.
	var c *C.rsv_batcher_call
	rc := start(&c)
	if rc == codePending {
		b.waiting[c] = ch
	}
	b.mu.Unlock()
	if rc != codePending {
		return codeError(op, Code(rc))
	}
	select {
	case code := <-ch:
		return codeError(op, code)
	case <-ctx.Done():
		if cart != nil {
			b.mu.Lock()
			_, pending := b.waiting[c]
			if pending {
				b.orphans[c] = *cart
				*cart = nil
			}
			b.mu.Unlock()
			if !pending { // answered meanwhile: the code is on its way
				return codeError(op, <-ch)
			}
		}
		e := newError(op, ErrInDoubt, "the context ended before the batcher answered; the request may still be applied: repeat it with the same token")
		e.cause = ctx.Err()
		return e
	}
}

func codeError(op string, code Code) error {
	if code == OK {
		return nil
	}
	return newError(op, code, "")
}

// ReserveOne is Conn.ReserveOne through the batcher.
func (b *Batcher) ReserveOne(ctx context.Context, shop uint64, tok string, item, location uint64, quantity int64, ttl time.Duration) error {
	const op = "reserve"
	ms, err := ttlMillis(op, ttl)
	if err != nil {
		return err
	}
	return oneLine(b.call(ctx, op, func(out **C.rsv_batcher_call) C.int {
		t, n := token(tok)
		return C.go_rsv_batcher_reserve_one_start(b.ptr, C.uint64_t(shop), t, n, C.uint64_t(item), C.uint64_t(location), C.int64_t(quantity), ms, out)
	}))
}

// Reserve is Conn.Reserve through the batcher: the carts of goroutines
// calling at the same time go to the server as one batch.
func (b *Batcher) Reserve(ctx context.Context, shop uint64, tok string, lines []Line, ttl time.Duration) ([][]Allocation, error) {
	const op = "reserve"
	ms, err := ttlMillis(op, ttl)
	if err != nil {
		return nil, err
	}
	cart, err := newCart(op, lines)
	if err != nil {
		return nil, err
	}
	err = b.callWith(ctx, op, &cart, func(out **C.rsv_batcher_call) C.int {
		t, n := token(tok)
		return C.go_rsv_batcher_reserve_start(b.ptr, C.uint64_t(shop), t, n, cart, ms, out)
	})
	if cart == nil { // (ctx ended: collect frees it)
		return nil, err
	}
	defer C.go_rsv_cart_free(cart)
	return cartAnswer(cart, len(lines), err)
}

// Claim is Conn.Claim through the batcher (never joining a transaction).
func (b *Batcher) Claim(ctx context.Context, shop uint64, tok string) error {
	return b.call(ctx, "claim", func(out **C.rsv_batcher_call) C.int {
		t, n := token(tok)
		return C.go_rsv_batcher_claim_start(b.ptr, C.uint64_t(shop), t, n, out)
	})
}

// Release is Conn.Release through the batcher.
func (b *Batcher) Release(ctx context.Context, shop uint64, tok string) error {
	return b.call(ctx, "release", func(out **C.rsv_batcher_call) C.int {
		t, n := token(tok)
		return C.go_rsv_batcher_release_start(b.ptr, C.uint64_t(shop), t, n, out)
	})
}

// Stat reads a counter summed over the batcher's connections; each batch
// entry counts as one call.
func (b *Batcher) Stat(s Stat, op Op) (uint64, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closing {
		return 0, ErrClosed
	}
	var v C.uint64_t
	if rc := C.go_rsv_batcher_stats_get(b.ptr, C.uint32_t(s), C.uint32_t(op), &v); rc != 0 {
		return 0, newError("stats", Code(rc), "")
	}
	return uint64(v), nil
}

// Prometheus writes the batcher's statistics as Prometheus text
// (exposition format 0.0.4), labels (may be "") first in every series,
// e.g. `instance="a"`.
func (b *Batcher) Prometheus(labels string) (string, error) {
	const op = "prometheus"
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closing {
		return "", ErrClosed
	}
	if err := noNUL(op, "labels", labels); err != nil {
		return "", err
	}
	var snap *C.rsv_stats_snapshot
	if rc := C.go_rsv_stats_snapshot_new(&snap); rc != 0 {
		return "", newError(op, Code(rc), "")
	}
	defer C.go_rsv_stats_snapshot_free(snap)
	C.go_rsv_batcher_stats_snapshot_add(snap, b.ptr)
	cl := C.CString(labels)
	defer C.free(unsafe.Pointer(cl))
	var need C.size_t
	if rc := C.go_rsv_stats_prometheus(snap, cl, nil, 0, &need); rc != 0 && Code(rc) != ErrRange {
		return "", argError(op, Code(rc), "labels %q: %s", labels, Code(rc).Error())
	}
	buf := (*C.char)(C.malloc(need))
	defer C.free(unsafe.Pointer(buf))
	if rc := C.go_rsv_stats_prometheus(snap, cl, buf, need, &need); rc != 0 {
		return "", newError(op, Code(rc), "")
	}
	return C.GoString(buf), nil
}

// Close lets every call in flight get its answer, then stops the batcher
// and closes its connections.  Calls made once Close has begun answer
// ErrClosed.  Closing twice is harmless.
func (b *Batcher) Close() error {
	b.mu.Lock()
	if b.closing {
		b.mu.Unlock()
		<-b.loopDone
		return nil
	}
	b.closing = true
	for len(b.waiting) > 0 {
		b.drained.Wait()
	}
	b.mu.Unlock()
	b.wake.close()
	<-b.loopDone
	C.go_rsv_batcher_close(b.ptr)
	return nil
}
