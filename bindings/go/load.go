// load.go owns finding and loading libreserve.so at run time, and the
// package's link to the C header.

package reserve

/*
#cgo CFLAGS: -I${SRCDIR}/../../include
#cgo pkg-config: libmariadb
#cgo LDFLAGS: -ldl
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"unsafe"
)

var (
	loadOnce sync.Once
	loadErr  error
	loadPath string
)

// ErrLibraryNotFound is what errors.Is finds when the C library could not
// be loaded; errors.As gives the *LibraryError with the places tried.
var ErrLibraryNotFound = errors.New("libreserve: the C library libreserve.so.0 was not found")

// LibraryError says why the C library could not be loaded: each place
// looked in and why it failed, in order.
type LibraryError struct {
	Tried []string
}

func (e *LibraryError) Error() string {
	return "libreserve: cannot load the C library libreserve.so.0; tried " + strings.Join(e.Tried, "; ") +
		".  Install it (make install), or set LIBRESERVE_PATH to the library or its directory, " +
		"or PKG_CONFIG_PATH to the directory of reserve.pc"
}

// Unwrap makes errors.Is(err, ErrLibraryNotFound) hold.
func (e *LibraryError) Unwrap() error { return ErrLibraryNotFound }

func inDir(dir string) string {
	for _, name := range []string{"libreserve.so.0", "libreserve.so"} {
		p := filepath.Join(dir, name)
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

func pkgConfigLibdir(tried *[]string) string {
	tool := os.Getenv("PKG_CONFIG")
	if tool == "" {
		tool = "pkg-config"
	}
	out, err := exec.Command(tool, "--variable=libdir", "reserve").Output()
	libdir := strings.TrimSpace(string(out))
	var exit *exec.ExitError
	switch {
	case err != nil && !errors.As(err, &exit):
		*tried = append(*tried, fmt.Sprintf("pkg-config (%v)", err))
		return ""
	case err != nil || libdir == "":
		*tried = append(*tried, "pkg-config --variable=libdir reserve (no reserve.pc in its search path)")
		return ""
	}
	return libdir
}

// candidate is a library file to try and where it came from.
type candidate struct{ where, path string }

// candidates lists the libraries to try, first match wins: the one
// LIBRESERVE_PATH names (a file, or a directory holding it; nothing else
// is tried then), the directory `pkg-config --variable=libdir reserve`
// reports, libreserve.so.0 as the system's dynamic loader finds it, then
// the in-tree build of the source tree this package was compiled from
// (when it was compiled in a checkout).  The places passed over are noted
// in tried.
func candidates(tried *[]string) ([]candidate, error) {
	if env := os.Getenv("LIBRESERVE_PATH"); env != "" {
		file := env
		if st, err := os.Stat(env); err == nil && st.IsDir() {
			if file = inDir(env); file == "" {
				return nil, &LibraryError{Tried: []string{fmt.Sprintf("LIBRESERVE_PATH=%s (no libreserve.so.0 or libreserve.so in that directory)", env)}}
			}
		}
		return []candidate{{"LIBRESERVE_PATH", file}}, nil
	}
	*tried = append(*tried, "LIBRESERVE_PATH (not set)")
	var out []candidate
	if libdir := pkgConfigLibdir(tried); libdir != "" {
		if file := inDir(libdir); file != "" {
			out = append(out, candidate{"pkg-config's libdir", file})
		} else {
			*tried = append(*tried, fmt.Sprintf("pkg-config's libdir %s (no libreserve.so.0 there)", libdir))
		}
	}
	out = append(out, candidate{"the system loader", "libreserve.so.0"})
	// The file name recorded at compile time (absent with -trimpath).
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		tree := filepath.Join(filepath.Dir(file), "..", "..")
		lib := filepath.Join(tree, "build", "libreserve.so.0")
		if _, err := os.Stat(filepath.Join(tree, "include", "reserve.h")); err == nil {
			if _, err := os.Stat(lib); err == nil {
				out = append(out, candidate{"the source tree's build", filepath.Clean(lib)})
			}
		}
	}
	return out, nil
}

func load() error {
	loadOnce.Do(func() {
		var tried []string
		paths, err := candidates(&tried)
		if err != nil {
			loadErr = err
			return
		}
		buf := (*C.char)(C.malloc(512))
		defer C.free(unsafe.Pointer(buf))
		for _, p := range paths {
			cp := C.CString(p.path)
			rc := C.rsvgo_load(cp, buf, 512)
			C.free(unsafe.Pointer(cp))
			if rc == 0 {
				loadPath = p.path
				return
			}
			tried = append(tried, fmt.Sprintf("%s: %s (%s)", p.where, p.path, C.GoString(buf)))
		}
		loadErr = &LibraryError{Tried: tried}
	})
	return loadErr
}

// LibraryPath is the libreserve.so the package loaded, as it was named
// (a path, or "libreserve.so.0" when the dynamic loader found it), or ""
// with the reason when it could not be loaded.
func LibraryPath() (string, error) {
	if err := load(); err != nil {
		return "", err
	}
	return loadPath, nil
}

// Version is the loaded library's version ("0.1.0"), or "" when it
// cannot be loaded.
func Version() string {
	if load() != nil {
		return ""
	}
	return C.GoString(C.go_rsv_version())
}
