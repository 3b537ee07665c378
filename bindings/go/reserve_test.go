// The package's tests, against a database of their own on the server of
// RSV_TEST_SOCKET (go-test.sh, make go-test).

package reserve_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"libreserve/reserve"
	"libreserve/reserve/internal/testdb"
)

var db *testdb.DB

func TestMain(m *testing.M) {
	var err error
	if db, err = testdb.New("pkg"); err != nil {
		fmt.Fprintln(os.Stderr, "reserve tests:", err)
		os.Exit(2)
	}
	code := m.Run()
	db.Drop()
	os.Exit(code)
}

func open(t *testing.T, opts *reserve.Options) *reserve.Conn {
	t.Helper()
	c, err := reserve.Open(context.Background(), db.DSN, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// stocked opens a Conn and gives a new item onHand units at location.
func stocked(t *testing.T, opts *reserve.Options, shop, location uint64, onHand int64) (*reserve.Conn, uint64) {
	t.Helper()
	c := open(t, opts)
	it := item()
	if err := c.StockSet(context.Background(), shop, it, location, onHand); err != nil {
		t.Fatal(err)
	}
	return c, it
}

// item gives each test an item id of its own.
var nextItem struct {
	sync.Mutex
	n uint64
}

func item() uint64 {
	nextItem.Lock()
	defer nextItem.Unlock()
	nextItem.n++
	return 1000 + nextItem.n
}

func stock(t *testing.T, c *reserve.Conn, shop, it, loc uint64) reserve.Stock {
	t.Helper()
	s, err := c.Stock(context.Background(), shop, it, loc)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func wantCode(t *testing.T, err error, code reserve.Code) *reserve.Error {
	t.Helper()
	if !errors.Is(err, code) {
		t.Fatalf("want %v, got %v", code, err)
	}
	var e *reserve.Error
	if !errors.As(err, &e) {
		t.Fatalf("%v is not a *reserve.Error", err)
	}
	if e.Code != code {
		t.Fatalf("Code %v, want %v", e.Code, code)
	}
	return e
}

func TestReserveClaim(t *testing.T) {
	ctx := context.Background()
	c, it := stocked(t, nil, 1, 7, 10)
	if err := c.ReserveOne(ctx, 1, "rc-1", it, 7, 2, 0); err != nil {
		t.Fatal(err)
	}
	st, err := c.Status(ctx, 1, "rc-1")
	if err != nil || st.Status != reserve.Held || st.Units != 2 || st.ExpiresIn <= 0 {
		t.Fatalf("status %+v, %v", st, err)
	}
	if s := stock(t, c, 1, it, 7); s.Held != 2 || s.Available != 8 {
		t.Fatalf("stock after reserve %+v", s)
	}
	if err := c.Claim(ctx, 1, "rc-1"); err != nil {
		t.Fatal(err)
	}
	e := wantCode(t, c.Claim(ctx, 1, "rc-1"), reserve.ErrClaimed)
	if !e.Expected() || e.Op != "claim" || e.Message == "" {
		t.Fatalf("repeated claim: %#v", e)
	}
	if s := stock(t, c, 1, it, 7); s.OnHand != 8 || s.Held != 0 {
		t.Fatalf("stock after claim %+v", s)
	}
	if st, _ := c.Status(ctx, 1, "rc-1"); st.Status != reserve.Claimed || st.Status.String() != "claimed" {
		t.Fatalf("status after claim %+v", st)
	}
	// A claimed token cannot be reserved again: nothing is taken twice.
	wantCode(t, c.ReserveOne(ctx, 1, "rc-1", it, 7, 2, 0), reserve.ErrClaimed)
	if s := stock(t, c, 1, it, 7); s.OnHand != 8 || s.Held != 0 {
		t.Fatalf("stock after a repeated reserve %+v", s)
	}
}

func TestCartAndOutcomes(t *testing.T) {
	ctx := context.Background()
	c := open(t, nil)
	a, b := item(), item()
	for _, s := range []struct{ it, loc uint64 }{{a, 1}, {a, 2}, {b, 1}} {
		if err := c.StockSet(ctx, 2, s.it, s.loc, 3); err != nil {
			t.Fatal(err)
		}
	}
	lines := []reserve.Line{
		{Item: a, Locations: []uint64{1, 2}, Quantity: 5, Split: true},
		{Item: b, Locations: []uint64{1}, Quantity: 1},
	}
	alloc, err := c.Reserve(ctx, 2, "cart-1", lines, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	want := [][]reserve.Allocation{{{1, 3}, {2, 2}}, {{1, 1}}}
	if fmt.Sprint(alloc) != fmt.Sprint(want) {
		t.Fatalf("allocations %v, want %v", alloc, want)
	}
	// The second line cannot be covered: nothing of the cart is held.
	e := wantCode(t, func() error {
		_, err := c.Reserve(ctx, 2, "cart-2", []reserve.Line{{Item: b, Locations: []uint64{1}, Quantity: 1}, {Item: b, Locations: []uint64{1}, Quantity: 5}}, 0)
		return err
	}(), reserve.ErrOutOfStock)
	if e.Line != 1 || !strings.Contains(e.Error(), "RSV_EOUTOFSTOCK") {
		t.Fatalf("out of stock: line %d, %v", e.Line, e)
	}
	wantCode(t, func() error { _, err := c.Status(ctx, 2, "cart-2"); return err }(), reserve.ErrNotFound)
	_, err = c.Reserve(ctx, 2, "cart-3", []reserve.Line{{Item: item(), Locations: []uint64{1}, Quantity: 1}}, 0)
	if e := wantCode(t, err, reserve.ErrNoItem); e.Line != 0 {
		t.Fatalf("no item: line %d", e.Line)
	}
	if err := c.Release(ctx, 2, "cart-1"); err != nil {
		t.Fatal(err)
	}
	if err := c.Release(ctx, 2, "cart-1"); err != nil {
		t.Fatalf("a repeated release: %v", err)
	}
	wantCode(t, c.Claim(ctx, 2, "cart-1"), reserve.ErrReleased)
	if err := c.ReserveOne(ctx, 2, "cart-4", b, 1, 1, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := c.Extend(ctx, 2, "cart-4", time.Hour); err != nil {
		t.Fatal(err)
	}
	if st, _ := c.Status(ctx, 2, "cart-4"); st.ExpiresIn < 59*time.Minute {
		t.Fatalf("extended status %+v", st)
	}
	if v, err := c.Audit(ctx, 2, false); err != nil || len(v) != 0 {
		t.Fatalf("audit: %v %v", v, err)
	}
}

// Bad input is refused before anything is written, with an error that
// says what was wrong.
func TestBadInput(t *testing.T) {
	ctx := context.Background()
	c, it := stocked(t, nil, 3, 1, 5)
	cases := []struct {
		name string
		code reserve.Code
		err  error
	}{
		{"empty token", reserve.ErrToken, c.ReserveOne(ctx, 3, "", it, 1, 1, 0)},
		{"long token", reserve.ErrToken, c.ReserveOne(ctx, 3, strings.Repeat("x", reserve.TokenMax+1), it, 1, 1, 0)},
		{"zero quantity", reserve.ErrQuantity, c.ReserveOne(ctx, 3, "bad-1", it, 1, 0, 0)},
		{"negative quantity", reserve.ErrQuantity, c.ReserveOne(ctx, 3, "bad-2", it, 1, -4, 0)},
		{"huge quantity", reserve.ErrQuantity, c.ReserveOne(ctx, 3, "bad-3", it, 1, reserve.QuantityMax+1, 0)},
		{"negative ttl", reserve.ErrQuantity, c.ReserveOne(ctx, 3, "bad-4", it, 1, 1, -time.Second)},
		{"ttl over 30 days", reserve.ErrQuantity, c.ReserveOne(ctx, 3, "bad-5", it, 1, 1, 31*24*time.Hour)},
		{"empty cart", reserve.ErrEmpty, func() error { _, err := c.Reserve(ctx, 3, "bad-6", nil, 0); return err }()},
		{"line without location", reserve.ErrInvalid, func() error {
			_, err := c.Reserve(ctx, 3, "bad-7", []reserve.Line{{Item: it, Quantity: 1}}, 0)
			return err
		}()},
		{"location twice", reserve.ErrInvalid, func() error {
			_, err := c.Reserve(ctx, 3, "bad-8", []reserve.Line{{Item: it, Locations: []uint64{1, 1}, Quantity: 1}}, 0)
			return err
		}()},
		{"negative stock", reserve.ErrQuantity, c.StockSet(ctx, 3, it, 1, -1)},
		{"empty batch", reserve.ErrInvalid, func() error { _, err := c.ClaimBatch(ctx, nil); return err }()},
	}
	for _, tc := range cases {
		e := wantCode(t, tc.err, tc.code)
		if !errors.Is(tc.err, fs.ErrInvalid) {
			t.Errorf("%s: %v does not match fs.ErrInvalid", tc.name, tc.err)
		}
		if e.Message == "" {
			t.Errorf("%s: no message", tc.name)
		}
		t.Logf("%s: %v", tc.name, tc.err)
	}
	if s := stock(t, c, 3, it, 1); s.OnHand != 5 || s.Held != 0 {
		t.Fatalf("stock after bad input %+v", s)
	}
	if n := db.Query(t, "SELECT COUNT(*) FROM rsv_checkouts WHERE shop_id = 3"); n != "0" {
		t.Fatalf("%s checkouts written by bad input", n)
	}
	for _, bad := range []struct {
		dsn  string
		opts *reserve.Options
		code reserve.Code
	}{
		{db.DSN + "&colour=blue", nil, reserve.ErrInvalid},
		{"postgres://x/y", nil, reserve.ErrInvalid},
		{db.DSN + "\x00", nil, reserve.ErrInvalid},
		{db.DSN, &reserve.Options{PoolCap: 20000}, reserve.ErrInvalid},
		{db.DSN, &reserve.Options{HoldTTL: -time.Second}, reserve.ErrInvalid},
	} {
		c, err := reserve.Open(ctx, bad.dsn, bad.opts)
		if c != nil {
			c.Close()
		}
		wantCode(t, err, bad.code)
		t.Logf("open: %v", err)
	}
}

func TestWrongPassword(t *testing.T) {
	d := reserve.DSN{User: "rsv_nobody", Password: "wrong", Socket: os.Getenv("RSV_TEST_SOCKET"), Database: db.Name}
	_, err := reserve.Open(context.Background(), d.String(), nil)
	// the library's code is ErrConn, but a refused account is
	// ErrAuthentication, not ErrConn: a retry loop must not repeat it
	if !errors.Is(err, reserve.ErrAuthentication) || !errors.Is(err, fs.ErrPermission) || errors.Is(err, reserve.ErrConn) {
		t.Fatalf("want ErrAuthentication (and not ErrConn), got %v", err)
	}
	var e *reserve.Error
	if !errors.As(err, &e) || e.Code != reserve.ErrConn || e.Errno != 1045 {
		t.Fatalf("want Code ErrConn, Errno 1045: %#v", err)
	}
	if !strings.Contains(e.Message, "1045") && !strings.Contains(strings.ToLower(e.Message), "denied") {
		t.Fatalf("the message does not say why: %v", e)
	}
}

func TestBatches(t *testing.T) {
	ctx := context.Background()
	c, it := stocked(t, nil, 4, 1, 3)
	var reqs []reserve.ReserveRequest
	for i := 0; i < 4; i++ {
		reqs = append(reqs, reserve.ReserveRequest{Shop: 4, Token: fmt.Sprintf("b-%d", i), Item: it, Location: 1, Quantity: 1})
	}
	reqs = append(reqs, reserve.ReserveRequest{Shop: 4, Token: "", Item: it, Location: 1, Quantity: 1})
	errs, err := c.ReserveBatch(ctx, reqs, 0)
	if err != nil {
		t.Fatal(err)
	}
	held, out := 0, 0
	for i, e := range errs[:4] {
		switch {
		case e == nil:
			held++
		case errors.Is(e, reserve.ErrOutOfStock):
			out++
		default:
			t.Fatalf("entry %d: %v", i, e)
		}
	}
	if held != 3 || out != 1 || !errors.Is(errs[4], reserve.ErrToken) {
		t.Fatalf("batch: %d held, %d out of stock, %v", held, out, errs)
	}
	var cos []reserve.Checkout
	for _, r := range reqs[:4] {
		cos = append(cos, reserve.Checkout{Shop: 4, Token: r.Token})
	}
	errs, err = c.ClaimBatch(ctx, cos)
	if err != nil {
		t.Fatal(err)
	}
	claimed := 0
	for _, e := range errs {
		if e == nil {
			claimed++
		} else if !errors.Is(e, reserve.ErrNotFound) {
			t.Fatalf("claim batch: %v", errs)
		}
	}
	if s := stock(t, c, 4, it, 1); claimed != 3 || s.OnHand != 0 {
		t.Fatalf("claimed %d, stock %+v", claimed, s)
	}
	if n, err := c.Stat(ctx, reserve.StatCalls, reserve.OpClaim); err != nil || n != 4 {
		t.Fatalf("claim calls counted: %d %v", n, err)
	}
}

// Calls from many goroutines on one Conn take turns.
func TestConnSharedByGoroutines(t *testing.T) {
	ctx := context.Background()
	c, it := stocked(t, nil, 5, 1, 100)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			tok := fmt.Sprintf("shared-%d", g)
			if err := c.ReserveOne(ctx, 5, tok, it, 1, 1, 0); err != nil {
				errs <- err
				return
			}
			errs <- c.Claim(ctx, 5, tok)
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if s := stock(t, c, 5, it, 1); s.OnHand != 84 {
		t.Fatalf("stock %+v", s)
	}
}

func TestClosed(t *testing.T) {
	c := open(t, nil)
	c.Close()
	if err := c.Claim(context.Background(), 1, "x"); !errors.Is(err, reserve.ErrClosed) {
		t.Fatalf("claim on a closed Conn: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}

// The audit reports what it finds through a callback from C.
func TestAuditFindsTampering(t *testing.T) {
	ctx := context.Background()
	c, it := stocked(t, nil, 10, 1, 5)
	db.Query(t, fmt.Sprintf("UPDATE rsv_ledger SET issued = issued + 3 WHERE shop_id = 10 AND item_id = %d", it))
	defer db.Query(t, fmt.Sprintf("UPDATE rsv_ledger SET issued = issued - 3 WHERE shop_id = 10 AND item_id = %d", it))
	found, err := c.Audit(ctx, 10, false)
	if err != nil || len(found) == 0 {
		t.Fatalf("audit after tampering: %v %v", found, err)
	}
	for _, v := range found {
		if v.Shop != 10 || v.Item != it || v.Location != 1 || v.Problem == "" {
			t.Fatalf("violation %+v", v)
		}
	}
	t.Logf("%+v", found[0])
}

func TestDSN(t *testing.T) {
	d := reserve.DSN{User: "a@b", Password: "p:w/&?", Host: "db", Port: 3307, Database: "shop", Params: map[string]string{"ssl": "1", "connect_timeout": "5"}}
	want := "mariadb://a%40b:p%3Aw%2F%26%3F@db:3307/shop?connect_timeout=5&ssl=1"
	if d.String() != want {
		t.Fatalf("%s, want %s", d, want)
	}
}

func TestCartBatches(t *testing.T) {
	ctx := context.Background()
	c, it := stocked(t, nil, 4, 1, 4)
	lines := []reserve.Line{{Item: it, Locations: []uint64{1}, Quantity: 2}}
	reqs := []reserve.CartRequest{
		{Shop: 4, Token: "cb-1", Lines: lines},
		{Shop: 4, Token: "cb-2", Lines: lines},
		{Shop: 4, Token: "cb-3", Lines: lines}, // sold out
		{Shop: 4, Token: "cb-4"},               // no lines
	}
	res, err := c.ReserveCartBatch(ctx, reqs, 0)
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Err != nil || len(res[0].Allocations) != 1 || res[0].Allocations[0][0] != (reserve.Allocation{Location: 1, Quantity: 2}) {
		t.Fatalf("entry 0: %+v", res[0])
	}
	var e *reserve.Error
	if res[1].Err != nil || !errors.As(res[2].Err, &e) || !errors.Is(res[2].Err, reserve.ErrOutOfStock) || e.Line != 0 || !errors.Is(res[3].Err, reserve.ErrEmpty) {
		t.Fatalf("batch: %+v", res)
	}
	if s := stock(t, c, 4, it, 1); s.Held != 4 {
		t.Fatalf("stock %+v", s)
	}
	if _, err := c.ReserveCartBatch(ctx, nil, 0); !errors.Is(err, reserve.ErrInvalid) {
		t.Fatalf("empty batch: %v", err)
	}
}
