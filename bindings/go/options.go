// options.go owns Options, the Go form of struct rsv_options.

package reserve

/*
#include <string.h>
#include "shim.h"
*/
import "C"

import "time"

// Options tune a Conn or a Batcher.  The zero value of every field means
// the library's default; where the library's own zero means "none" or
// "never", a negative value asks for that.  See struct rsv_options in
// reserve.h for each field's range.
type Options struct {
	// PoolCap: units kept as rows per item and location (default 1000).
	PoolCap int64
	// RefillLowWater: refill a pool ahead of demand once fewer rows are
	// left (default three quarters of PoolCap).
	RefillLowWater int64
	// NoProactiveRefill: refill a pool only when a reserve finds it short.
	NoProactiveRefill bool
	// HoldTTL: how long a hold lasts when a call gives no ttl (default
	// 10 minutes; whole milliseconds).
	HoldTTL time.Duration
	// MaxRetries after a deadlock or lock wait timeout (default 8;
	// negative: none).
	MaxRetries int
	// RetryBase: the first backoff, doubled per retry (default 2 ms).
	RetryBase time.Duration
	// LockWait: the lock wait timeout of the library's statements, whole
	// seconds (default: the session's, or a quarter of CallTimeout).
	LockWait time.Duration
	// ConnTagPrefix: the prefix of the statements' comments (default
	// "conn_tag:").
	ConnTagPrefix string
	// SettledRetention: how long claimed and released checkouts are kept
	// for idempotent repeats (default 7 days; negative: none).
	SettledRetention time.Duration
	// PoolIdle: Sweep gives an idle pool back to its ledger row after
	// this long (default 1 hour; negative: never).
	PoolIdle time.Duration
	// CallTimeout: the time budget of one call, after which it answers
	// ErrBusy having applied nothing (default 5 s; negative: none).  It
	// also bounds the calls a context cannot interrupt.
	CallTimeout time.Duration
	// StmtCacheMax: prepared statements kept per connection (default 48).
	StmtCacheMax int
}

// toC fills o with the library's defaults, then the fields set in opts.
// The caller frees the returned tag string (may be nil).
func (opts *Options) toC(op string, o *C.rsv_options) (*C.char, error) {
	if rc := C.go_rsv_options_init(o, C.RSV_OPTIONS_VERSION); rc != 0 {
		return nil, newError(op, Code(rc), "the loaded libreserve does not know these options (older than this package?)")
	}
	if opts == nil {
		return nil, nil
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"HoldTTL", opts.HoldTTL}, {"RetryBase", opts.RetryBase}, {"LockWait", opts.LockWait}} {
		if d.v < 0 {
			return nil, argError(op, ErrInvalid, "Options.%s is negative (%v)", d.name, d.v)
		}
	}
	if opts.PoolCap != 0 {
		o.pool_cap = C.int64_t(opts.PoolCap)
	}
	if opts.RefillLowWater != 0 {
		o.refill_low_water = C.int64_t(opts.RefillLowWater)
	}
	if opts.NoProactiveRefill {
		o.flags |= C.RSV_OPT_NO_PROACTIVE_REFILL
	}
	if opts.HoldTTL != 0 {
		o.hold_ttl_ms = C.int64_t(ceilDiv(opts.HoldTTL, time.Millisecond))
	}
	if opts.MaxRetries > 0 {
		o.max_retries = C.int32_t(opts.MaxRetries)
	} else if opts.MaxRetries < 0 {
		o.max_retries = 0
	}
	if opts.RetryBase != 0 {
		o.retry_base_us = C.int32_t(ceilDiv(opts.RetryBase, time.Microsecond))
	}
	if opts.LockWait != 0 {
		o.lock_wait_timeout_s = C.int32_t(ceilDiv(opts.LockWait, time.Second))
	}
	if opts.SettledRetention > 0 {
		o.settled_retention_s = C.int64_t(ceilDiv(opts.SettledRetention, time.Second))
	} else if opts.SettledRetention < 0 {
		o.settled_retention_s = 0
	}
	if opts.PoolIdle > 0 {
		o.pool_idle_s = C.int64_t(ceilDiv(opts.PoolIdle, time.Second))
	} else if opts.PoolIdle < 0 {
		o.pool_idle_s = 0
	}
	if opts.CallTimeout > 0 {
		o.call_timeout_ms = C.int64_t(ceilDiv(opts.CallTimeout, time.Millisecond))
	} else if opts.CallTimeout < 0 {
		o.call_timeout_ms = 0
	}
	if opts.StmtCacheMax != 0 {
		o.stmt_cache_max = C.int32_t(opts.StmtCacheMax)
	}
	if opts.ConnTagPrefix == "" {
		return nil, nil
	}
	if err := noNUL(op, "Options.ConnTagPrefix", opts.ConnTagPrefix); err != nil {
		return nil, err
	}
	tag := C.CString(opts.ConnTagPrefix)
	o.conn_tag_prefix = tag
	return tag, nil
}

// ceilDiv is d in units of unit, rounded up: a positive duration shorter
// than a unit must not become 0, which means "the default".
func ceilDiv(d, unit time.Duration) int64 {
	return int64((d + unit - 1) / unit)
}

func noNUL(op, what, s string) error {
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			return argError(op, ErrInvalid, "%s contains a NUL byte", what)
		}
	}
	return nil
}

// ttlMillis converts a hold's lifetime for the library: 0 is the
// context's default, a positive duration is rounded up to whole
// milliseconds.
func ttlMillis(op string, ttl time.Duration) (C.int64_t, error) {
	if ttl < 0 {
		return 0, argError(op, ErrQuantity, "ttl is negative (%v)", ttl)
	}
	return C.int64_t(ceilDiv(ttl, time.Millisecond)), nil
}
