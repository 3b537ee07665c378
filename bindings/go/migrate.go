// migrate.go owns Migration, the migration handle of <reserve/migrate.h>
// (docs/migration.md): the checkout's reserves, claims and releases sent
// to the old store, to libreserve or to both by the shop's stage, and the
// Go side of the old store's operation, which the library calls on the
// caller's thread and on the handle's own thread.

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
	"runtime/cgo"
	"strconv"
	"sync"
	"time"
	"unsafe"
)

// Stage is a shop's stage (rsv_migration_stage.stage), set with
// `rsv-admin migrate`.
type Stage int32

// The stages, in the order a shop goes through them.
const (
	StageOld      Stage = 0 // the old store only (a shop without a row)
	StageShadow   Stage = 1 // the old store answers; libreserve is compared off the request path
	StagePrimary  Stage = 2 // libreserve answers; the old store is kept current off the request path
	StageComplete Stage = 3 // libreserve only
)

func (s Stage) String() string {
	switch s {
	case StageOld:
		return "old"
	case StageShadow:
		return "shadow"
	case StagePrimary:
		return "primary"
	case StageComplete:
		return "complete"
	}
	return "Stage(" + strconv.Itoa(int(s)) + ")"
}

// MigrationStat is a counter of a Migration (enum rsv_migrate_stat_kind):
// how the two stores' answers compared, and the books of the queue of
// work for the handle's thread.
type MigrationStat uint32

// The counters.  Accepted means nil; refused means an expected outcome
// (ErrOutOfStock, ErrClaimed, ErrExpired, ErrReleased; for the old store
// also ErrNotFound).
const (
	MigBothAccepted          MigrationStat = 0
	MigBothRefused           MigrationStat = 1
	MigOldRefusedNewAccepted MigrationStat = 2  // would oversell once primary
	MigOldAcceptedNewRefused MigrationStat = 3  // would undersell
	MigNewFailed             MigrationStat = 4  // libreserve failed (ErrBusy, ErrConn, ErrNoItem: not imported ...)
	MigUnknown               MigrationStat = 5  // a claim or release of a hold libreserve never saw
	MigOldFailed             MigrationStat = 6  // the old store failed: not compared
	MigOffered               MigrationStat = 7  // work offered to the queue ...
	MigApplied               MigrationStat = 8  // ... done by the handle's thread ...
	MigDropped               MigrationStat = 9  // ... or dropped, the queue full
	MigStageReadFailed       MigrationStat = 10 // reads of the stage table that failed (all shops only)
)

// Legacy is the old store's operation.  op is OpReserve (item, location,
// quantity and ttl given: ttl 0 means the caller's default), OpClaim or
// OpRelease (those four zero: the old store finds the checkout by its
// token).  Do returns nil when the old store accepted; one of the
// package's codes when it refused (ErrOutOfStock, ErrNotFound,
// ErrClaimed, ErrExpired, ErrReleased, also wrapped: errors.As finds the
// Code); any other error when it failed, which the handle counts
// (MigOldFailed) and the caller gets as ErrDB.
//
// Do is called on the goroutine of a Migration's call (stages old and
// shadow) and on the handle's own thread (primary: keeping the old store
// current), so it must be safe for concurrent use.  It must not call the
// Migration's methods: the handle's thread may be finishing its work
// inside Close.  A panic in Do is recovered and counted as a failure.
type Legacy interface {
	Do(op Op, shop uint64, token string, item, location uint64, quantity int64, ttl time.Duration) error
}

// LegacyFunc makes a function a Legacy.
type LegacyFunc func(op Op, shop uint64, token string, item, location uint64, quantity int64, ttl time.Duration) error

// Do calls f.
func (f LegacyFunc) Do(op Op, shop uint64, token string, item, location uint64, quantity int64, ttl time.Duration) error {
	return f(op, shop, token, item, location, quantity, ttl)
}

// legacyErrorsKept bounds LegacyErrors: an old store that keeps failing
// must not grow the process.
const legacyErrorsKept = 64

// legacyState is what the library's calls of the old store reach, through
// one cgo.Handle that lives as long as the handle: the library may still
// be inside a call of the Legacy it had when SetLegacy replaced it, so
// the handle cannot change with the Legacy.
type legacyState struct {
	mu     sync.Mutex
	legacy Legacy
	failed []error // the latest failures, oldest first
}

func (s *legacyState) current() Legacy {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.legacy
}

func (s *legacyState) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.failed) == legacyErrorsKept {
		s.failed = append(s.failed[:0], s.failed[1:]...)
	}
	s.failed = append(s.failed, err)
}

// oldAnswer is what the old store said during one call of the
// application's, when it was asked on the caller's thread.
type oldAnswer struct {
	asked bool
	err   error
}

// legacyCode is the library's code for what Legacy.Do returned.
func legacyCode(err error) Code {
	if err == nil {
		return OK
	}
	var code Code
	if errors.As(err, &code) && code < 0 {
		return code
	}
	return ErrDB
}

// callLegacy runs the old store's Do; a panic becomes its error.
func callLegacy(l Legacy, op Op, shop uint64, tok string, item, loc uint64, qty int64, ttl time.Duration) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("libreserve: the old store's Do panicked: %v", r)
		}
	}()
	return l.Do(op, shop, tok, item, loc, qty, ttl)
}

//export rsvgoLegacy
func rsvgoLegacy(h, call C.uintptr_t, op C.uint32_t, shop C.uint64_t, tok unsafe.Pointer, n C.size_t, item, loc C.uint64_t, qty, ttl C.int64_t) C.int {
	s := cgo.Handle(h).Value().(*legacyState)
	l := s.current()
	if l == nil { // removed while the handle's thread was about to call it
		return C.int(ErrInvalid)
	}
	err := callLegacy(l, Op(op), uint64(shop), C.GoStringN((*C.char)(tok), C.int(n)), uint64(item), uint64(loc), int64(qty), time.Duration(ttl)*time.Millisecond)
	code := legacyCode(err)
	if code == ErrDB && err != nil {
		s.fail(err)
	}
	if call != 0 {
		a := cgo.Handle(call).Value().(*oldAnswer)
		a.asked, a.err = true, err
	}
	return C.int(code)
}

// Migration is a migration handle (rsv_migrate_open): the checkout's
// ReserveOne, Claim and Release sent to the store the shop's stage names,
// and the other store's side done off the request path by the handle's
// own thread and connection.  Its calls use the Conn it was opened on and
// wait for the Conn's other calls like them.  Stage, Stat, Prometheus and
// Drain may be called from any goroutine at any time (a monitoring one).
// Close it before the Conn.
type Migration struct {
	mu    sync.RWMutex // Close holds it alone; every other call shares it
	ptr   *C.rsv_migration
	conn  *Conn
	state *legacyState
	h     cgo.Handle // of state, given to the library as the old store's user pointer
}

// OpenMigration opens a migration handle for conn, the Conn that answers
// when a shop is primary or complete.  shadowDSN (Open's format) is the
// connection of the handle's own thread: libreserve's side of shadow
// calls, the stage reads, the counters.  queueMax bounds the work waiting
// for that thread (0: 4096).  The stages are read once before it
// returns; ErrSchema says the migration tables are missing (load
// sql/schema.sql).  Register the old store with SetLegacy: until then a
// shop at stages old and shadow answers ErrInvalid.
func OpenMigration(ctx context.Context, conn *Conn, shadowDSN string, queueMax uint32) (*Migration, error) {
	const op = "migrate open"
	if err := load(); err != nil {
		return nil, err
	}
	if missing := C.rsvgo_migrate_missing(); missing != nil {
		return nil, newError(op, ErrInvalid, fmt.Sprintf("the loaded libreserve (%s) has no %s: it predates the migration handle", loadPath, C.GoString(missing)))
	}
	if err := noNUL(op, "the dsn", shadowDSN); err != nil {
		return nil, err
	}
	if err := conn.acquire(ctx, op); err != nil {
		return nil, err
	}
	defer conn.release()
	cdsn := C.CString(shadowDSN)
	defer C.free(unsafe.Pointer(cdsn))
	var p *C.rsv_migration
	if rc := C.go_rsv_migrate_open(&p, conn.ptr, cdsn, C.uint32_t(queueMax)); rc != 0 {
		return nil, newError(op, Code(rc), C.GoString(C.go_rsv_errmsg(conn.ptr)))
	}
	m := &Migration{ptr: p, conn: conn, state: &legacyState{}}
	m.h = cgo.NewHandle(m.state)
	runtime.SetFinalizer(m, (*Migration).Close)
	return m, nil
}

// Close does the work still queued (for at most the Conn's call timeout
// per call), stops the handle's thread and frees the handle.  Closing
// twice is harmless.
func (m *Migration) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ptr == nil {
		return nil
	}
	runtime.SetFinalizer(m, nil)
	C.go_rsv_migrate_close(m.ptr) // joins the thread: no call of the old store after it
	m.ptr = nil
	m.h.Delete()
	return nil
}

// use runs fn on the open handle, sharing it with the other calls.
func (m *Migration) use(fn func(p *C.rsv_migration) error) error {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.ptr == nil {
		return ErrClosed
	}
	return fn(m.ptr)
}

// migrateErr turns the code of a call that only reads or sets the handle
// into its error.
func migrateErr(op string, rc C.int) error {
	if rc != 0 {
		return newError(op, Code(rc), "")
	}
	return nil
}

// millis32 is d in whole milliseconds, within a uint32.
func millis32(d time.Duration) C.uint32_t {
	ms := d.Milliseconds()
	if ms < 0 {
		return 0
	}
	if ms > 1<<32-1 {
		return 1<<32 - 1
	}
	return C.uint32_t(ms)
}

// SetLegacy registers the old store's operation; nil removes it (shops at
// stages old and shadow then answer ErrInvalid).
func (m *Migration) SetLegacy(l Legacy) error {
	return m.use(func(p *C.rsv_migration) error {
		m.state.mu.Lock()
		m.state.legacy = l
		m.state.mu.Unlock()
		on := C.int(0)
		if l != nil {
			on = 1
		}
		return migrateErr("migrate set legacy", C.rsvgo_migrate_set_legacy(p, C.uintptr_t(m.h), on))
	})
}

// SetRefresh sets how often the handle's thread reads the stages
// (50 ms .. 60 s; 1 s by default): a call made one interval after a
// change was committed follows it.
func (m *Migration) SetRefresh(every time.Duration) error {
	const op = "migrate set refresh"
	ms := millis32(every)
	return m.use(func(p *C.rsv_migration) error {
		if rc := C.go_rsv_migrate_set_refresh_ms(p, ms); rc != 0 {
			return newError(op, Code(rc), "the refresh interval "+every.String()+" is out of range")
		}
		return nil
	})
}

// call sends one of the checkout's calls through the handle, on the
// Conn's context.  Its error carries the message of the store that
// decided: the old store's error (also errors.Is-comparable) or the
// library's message.
func (m *Migration) call(ctx context.Context, op string, kind Op, shop uint64, tok string, item, loc uint64, qty int64, ms C.int64_t) error {
	return m.use(func(p *C.rsv_migration) error {
		c := m.conn
		if err := c.acquire(ctx, op); err != nil {
			return err
		}
		defer c.release()
		var said oldAnswer
		h := cgo.NewHandle(&said)
		defer h.Delete()
		t, n := token(tok)
		rc := C.rsvgo_migrate_call(p, C.uint32_t(kind), C.uint64_t(shop), t, n, C.uint64_t(item), C.uint64_t(loc), C.int64_t(qty), ms, C.uintptr_t(h))
		switch {
		case said.asked:
			return said.answer(op, Code(rc))
		case Code(rc) == ErrToken || Code(rc) == ErrInvalid:
			// refused before any store was asked: the context's message
			// is an earlier call's
			return newError(op, Code(rc), migrateRefusal(Code(rc)))
		}
		return c.result(op, ctx, rc, false)
	})
}

func migrateRefusal(code Code) string {
	if code == ErrInvalid {
		return "no old store registered (SetLegacy) for a shop at stage old or shadow"
	}
	return "checkout token must be 1.." + strconv.Itoa(TokenMax) + " bytes"
}

// answer is the error of a call the old store decided.
func (a *oldAnswer) answer(op string, code Code) error {
	if code == OK {
		return nil
	}
	msg := ""
	if a.err != nil {
		msg = "the old store: " + a.err.Error()
	}
	e := newError(op, code, msg)
	e.cause = a.err
	return e
}

// ReserveOne holds quantity units of item at location for the checkout
// token of shop, for ttl (0: the default), in the store the shop's stage
// names, and returns what that store answered.
func (m *Migration) ReserveOne(ctx context.Context, shop uint64, tok string, item, location uint64, quantity int64, ttl time.Duration) error {
	const op = "migrate reserve"
	ms, err := ttlMillis(op, ttl)
	if err != nil {
		return err
	}
	return oneLine(m.call(ctx, op, OpReserve, shop, tok, item, location, quantity, ms))
}

// Claim claims the checkout in the store the shop's stage names.
func (m *Migration) Claim(ctx context.Context, shop uint64, tok string) error {
	return m.call(ctx, "migrate claim", OpClaim, shop, tok, 0, 0, 0, 0)
}

// Release releases the checkout in the store the shop's stage names.
func (m *Migration) Release(ctx context.Context, shop uint64, tok string) error {
	return m.call(ctx, "migrate release", OpRelease, shop, tok, 0, 0, 0, 0)
}

// Stage is the shop's stage as the handle follows it now.
func (m *Migration) Stage(shop uint64) (Stage, error) {
	var st C.int32_t
	err := m.use(func(p *C.rsv_migration) error {
		return migrateErr("migrate stage", C.go_rsv_migrate_stage(p, C.uint64_t(shop), &st))
	})
	return Stage(st), err
}

// Stat reads a counter of one shop, or of every shop when allShops is
// true (shop is then ignored).
func (m *Migration) Stat(shop uint64, allShops bool, kind MigrationStat) (uint64, error) {
	var v C.uint64_t
	all := C.int32_t(0)
	if allShops {
		all = 1
	}
	err := m.use(func(p *C.rsv_migration) error {
		return migrateErr("migrate stat", C.go_rsv_migrate_stat(p, C.uint64_t(shop), all, C.uint32_t(kind), &v))
	})
	return uint64(v), err
}

// Drain waits until the queue is empty and its last call done, at most
// timeout; an *Error with ErrBusy when work is still waiting.
func (m *Migration) Drain(timeout time.Duration) error {
	ms := millis32(timeout)
	return m.use(func(p *C.rsv_migration) error {
		rc := C.go_rsv_migrate_drain(p, ms)
		if rc != 0 {
			return newError("migrate drain", Code(rc), "work is still queued for the handle's thread after "+timeout.String())
		}
		return nil
	})
}

// Prometheus is the handle's counters and each shop's stage in the
// Prometheus text format (libreserve_migration_calls_total{shop,class},
// libreserve_migration_stage{shop}, libreserve_migration_queue_depth).
func (m *Migration) Prometheus() (string, error) {
	var out string
	err := m.use(func(p *C.rsv_migration) error {
		var need C.size_t
		C.go_rsv_migrate_prometheus(p, nil, 0, &need)
		for {
			buf := (*C.char)(C.malloc(need + 1))
			rc := C.go_rsv_migrate_prometheus(p, buf, need+1, &need)
			if rc == 0 {
				out = C.GoString(buf)
			}
			C.free(unsafe.Pointer(buf))
			if Code(rc) != ErrRange { // grown since: ask again with the new size
				return migrateErr("migrate prometheus", rc)
			}
		}
	})
	return out, err
}

// LegacyErrors is what the old store's Do failed with (errors that are
// none of the package's codes, and panics), the latest 64, oldest first:
// on the handle's thread nobody else sees them.
func (m *Migration) LegacyErrors() []error {
	m.state.mu.Lock()
	defer m.state.mu.Unlock()
	return append([]error(nil), m.state.failed...)
}
