// conn.go owns Conn: one libreserve context on a connection of its own
// (rsv_open_dsn).  The calls of a checkout's life go through the
// library's non-blocking interface, so that a context.Context can cancel
// them (rsv_cancel); the others are plain blocking calls.

package reserve

/*
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"time"
	"unsafe"
)

// ErrClosed is returned by calls on a Conn, Batcher or Migration after
// Close.
var ErrClosed = errors.New("libreserve: use of a closed Conn, Batcher or Migration")

// Conn is one libreserve context and the MariaDB connection it owns.  It
// makes one call at a time: calls from several goroutines wait for each
// other (in the order the runtime picks).  For concurrency open several
// Conns, or share one Batcher.
//
// Reserve, ReserveOne, Claim, Release, Extend and Status stop when their
// context.Context ends: a call not yet begun answers ErrCanceled, one in
// flight is cut (rsv_cancel) and answers ErrCanceled or ErrConn (nothing
// applied) or ErrInDoubt (repeat it with the same token), each also
// matching the context's error with errors.Is.  The other calls look at
// the context only before they start; Options.CallTimeout bounds them.
//
// After ErrConn, ErrInDoubt or a cut call, the next call reconnects
// first (rsv_reconnect); no call is ever repeated on its own.
type Conn struct {
	sem  chan struct{} // holds a token while a call runs
	ptr  *C.rsv_ctx    // nil once closed
	wake *waiter       // the context's rsv_async_fd, made on first use
	cut  bool          // the connection may be gone: reconnect first
}

// Open opens a Conn on a connection of its own:
//
//	mariadb://[USER[:PASSWORD]@][HOST][:PORT]/DATABASE[?KEY=VALUE&...]
//
// with %XX escapes (see DSN), keys socket, connect_timeout, read_timeout,
// write_timeout, ssl, ssl_ca, ssl_capath, ssl_cert, ssl_key, ssl_verify.
// opts may be nil for the defaults.  The database must hold the schema
// (sql/schema.sql).  Connecting is not interrupted by ctx; the dsn's
// connect_timeout bounds it.
func Open(ctx context.Context, dsn string, opts *Options) (*Conn, error) {
	const op = "open"
	var p *C.rsv_ctx
	var rc C.int
	err := opening(ctx, op, dsn, opts, func(cdsn *C.char, o *C.rsv_options) { rc = C.go_rsv_open_dsn(&p, cdsn, o) })
	if err != nil {
		return nil, err
	}
	if rc != 0 {
		msg := ""
		if p != nil {
			msg = C.GoString(C.go_rsv_errmsg(p))
			C.go_rsv_close(p)
		}
		return nil, newError(op, Code(rc), msg)
	}
	c := &Conn{sem: make(chan struct{}, 1), ptr: p}
	runtime.SetFinalizer(c, (*Conn).Close)
	return c, nil
}

// opening makes the checks and C arguments Open and OpenBatcher share,
// and calls open with them.
func opening(ctx context.Context, op, dsn string, opts *Options, open func(*C.char, *C.rsv_options)) error {
	if err := load(); err != nil {
		return err
	}
	if ctx.Err() != nil {
		return ctxError(op, ctx)
	}
	if err := noNUL(op, "the dsn", dsn); err != nil {
		return err
	}
	var o C.rsv_options
	tag, err := opts.toC(op, &o)
	if err != nil {
		return err
	}
	defer C.free(unsafe.Pointer(tag))
	cdsn := C.CString(dsn)
	defer C.free(unsafe.Pointer(cdsn))
	open(cdsn, &o)
	return nil
}

// Close closes the context and its connection, after the call in
// progress, if any, has returned.  Closing twice is harmless.
func (c *Conn) Close() error {
	c.sem <- struct{}{}
	defer func() { <-c.sem }()
	if c.ptr == nil {
		return nil
	}
	runtime.SetFinalizer(c, nil)
	if c.wake != nil {
		c.wake.close()
		c.wake = nil
	}
	C.go_rsv_close(c.ptr)
	c.ptr = nil
	return nil
}

func (c *Conn) acquire(ctx context.Context, op string) error {
	select {
	case c.sem <- struct{}{}:
	default:
		select {
		case c.sem <- struct{}{}:
		case <-ctx.Done():
			return ctxError(op, ctx)
		}
	}
	if c.ptr == nil {
		<-c.sem
		return ErrClosed
	}
	if ctx.Err() != nil {
		<-c.sem
		return ctxError(op, ctx)
	}
	if c.cut {
		if rc := C.go_rsv_reconnect(c.ptr); rc != 0 {
			err := newError("reconnect", Code(rc), C.GoString(C.go_rsv_errmsg(c.ptr)))
			<-c.sem
			return err
		}
		c.cut = false
	}
	return nil
}

func (c *Conn) release() { <-c.sem }

// result turns a final code into the call's error.  Codes after which
// the connection may be gone mark it for a reconnect.
func (c *Conn) result(op string, ctx context.Context, rc C.int, canceled bool) error {
	code := Code(rc)
	if canceled || code == ErrConn || code == ErrInDoubt || code == ErrCanceled {
		c.cut = true
	}
	if code == OK {
		return nil
	}
	e := newError(op, code, C.GoString(C.go_rsv_errmsg(c.ptr)))
	if canceled && ctx.Err() != nil {
		e.cause = ctx.Err()
	}
	return e
}

// blocking runs fn, a blocking library call, as one call of the Conn.
func (c *Conn) blocking(ctx context.Context, op string, fn func(p *C.rsv_ctx) C.int) error {
	if err := c.acquire(ctx, op); err != nil {
		return err
	}
	defer c.release()
	return c.result(op, ctx, fn(c.ptr), false)
}

// nonblocking runs start, an rsv_*_start call, and waits for its final
// code on the context's descriptor, canceling it when ctx ends.
func (c *Conn) nonblocking(ctx context.Context, op string, start func(p *C.rsv_ctx) C.int) error {
	if err := c.acquire(ctx, op); err != nil {
		return err
	}
	defer c.release()
	if c.wake == nil {
		fd := C.go_rsv_async_fd(c.ptr)
		if fd < 0 {
			return newError(op, Code(fd), C.GoString(C.go_rsv_errmsg(c.ptr)))
		}
		w, err := newWaiter(int(fd))
		if err != nil {
			return newError(op, ErrNoMemory, err.Error())
		}
		c.wake = w
	}
	rc := start(c.ptr)
	canceled := false
	if rc == codePending {
		rc, canceled = c.await(ctx)
	}
	return c.result(op, ctx, rc, canceled)
}

// await waits for the pending call's final code.  When ctx ends first it
// asks the library to stop the call (rsv_cancel) and goes on waiting for
// the code that call ends with, which is what the caller is told.
func (c *Conn) await(ctx context.Context) (C.int, bool) {
	w := c.wake
	var stop, exited chan struct{}
	watch := func() {
		// A goroutine turns the end of ctx into a wake-up of the wait.
		stop, exited = make(chan struct{}), make(chan struct{})
		go func() {
			defer close(exited)
			select {
			case <-ctx.Done():
				w.interrupt()
			case <-stop:
			}
		}()
	}
	unwatch := func() {
		if stop != nil {
			close(stop)
			<-exited
			stop = nil
			w.reset()
		}
	}
	if ctx.Done() != nil {
		watch()
	}
	canceled := false
	for {
		rc := C.go_rsv_cont(c.ptr)
		if rc != codePending {
			unwatch()
			return rc, canceled
		}
		if !canceled && ctx.Err() != nil {
			C.go_rsv_cancel(c.ptr)
			canceled = true
			unwatch()
			continue
		}
		w.wait()
	}
}

var emptyToken byte

// token passes a token's bytes to the library for the duration of one
// call (the library copies what it keeps).
// An empty token is passed as a valid pointer and length 0, so the
// library answers ErrToken (a NULL pointer would be ErrInvalid).
func token(t string) (unsafe.Pointer, C.size_t) {
	if len(t) == 0 {
		return unsafe.Pointer(&emptyToken), 0
	}
	b := []byte(t)
	return unsafe.Pointer(&b[0]), C.size_t(len(b))
}

// ReserveOne holds quantity units of item at location for the checkout
// token of shop, for ttl (0: Options.HoldTTL).  Repeating it for the same
// token holds the checkout once.
func (c *Conn) ReserveOne(ctx context.Context, shop uint64, tok string, item, location uint64, quantity int64, ttl time.Duration) error {
	const op = "reserve"
	ms, err := ttlMillis(op, ttl)
	if err != nil {
		return err
	}
	return oneLine(c.nonblocking(ctx, op, func(p *C.rsv_ctx) C.int {
		t, n := token(tok)
		return C.go_rsv_reserve_one_start(p, C.uint64_t(shop), t, n, C.uint64_t(item), C.uint64_t(location), C.int64_t(quantity), ms)
	}))
}

// Line is one line of a cart.
type Line struct {
	Item      uint64
	Locations []uint64 // the locations that may serve it, preferred first
	Quantity  int64
	Split     bool // may be served by several of its locations, in order
}

// Allocation says where units of a line are held.
type Allocation struct {
	Location uint64
	Quantity int64
}

// Reserve holds every line for the checkout token of shop, all or
// nothing, for ttl (0: Options.HoldTTL), and says where each line is
// held.  A checkout that already holds units is re-reserved: its old
// holds are released in the same transaction.  On ErrOutOfStock and
// ErrNoItem the *Error's Line names the line.
func (c *Conn) Reserve(ctx context.Context, shop uint64, tok string, lines []Line, ttl time.Duration) ([][]Allocation, error) {
	const op = "reserve"
	ms, err := ttlMillis(op, ttl)
	if err != nil {
		return nil, err
	}
	cart, err := newCart(op, lines)
	if err != nil {
		return nil, err
	}
	defer C.go_rsv_cart_free(cart)
	err = c.nonblocking(ctx, op, func(p *C.rsv_ctx) C.int {
		t, n := token(tok)
		return C.go_rsv_reserve_start(p, C.uint64_t(shop), t, n, cart, ms)
	})
	return cartAnswer(cart, len(lines), err)
}

// newCart builds the library's cart of lines; the caller frees it.
func newCart(op string, lines []Line) (*C.rsv_cart, error) {
	if err := load(); err != nil {
		return nil, err
	}
	var cart *C.rsv_cart
	if rc := C.go_rsv_cart_new(&cart); rc != 0 {
		return nil, newError(op, Code(rc), "")
	}
	for i, l := range lines {
		if err := cartAdd(op, cart, i, l); err != nil {
			C.go_rsv_cart_free(cart)
			return nil, err
		}
	}
	return cart, nil
}

func cartAdd(op string, cart *C.rsv_cart, i int, l Line) error {
	if len(l.Locations) == 0 {
		return argError(op, ErrInvalid, "line %d has no location", i)
	}
	for j, loc := range l.Locations[:len(l.Locations)-1] {
		for _, later := range l.Locations[j+1:] {
			if later == loc {
				return argError(op, ErrInvalid, "line %d lists location %d twice", i, loc)
			}
		}
	}
	var flags C.uint32_t
	if l.Split {
		flags = C.RSV_LINE_SPLIT
	}
	locs := append([]uint64(nil), l.Locations...)
	rc := C.go_rsv_cart_add(cart, C.uint64_t(l.Item), (*C.uint64_t)(unsafe.Pointer(&locs[0])), C.size_t(len(locs)), C.int64_t(l.Quantity), flags)
	if rc != 0 {
		return argError(op, Code(rc), "line %d (item %d, quantity %d): %s", i, l.Item, l.Quantity, Code(rc).Error())
	}
	return nil
}

// cartAnswer is what a reserve of cart (n lines) answers: where each line
// is held, or err with the line that could not be served.
func cartAnswer(cart *C.rsv_cart, n int, err error) ([][]Allocation, error) {
	if err != nil {
		var e *Error
		if errors.As(err, &e) && (e.Code == ErrOutOfStock || e.Code == ErrNoItem) {
			if l := C.go_rsv_cart_failed_line(cart); l != ^C.size_t(0) {
				e.Line = int(l)
			}
		}
		return nil, err
	}
	out := make([][]Allocation, n)
	for i := range out {
		var k C.size_t
		C.go_rsv_cart_allocation_count(cart, C.size_t(i), &k)
		for j := C.size_t(0); j < k; j++ {
			var loc C.uint64_t
			var q C.int64_t
			C.go_rsv_cart_allocation(cart, C.size_t(i), j, &loc, &q)
			out[i] = append(out[i], Allocation{Location: uint64(loc), Quantity: int64(q)})
		}
	}
	return out, nil
}

// Claim takes the checkout's held units off the stock for good: payment
// succeeded.  A repeated claim answers ErrClaimed and takes nothing.
func (c *Conn) Claim(ctx context.Context, shop uint64, tok string) error {
	return c.nonblocking(ctx, "claim", func(p *C.rsv_ctx) C.int {
		t, n := token(tok)
		return C.go_rsv_claim_start(p, C.uint64_t(shop), t, n)
	})
}

// Release gives the checkout's units back: payment failed or the buyer
// left.  Releasing a released or expired checkout is not an error.
func (c *Conn) Release(ctx context.Context, shop uint64, tok string) error {
	return c.nonblocking(ctx, "release", func(p *C.rsv_ctx) C.int {
		t, n := token(tok)
		return C.go_rsv_release_start(p, C.uint64_t(shop), t, n)
	})
}

// Extend pushes the checkout's deadline to now + ttl (0:
// Options.HoldTTL).
func (c *Conn) Extend(ctx context.Context, shop uint64, tok string, ttl time.Duration) error {
	const op = "extend"
	ms, err := ttlMillis(op, ttl)
	if err != nil {
		return err
	}
	return c.nonblocking(ctx, op, func(p *C.rsv_ctx) C.int {
		t, n := token(tok)
		return C.go_rsv_extend_start(p, C.uint64_t(shop), t, n, ms)
	})
}

// Status is the state of a checkout.
type Status int

// The states of a checkout.
const (
	Held     Status = 1
	Claimed  Status = 2
	Released Status = 3
	Expired  Status = 4
)

func (s Status) String() string {
	switch s {
	case Held:
		return "held"
	case Claimed:
		return "claimed"
	case Released:
		return "released"
	case Expired:
		return "expired"
	}
	return fmt.Sprintf("Status(%d)", int(s))
}

// CheckoutStatus is what Status reads.
type CheckoutStatus struct {
	Status    Status
	Units     int64         // units held now
	ExpiresIn time.Duration // to the deadline; negative once passed
}

// Status reads a checkout's state without locking.
func (c *Conn) Status(ctx context.Context, shop uint64, tok string) (CheckoutStatus, error) {
	st := (*C.rsvgo_status)(C.calloc(1, C.sizeof_rsvgo_status))
	defer C.free(unsafe.Pointer(st))
	err := c.nonblocking(ctx, "status", func(p *C.rsv_ctx) C.int {
		t, n := token(tok)
		return C.go_rsv_checkout_status_start(p, C.uint64_t(shop), t, n, &st.status, &st.units, &st.expires_in_ms)
	})
	if err != nil {
		return CheckoutStatus{}, err
	}
	return CheckoutStatus{Status(st.status), int64(st.units), time.Duration(st.expires_in_ms) * time.Millisecond}, nil
}

// StockSet sets the stock on hand of item at location, creating its
// ledger row if needed.  ErrStock: below what active checkouts hold.
func (c *Conn) StockSet(ctx context.Context, shop, item, location uint64, onHand int64) error {
	return c.blocking(ctx, "stock set", func(p *C.rsv_ctx) C.int {
		return C.go_rsv_stock_set(p, C.uint64_t(shop), C.uint64_t(item), C.uint64_t(location), C.int64_t(onHand))
	})
}

// StockAdjust adds delta (may be negative) to the stock on hand and
// returns the new figure.  Unlike the other calls it is not idempotent:
// after ErrInDoubt read the Stock before repeating it.
func (c *Conn) StockAdjust(ctx context.Context, shop, item, location uint64, delta int64) (int64, error) {
	var out C.int64_t
	err := c.blocking(ctx, "stock adjust", func(p *C.rsv_ctx) C.int {
		return C.go_rsv_stock_adjust(p, C.uint64_t(shop), C.uint64_t(item), C.uint64_t(location), C.int64_t(delta), &out)
	})
	return int64(out), err
}

// Stock is the stock of one item at one location, from one snapshot.
type Stock struct {
	OnHand    int64 // after every committed claim
	Held      int64 // by active checkouts
	Pooled    int64 // rows in the pool
	Available int64 // what a new checkout could still reserve
}

// Stock reads the stock of item at location.
func (c *Conn) Stock(ctx context.Context, shop, item, location uint64) (Stock, error) {
	var s [4]C.int64_t
	err := c.blocking(ctx, "stock", func(p *C.rsv_ctx) C.int {
		return C.go_rsv_stock_get(p, C.uint64_t(shop), C.uint64_t(item), C.uint64_t(location), &s[0], &s[1], &s[2], &s[3])
	})
	return Stock{int64(s[0]), int64(s[1]), int64(s[2]), int64(s[3])}, err
}

// Replenish tops the pool of item at location up from the ledger and
// returns the rows added.
func (c *Conn) Replenish(ctx context.Context, shop, item, location uint64) (int64, error) {
	var out C.int64_t
	err := c.blocking(ctx, "replenish", func(p *C.rsv_ctx) C.int {
		return C.go_rsv_replenish(p, C.uint64_t(shop), C.uint64_t(item), C.uint64_t(location), &out)
	})
	return int64(out), err
}

// PoolDrain gives the pool of item at location back to its ledger row
// and returns the rows given back.
func (c *Conn) PoolDrain(ctx context.Context, shop, item, location uint64) (int64, error) {
	var out C.int64_t
	err := c.blocking(ctx, "pool drain", func(p *C.rsv_ctx) C.int {
		return C.go_rsv_pool_drain(p, C.uint64_t(shop), C.uint64_t(item), C.uint64_t(location), &out)
	})
	return int64(out), err
}

// Sweep gives back the units of up to maxHolds expired holds of shop (0:
// 10000), drains idle pools and purges old settled checkouts; it returns
// the holds given back.
func (c *Conn) Sweep(ctx context.Context, shop uint64, maxHolds int64) (int64, error) {
	var out C.int64_t
	err := c.blocking(ctx, "sweep", func(p *C.rsv_ctx) C.int {
		return C.go_rsv_sweep(p, C.uint64_t(shop), C.int64_t(maxHolds), &out)
	})
	return int64(out), err
}

// SetEnabled switches the context off (every call that writes answers
// ErrDisabled and sends nothing) or on again.
func (c *Conn) SetEnabled(ctx context.Context, enabled bool) error {
	on := C.int(0)
	if enabled {
		on = 1
	}
	return c.blocking(ctx, "enable", func(p *C.rsv_ctx) C.int { return C.go_rsv_set_enabled(p, on) })
}

// Reconnect opens the connection again.  Calls do it by themselves after
// ErrConn, ErrInDoubt or a cut call; this is for a caller that wants to
// know the connection works before the next one.
func (c *Conn) Reconnect(ctx context.Context) error {
	// (acquire itself reconnects a connection marked as cut; once more
	// then costs a connect and proves nothing less)
	return c.blocking(ctx, "reconnect", func(p *C.rsv_ctx) C.int { return C.go_rsv_reconnect(p) })
}
