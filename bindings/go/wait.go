// wait.go owns waiting for a libreserve descriptor (a context's
// rsv_async_fd, a batcher's rsv_batcher_fd) on the Go runtime's network
// poller, so that a goroutine waiting for the database holds no OS thread.

package reserve

/*
#include "shim.h"
*/
import "C"

import (
	"errors"
	"os"
	"sync/atomic"
	"syscall"
	"time"
)

// waiter watches one descriptor of the library for readability.  It owns
// a duplicate of it: the library's descriptor is never read, written or
// closed here, as reserve.h asks.
type waiter struct {
	fd  int             // the library's descriptor
	f   *os.File        // the duplicate, on the poller
	raw syscall.RawConn // nil when the poller cannot take it
	off atomic.Bool     // closed
}

func newWaiter(fd int) (*waiter, error) {
	dup, _, errno := syscall.Syscall(syscall.SYS_FCNTL, uintptr(fd), syscall.F_DUPFD_CLOEXEC, 0)
	if errno != 0 {
		return nil, os.NewSyscallError("fcntl", errno)
	}
	// The library made its pipe non-blocking, so os.NewFile puts the
	// duplicate (which shares that mode) on the poller.
	w := &waiter{fd: fd, f: os.NewFile(dup, "libreserve")}
	if raw, err := w.f.SyscallConn(); err == nil {
		w.raw = raw
	}
	return w, nil
}

// wait returns once the descriptor is readable, or interrupt was called,
// or (rarely) for no reason: callers ask the library again either way.
// It returns false when the waiter was closed.
func (w *waiter) wait() bool {
	if w.raw != nil {
		// The readiness test runs after the poller was armed for this
		// wait, so a completion that came before it is not missed.
		err := w.raw.Read(func(fd uintptr) bool { return C.rsvgo_wait(C.int(fd), 0) != 0 })
		if err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
			return true
		}
		if errors.Is(err, os.ErrClosed) {
			return false
		}
		w.raw = nil // not pollable after all: wait by polling below
	}
	if w.off.Load() {
		return false
	}
	C.rsvgo_wait(C.int(w.fd), 100)
	return true
}

var longAgo = time.Unix(1, 0)

// interrupt makes a wait in progress (or the next one) return at once.
func (w *waiter) interrupt() { _ = w.f.SetReadDeadline(longAgo) }

// reset undoes interrupt.
func (w *waiter) reset() { _ = w.f.SetReadDeadline(time.Time{}) }

func (w *waiter) close() {
	w.off.Store(true)
	_ = w.f.Close()
}
