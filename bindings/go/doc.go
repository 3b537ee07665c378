// Package reserve is the Go binding of libreserve, the C library that
// keeps a shop from selling the same unit twice: units are held while a
// buyer pays (Reserve, ReserveOne), taken off the stock when payment
// succeeds (Claim), given back when it fails (Release), and expire when
// nothing happens.
//
// A Conn is one context of the library on a MariaDB connection of its
// own, opened from a connection string (Open, DSN); a Batcher serves any
// number of goroutines on a few connections.  Calls take a
// context.Context: the calls of a checkout's life (reserve, claim,
// release, extend, status) are cut when it ends.  Failures are *Error
// values that errors.Is compares with the Code constants
// (ErrOutOfStock, ErrClaimed, ...); argument errors also match
// fs.ErrInvalid, and calls cut by their context match the context's
// error.
//
// A Migration (OpenMigration) moves a shop from the store it sold
// through before to libreserve stage by stage (docs/migration.md): the
// checkout calls it instead of the Conn, and the old store is a Legacy
// the library calls back on the caller's goroutine and on the handle's
// own thread.
//
// The package uses cgo and the standard library only.  It loads
// libreserve.so when first used: the file LIBRESERVE_PATH names, else the
// one in the directory `pkg-config --variable=libdir reserve` reports,
// else libreserve.so.0 as the system's loader finds it, else the build of
// the source tree the package was compiled in; when none loads, calls
// return a *LibraryError (errors.Is(err, ErrLibraryNotFound)) naming each
// place tried.
package reserve
