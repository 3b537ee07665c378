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
	"fmt"
	"os"
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

// candidates lists the libraries to try, first match wins: the one
// LIBRESERVE_PATH names (a file, or a directory holding it; nothing else
// is tried then), the in-tree build of the source tree this package was
// compiled from (when it was compiled in a checkout), then the installed
// libreserve.so.0 as the dynamic loader finds it.
func candidates() ([]string, error) {
	if env := os.Getenv("LIBRESERVE_PATH"); env != "" {
		st, err := os.Stat(env)
		if err == nil && st.IsDir() {
			for _, name := range []string{"libreserve.so.0", "libreserve.so"} {
				p := filepath.Join(env, name)
				if _, err := os.Stat(p); err == nil {
					return []string{p}, nil
				}
			}
			return nil, fmt.Errorf("LIBRESERVE_PATH=%s: no libreserve.so.0 or libreserve.so in that directory", env)
		}
		return []string{env}, nil
	}
	var out []string
	// The file name recorded at compile time (absent with -trimpath).
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		tree := filepath.Join(filepath.Dir(file), "..", "..")
		lib := filepath.Join(tree, "build", "libreserve.so.0")
		if _, err := os.Stat(filepath.Join(tree, "include", "reserve.h")); err == nil {
			if _, err := os.Stat(lib); err == nil {
				out = append(out, filepath.Clean(lib))
			}
		}
	}
	return append(out, "libreserve.so.0"), nil
}

func load() error {
	loadOnce.Do(func() {
		paths, err := candidates()
		if err != nil {
			loadErr = fmt.Errorf("libreserve: %w", err)
			return
		}
		var why []string
		buf := (*C.char)(C.malloc(512))
		defer C.free(unsafe.Pointer(buf))
		for _, p := range paths {
			cp := C.CString(p)
			rc := C.rsvgo_load(cp, buf, 512)
			C.free(unsafe.Pointer(cp))
			if rc == 0 {
				loadPath = p
				return
			}
			why = append(why, C.GoString(buf))
		}
		loadErr = fmt.Errorf("libreserve: cannot load the C library (set LIBRESERVE_PATH to libreserve.so.0): %s", strings.Join(why, "; "))
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
