// httpcheckout is a checkout server on net/http: every request's
// reserve, claim or release goes through one reserve.Batcher, which
// coalesces the requests of all the server's goroutines onto a few
// connections.  Every answer is JSON, as the C example's
// (examples/http_checkout.c):
//
//	POST /reserve?shop=3&token=abc&item=1&location=1&quantity=1
//	  200 {"ok":true,"code":"RSV_OK","token":"abc","held":1}
//	  409 {"ok":false,"code":"RSV_EOUTOFSTOCK","token":"abc","message":"..."}
//	  400 {"ok":false,"code":"bad_request","message":"quantity must be ..."}
//	POST /claim?shop=3&token=abc     POST /release?shop=3&token=abc
//	GET /metrics                     the batcher's statistics (Prometheus)
//
// A request whose client goes away is answered by the batcher all the
// same; its caller learns nothing (repeating it with the same token
// settles it, as for every call).
//
//	RSV_DSN='mariadb://app:secret@/shop?socket=/run/mysqld/mysqld.sock' go run ./examples/httpcheckout
//	curl -X POST 'http://127.0.0.1:17081/reserve?shop=3&token=abc&item=1&location=1&quantity=1'
//
// The database must hold the libreserve schema and a stock for the item
// (rsv-admin, or Conn.StockSet).
package main

import (
	"context"
	"encoding/json"
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

// reply is the JSON answer to a request.
type reply struct {
	OK      bool    `json:"ok"`
	Code    string  `json:"code"`
	Token   *string `json:"token,omitempty"` // on every answer of a call, "" too
	Held    int64   `json:"held,omitempty"`
	Message string  `json:"message,omitempty"`
	Retry   string  `json:"retry,omitempty"`
}

// post runs a call of a checkout; it answers how many units it held
// (reserve), else 0.
func (s *server) post(call func(*http.Request, uint64, string) (int64, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			send(w, http.StatusMethodNotAllowed, reply{Code: "method_not_allowed", Message: r.Method + " " + r.URL.Path + ": use POST"})
			return
		}
		token := r.URL.Query().Get("token")
		shop, err := param(r, "shop")
		var held int64
		if err == nil {
			held, err = call(r, shop, token)
		}
		answer(w, token, held, err)
	}
}

func (s *server) reserve(r *http.Request, shop uint64, token string) (int64, error) {
	item, err := param(r, "item")
	if err != nil {
		return 0, err
	}
	loc, err := param(r, "location")
	if err != nil {
		return 0, err
	}
	q, err := strconv.ParseInt(r.URL.Query().Get("quantity"), 10, 64)
	if err != nil {
		return 0, badRequest{fmt.Sprintf("quantity must be an integer, not %q", r.URL.Query().Get("quantity"))}
	}
	return q, s.b.ReserveOne(r.Context(), shop, token, item, loc, q, 0)
}

func (s *server) claim(r *http.Request, shop uint64, token string) (int64, error) {
	return 0, s.b.Claim(r.Context(), shop, token)
}

func (s *server) release(r *http.Request, shop uint64, token string) (int64, error) {
	return 0, s.b.Release(r.Context(), shop, token)
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

func answer(w http.ResponseWriter, token string, held int64, err error) {
	var bad badRequest
	var e *reserve.Error
	switch {
	case err == nil:
		send(w, http.StatusOK, reply{OK: true, Code: reserve.OK.String(), Token: &token, Held: held})
	case errors.As(err, &bad):
		send(w, http.StatusBadRequest, reply{Code: "bad_request", Message: bad.msg})
	case errors.As(err, &e):
		rep := reply{Code: e.Code.String(), Token: &token, Message: e.Message}
		if e.Code == reserve.ErrInDoubt {
			rep.Retry = "repeat the same request with the same token: it is idempotent"
		}
		st := status(e.Code)
		if st == http.StatusServiceUnavailable {
			w.Header().Set("Retry-After", "1")
		}
		send(w, st, rep)
	default:
		send(w, http.StatusInternalServerError, reply{Code: "internal", Message: err.Error()})
	}
}

func send(w http.ResponseWriter, status int, rep reply) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(rep)
}

func main() {
	def := os.Getenv("RSV_DSN")
	if def == "" {
		def = "mariadb://shop:secret@localhost/shop?socket=/run/mysqld/mysqld.sock"
	}
	dsn := flag.String("dsn", def, "connection string (default $RSV_DSN, else the shop database on the system server)")
	addr := flag.String("addr", "127.0.0.1:17081", "address to listen on")
	conns := flag.Int("connections", 4, "connections of the batcher (1..64)")
	flag.Parse()
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
