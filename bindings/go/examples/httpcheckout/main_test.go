// The example server's handler, driven without a network: a small sale
// and the answers to bad requests.

package main

import (
	"context"
	"encoding/json"
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

// post answers the status, and the answer's code and message ("RSV_OK",
// "RSV_EOUTOFSTOCK out of stock", "bad_request shop must be ..."); it
// fails the test when the answer is not the JSON the C example writes.
func post(t *testing.T, h http.Handler, url string) (int, string) {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, url, nil))
	var rep struct {
		OK      *bool   `json:"ok"`
		Code    string  `json:"code"`
		Token   *string `json:"token"`
		Held    int64   `json:"held"`
		Message string  `json:"message"`
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("%s: Content-Type %q", url, ct)
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &rep); err != nil || rep.OK == nil || rep.Code == "" {
		t.Errorf("%s: not the JSON answer: %q (%v)", url, rec.Body.String(), err)
		return rec.Code, ""
	}
	if *rep.OK != (rec.Code == http.StatusOK) {
		t.Errorf("%s: %d with ok %v", url, rec.Code, *rep.OK)
	}
	if strings.HasPrefix(rep.Code, "RSV_") && rep.Token == nil {
		t.Errorf("%s: no token in %q", url, rec.Body.String())
	}
	if rec.Code == http.StatusOK && strings.HasPrefix(url, "/reserve") && rep.Held <= 0 {
		t.Errorf("%s: held %d", url, rep.Held)
	}
	return rec.Code, strings.TrimSpace(rep.Code + " " + rep.Message)
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
			code, body := post(t, h, fmt.Sprintf("/reserve?shop=3&token=buyer-%d&item=1&location=1&quantity=1", i))
			if code == http.StatusOK {
				code, body = post(t, h, fmt.Sprintf("/claim?shop=3&token=buyer-%d", i))
			}
			mu.Lock()
			answers[fmt.Sprintf("%d %s", code, strings.Fields(body)[0])]++
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
		"/reserve?shop=-3&token=x&item=1&location=1&quantity=1":  "400 bad_request shop must be",
		"/reserve?shop=3&token=x&item=one&location=1&quantity=1": "400 bad_request item must be",
	} {
		if code, body := post(t, h, url); !strings.HasPrefix(fmt.Sprint(code, " ", body), want) {
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
