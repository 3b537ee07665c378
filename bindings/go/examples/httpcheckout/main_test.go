// The example server's handler, driven without a network: a small sale
// and the answers to bad requests.

package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"

	"libreserve/reserve"
	"libreserve/reserve/internal/testdb"
)

func post(h http.Handler, url string) (int, string) {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, url, nil))
	return rec.Code, strings.TrimSpace(rec.Body.String())
}

func TestSale(t *testing.T) {
	db, err := testdb.New("http")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		t.Fatal(err)
	}
	defer db.Drop()
	ctx := context.Background()
	c, err := reserve.Open(ctx, db.DSN, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.StockSet(ctx, 3, 1, 1, 5); err != nil {
		t.Fatal(err)
	}
	b, err := reserve.OpenBatcher(ctx, db.DSN, nil, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	h := newServer(b)

	var wg sync.WaitGroup
	var mu sync.Mutex
	answers := map[string]int{}
	var sold string
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			code, body := post(h, fmt.Sprintf("/reserve?shop=3&token=buyer-%d&item=1&location=1&quantity=1", i))
			if code == http.StatusOK {
				code, body = post(h, fmt.Sprintf("/claim?shop=3&token=buyer-%d", i))
			}
			mu.Lock()
			answers[fmt.Sprintf("%d %s", code, strings.Fields(body)[1])]++
			if code == http.StatusOK {
				sold = fmt.Sprintf("buyer-%d", i)
			}
			mu.Unlock()
		}(i)
	}
	wg.Wait()
	if answers["200 RSV_OK"] != 5 || answers["409 RSV_EOUTOFSTOCK"] != 3 {
		t.Fatalf("answers %v", answers)
	}
	if s, _ := c.Stock(ctx, 3, 1, 1); s.OnHand != 0 {
		t.Fatalf("stock %+v", s)
	}
	for url, want := range map[string]string{
		"/claim?shop=3&token=" + sold:                            "409 RSV_ECLAIMED",
		"/claim?shop=3&token=nobody":                             "404 RSV_ENOTFOUND",
		"/reserve?shop=3&token=x&item=1&location=1&quantity=0":   "400 RSV_EQUANTITY",
		"/reserve?shop=3&token=&item=1&location=1&quantity=1":    "400 RSV_ETOKEN",
		"/reserve?shop=-3&token=x&item=1&location=1&quantity=1":  "400 shop must be",
		"/reserve?shop=3&token=x&item=one&location=1&quantity=1": "400 item must be",
	} {
		if code, body := post(h, url); !strings.HasPrefix(body, want) || fmt.Sprint(code) != want[:3] {
			t.Errorf("%s: %d %q, want %q", url, code, body, want)
		}
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if !strings.Contains(rec.Body.String(), "libreserve_calls_total") {
		t.Fatalf("metrics: %s", rec.Body.String())
	}
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/claim?shop=3&token=x", nil))
	if rec.Code != http.StatusMethodNotAllowed {
		t.Fatalf("GET /claim: %d", rec.Code)
	}
}
