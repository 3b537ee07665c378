// errors.go owns how the library's return codes become Go errors: one
// Code constant per code, usable as a sentinel with errors.Is, and *Error,
// which carries the code, the call and the library's message.

package reserve

/*
#include "shim.h"
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"strconv"
)

// ErrAuthentication is what errors.Is finds in an ErrConn the server gave
// because it refused the account (a wrong user or password, no access to
// the database: Error.Errno 1045, 1044, ...).  Reconnecting will not help,
// so such an error is not errors.Is(err, ErrConn), which a retry loop
// repeats; errors.Is(err, fs.ErrPermission) holds.  Its Error.Code is
// still the library's, ErrConn.
var ErrAuthentication = fmt.Errorf("libreserve: the server refused the account: %w", fs.ErrPermission)

// Server error numbers that mean the account was refused: access denied
// (1044, 1045, 1698), password expired (1820, 1862), unknown
// authentication plugin (1251, 2059).
var authErrnos = map[int]bool{1044: true, 1045: true, 1251: true, 1698: true, 1820: true, 1862: true, 2059: true}

var errnoRE = regexp.MustCompile(`\(MySQL error (\d+)\)`)

// Code is a libreserve return code (RSV_E* in reserve.h).  Every code but
// OK is also an error, so the constants below are the sentinels to test
// with errors.Is:
//
//	if errors.Is(err, reserve.ErrOutOfStock) { ... }
type Code int

// The codes of reserve.h.  ErrOutOfStock .. ErrInDoubt are expected
// outcomes of a checkout (Code.Expected); the others are failures.
const (
	OK               Code = 0
	ErrOutOfStock    Code = -1  // a line cannot be covered (Error.Line says which)
	ErrNotFound      Code = -2  // no such checkout
	ErrExpired       Code = -3  // the hold expired; its units were given back
	ErrClaimed       Code = -4  // already claimed: a repeated claim takes nothing again
	ErrReleased      Code = -5  // the checkout was released
	ErrBusy          Code = -6  // lock conflicts outlasted the retries, or the time budget was spent
	ErrInDoubt       Code = -7  // the outcome is unknown: repeat the call with the same token
	ErrConn          Code = -8  // no connection, or lost before COMMIT: nothing was applied
	ErrInvalid       Code = -10 // an invalid argument
	ErrQuantity      Code = -11 // a quantity or ttl out of range
	ErrEmpty         Code = -12 // a cart without lines
	ErrToken         Code = -13 // a token empty or longer than TokenMax bytes
	ErrNoItem        Code = -14 // no stock ledger row for the item and location
	ErrSchema        Code = -15 // the libreserve tables are missing or wrong
	ErrServer        Code = -16 // an unsupported server
	ErrInTransaction Code = -17 // inside a transaction the call cannot join
	ErrNoMemory      Code = -18
	ErrDB            Code = -19 // any other database error
	ErrTooBig        Code = -20 // too many lines, locations or entries
	ErrStock         Code = -21 // the stock change would go below what is held
	ErrConfig        Code = -22 // a connection or option the library cannot use
	ErrRange         Code = -23
	ErrDisabled      Code = -24 // the context or batcher is switched off or closing
	ErrSchemaVersion Code = -25 // the schema's version does not match the library
	ErrCanceled      Code = -26 // canceled before or between attempts: nothing was applied
	ErrNotPrimary    Code = -27 // the server takes no writes (a replica, a Galera node outside the primary component): nothing was applied
)

const codePending = 1 // RSV_PENDING

// Limits of one call (reserve.h).
const (
	TokenMax         = 128
	QuantityMax      = 1000000000
	CartMaxLines     = 1000
	LineMaxLocations = 16
	BatchMax         = 256
)

// Error is the library's short text for the code ("out of stock").
func (c Code) Error() string {
	if load() != nil {
		return fmt.Sprintf("libreserve code %d", int(c))
	}
	return C.GoString(C.go_rsv_strerror(C.int(c)))
}

// String is the code's name in reserve.h ("RSV_EOUTOFSTOCK").
func (c Code) String() string {
	if load() == nil {
		if n := C.go_rsv_code_name(C.int(c)); n != nil {
			return C.GoString(n)
		}
	}
	return fmt.Sprintf("RSV_CODE(%d)", int(c))
}

// Expected reports whether the code is an outcome a checkout handles as
// business logic (out of stock, expired, already claimed, ...) rather
// than a failure.
func (c Code) Expected() bool { return c <= ErrOutOfStock && c >= ErrInDoubt }

// Is makes the argument errors match fs.ErrInvalid too, the standard
// library's "invalid argument".
func (c Code) Is(target error) bool {
	return target == fs.ErrInvalid && c.invalidArgument()
}

func (c Code) invalidArgument() bool {
	switch c {
	case ErrInvalid, ErrQuantity, ErrEmpty, ErrToken, ErrTooBig:
		return true
	}
	return false
}

// Error is what every failing call returns: errors.Is(err, ErrOutOfStock)
// tests its code, errors.As(err, &e) gives the details.
type Error struct {
	Code    Code   // the return code
	Op      string // the call: "reserve", "claim", "open", ...
	Message string // the library's message for this call (rsv_errmsg), else the code's text
	// Line is the cart line that could not be served (ErrOutOfStock,
	// ErrNoItem of Reserve; 0 for ReserveOne), else -1.
	Line int
	// Errno is the server's (or Connector/C's) error number behind it
	// (1045 for a wrong password, 1205 for a lock wait timeout), else 0.
	Errno int
	// auth: the server refused the account (ErrAuthentication).
	auth bool
	// cause is the context's error when the call ended because its
	// context did (errors.Is(err, context.Canceled) then holds too).
	cause error
}

func (e *Error) Error() string {
	return fmt.Sprintf("libreserve: %s: %s (%s)", e.Op, e.Message, e.Code.String())
}

// Unwrap gives the code, so that errors.Is(err, ErrOutOfStock) holds;
// for a refused account, ErrAuthentication instead of ErrConn.
func (e *Error) Unwrap() error {
	if e.auth {
		return ErrAuthentication
	}
	return e.Code
}

// Is matches the context's error when the call was cut short by its
// context.
func (e *Error) Is(target error) bool {
	return e.cause != nil && errors.Is(e.cause, target)
}

// Expected is e.Code.Expected().
func (e *Error) Expected() bool { return e.Code.Expected() }

func newError(op string, code Code, msg string) *Error {
	if msg == "" {
		msg = code.Error()
	}
	e := &Error{Code: code, Op: op, Message: msg, Line: -1}
	if m := errnoRE.FindAllStringSubmatch(msg, -1); m != nil {
		e.Errno, _ = strconv.Atoi(m[len(m)-1][1])
	}
	e.auth = code == ErrConn && authErrnos[e.Errno]
	return e
}

// oneLine gives the error of a call of one line (ReserveOne) its line,
// line 0, as the library's message says.
func oneLine(err error) error {
	var e *Error
	if errors.As(err, &e) && (e.Code == ErrOutOfStock || e.Code == ErrNoItem) {
		e.Line = 0
	}
	return err
}

// argError is a refusal made on the Go side, before anything is sent.
func argError(op string, code Code, format string, args ...any) error {
	return newError(op, code, fmt.Sprintf(format, args...))
}

// ctxError wraps the error of a context that ended before a call began.
func ctxError(op string, ctx context.Context) error {
	e := newError(op, ErrCanceled, "the context ended before the call was sent: "+ctx.Err().Error())
	e.cause = ctx.Err()
	return e
}
