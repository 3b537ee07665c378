// httpcheckout is a checkout server on net/http: every request's
// reserve, claim or release goes through one reserve.Batcher, which
// coalesces the requests of all the server's goroutines onto a few
// connections.  The answer is the code's name, and the library's text:
//
//	POST /reserve?shop=3&token=abc&item=1&location=1&quantity=1
//	  200 RSV_OK
//	  409 RSV_EOUTOFSTOCK out of stock
//	POST /claim?shop=3&token=abc     POST /release?shop=3&token=abc
//	GET /metrics                     the batcher's statistics (Prometheus)
//
// A request whose client goes away is answered by the batcher all the
// same; its caller learns nothing (repeating it with the same token
// settles it, as for every call).
//
//	go run ./examples/httpcheckout -dsn 'mariadb://app:secret@/shop?socket=/run/mysqld/mysqld.sock'
//	curl -X POST 'http://127.0.0.1:17081/reserve?shop=3&token=abc&item=1&location=1&quantity=1'
//
// The database must hold the libreserve schema and a stock for the item
// (rsv-admin, or Conn.StockSet).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"libreserve/reserve"
)

// server answers the checkout requests with one batcher.
type server struct {
	b *reserve.Batcher
}

func newServer(b *reserve.Batcher) http.Handler {
	s := &server{b: b}
	mux := http.NewServeMux()
	mux.HandleFunc("/reserve", s.post(s.reserve))
	mux.HandleFunc("/claim", s.post(s.claim))
	mux.HandleFunc("/release", s.post(s.release))
	mux.HandleFunc("/metrics", s.metrics)
	return mux
}

// badRequest is a parameter the request got wrong.
type badRequest struct{ msg string }

func (e badRequest) Error() string { return e.msg }

func param(r *http.Request, name string) (uint64, error) {
	v, err := strconv.ParseUint(r.URL.Query().Get(name), 10, 64)
	if err != nil {
		return 0, badRequest{fmt.Sprintf("%s must be an unsigned integer, not %q", name, r.URL.Query().Get(name))}
	}
	return v, nil
}

func (s *server) post(call func(*http.Request, uint64, string) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			http.Error(w, "use POST", http.StatusMethodNotAllowed)
			return
		}
		shop, err := param(r, "shop")
		if err == nil {
			err = call(r, shop, r.URL.Query().Get("token"))
		}
		answer(w, err)
	}
}

func (s *server) reserve(r *http.Request, shop uint64, token string) error {
	item, err := param(r, "item")
	if err != nil {
		return err
	}
	loc, err := param(r, "location")
	if err != nil {
		return err
	}
	q, err := strconv.ParseInt(r.URL.Query().Get("quantity"), 10, 64)
	if err != nil {
		return badRequest{fmt.Sprintf("quantity must be an integer, not %q", r.URL.Query().Get("quantity"))}
	}
	return s.b.ReserveOne(r.Context(), shop, token, item, loc, q, 0)
}

func (s *server) claim(r *http.Request, shop uint64, token string) error {
	return s.b.Claim(r.Context(), shop, token)
}

func (s *server) release(r *http.Request, shop uint64, token string) error {
	return s.b.Release(r.Context(), shop, token)
}

func (s *server) metrics(w http.ResponseWriter, r *http.Request) {
	text, err := s.b.Prometheus("")
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	fmt.Fprint(w, text)
}

// status maps an outcome to the HTTP status a client acts on.
func status(code reserve.Code) int {
	switch code {
	case reserve.OK:
		return http.StatusOK
	case reserve.ErrOutOfStock, reserve.ErrClaimed, reserve.ErrReleased:
		return http.StatusConflict
	case reserve.ErrNotFound, reserve.ErrNoItem:
		return http.StatusNotFound
	case reserve.ErrExpired:
		return http.StatusGone
	case reserve.ErrBusy, reserve.ErrInDoubt, reserve.ErrConn, reserve.ErrDisabled:
		return http.StatusServiceUnavailable // try again, with the same token
	case reserve.ErrInvalid, reserve.ErrQuantity, reserve.ErrToken:
		return http.StatusBadRequest
	}
	return http.StatusInternalServerError
}

func answer(w http.ResponseWriter, err error) {
	var bad badRequest
	var e *reserve.Error
	code := reserve.OK
	switch {
	case err == nil:
	case errors.As(err, &bad):
		http.Error(w, "400 "+bad.msg, http.StatusBadRequest)
		return
	case errors.As(err, &e):
		code = e.Code
	default:
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(status(code))
	if code == reserve.OK {
		fmt.Fprintf(w, "%d %s\n", status(code), code.String())
	} else {
		fmt.Fprintf(w, "%d %s %s\n", status(code), code.String(), code.Error())
	}
}

func main() {
	dsn := flag.String("dsn", os.Getenv("RSV_DSN"), "connection string (default $RSV_DSN)")
	addr := flag.String("addr", "127.0.0.1:17081", "address to listen on")
	conns := flag.Int("connections", 4, "connections of the batcher (1..64)")
	flag.Parse()
	if *dsn == "" {
		fmt.Fprintln(os.Stderr, "httpcheckout: give -dsn mariadb://USER:PASSWORD@HOST/DATABASE (or set RSV_DSN)")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	b, err := reserve.OpenBatcher(ctx, *dsn, nil, *conns)
	if err != nil {
		log.Fatal(err)
	}
	srv := &http.Server{Addr: *addr, Handler: newServer(b), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		shut, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(shut)
	}()
	log.Printf("httpcheckout: listening on http://%s", *addr)
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		log.Fatal(err)
	}
	b.Close() // after every handler returned: their calls are answered
}
