// The Batcher, shared by many goroutines.

package reserve_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"libreserve/reserve"
)

func TestBatcherManyGoroutines(t *testing.T) {
	ctx := context.Background()
	const stockUnits, buyers = 40, 64
	c, it := stocked(t, nil, 7, 1, stockUnits)
	b, err := reserve.OpenBatcher(ctx, db.DSN, nil, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var wg sync.WaitGroup
	var mu sync.Mutex
	sold, outOfStock := 0, 0
	for g := 0; g < buyers; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			tok := fmt.Sprintf("batcher-%d", g)
			err := b.ReserveOne(ctx, 7, tok, it, 1, 1, 0)
			if err == nil {
				err = b.Claim(ctx, 7, tok)
				if err == nil {
					err = b.Claim(ctx, 7, tok) // repeated: takes nothing
					if errors.Is(err, reserve.ErrClaimed) {
						err = nil
					}
				}
				mu.Lock()
				sold++
				mu.Unlock()
			} else if errors.Is(err, reserve.ErrOutOfStock) {
				mu.Lock()
				outOfStock++
				mu.Unlock()
				err = nil
			}
			if err != nil {
				t.Error(err)
			}
		}(g)
	}
	wg.Wait()
	if sold != stockUnits || outOfStock != buyers-stockUnits {
		t.Fatalf("sold %d, out of stock %d", sold, outOfStock)
	}
	if s := stock(t, c, 7, it, 1); s.OnHand != 0 || s.Held != 0 {
		t.Fatalf("stock %+v", s)
	}
	calls, _ := b.Stat(reserve.StatCalls, reserve.OpReserve)
	stmts, _ := b.Stat(reserve.StatStatements, reserve.OpReserve)
	t.Logf("%d reserves in %d statements", calls, stmts)
	if calls != buyers {
		t.Fatalf("reserves counted: %d", calls)
	}
	text, err := b.Prometheus(`instance="test"`)
	if err != nil || !strings.Contains(text, `libreserve_calls_total{instance="test",op="reserve",result="ok",class="ok"} 40`) {
		t.Fatalf("prometheus: %v\n%s", err, text)
	}
	if v, err := c.Audit(ctx, 7, false); err != nil || len(v) != 0 {
		t.Fatalf("audit: %v %v", v, err)
	}
}

func TestBatcherCarts(t *testing.T) {
	ctx := context.Background()
	c, it := stocked(t, nil, 7, 1, 3)
	b, err := reserve.OpenBatcher(ctx, db.DSN, nil, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	lines := []reserve.Line{{Item: it, Locations: []uint64{1}, Quantity: 2}}
	alloc, err := b.Reserve(ctx, 7, "batcher-cart-1", lines, 0)
	if err != nil || len(alloc) != 1 || len(alloc[0]) != 1 || alloc[0][0] != (reserve.Allocation{Location: 1, Quantity: 2}) {
		t.Fatalf("reserve: %v %v", alloc, err)
	}
	_, err = b.Reserve(ctx, 7, "batcher-cart-2", lines, 0)
	var e *reserve.Error
	if !errors.As(err, &e) || !errors.Is(err, reserve.ErrOutOfStock) || e.Line != 0 {
		t.Fatalf("second cart: %v", err)
	}
	if _, err := b.Reserve(ctx, 7, "batcher-cart-3", nil, 0); !errors.Is(err, reserve.ErrEmpty) {
		t.Fatalf("empty cart: %v", err)
	}
	// a caller that stops waiting (its checkout row held elsewhere): its
	// cart stays the batcher's until the request completes
	one := []reserve.Line{{Item: it, Locations: []uint64{1}, Quantity: 1}}
	if _, err := c.Reserve(ctx, 7, "batcher-cart-4", one, 0); err != nil {
		t.Fatal(err)
	}
	unlock := lockCheckout(t, 7, "batcher-cart-4")
	done, cancel := context.WithCancel(ctx)
	go func() {
		waitForLockWait(t, db)
		cancel()
	}()
	if _, err := b.Reserve(done, 7, "batcher-cart-4", one, 0); !errors.Is(err, reserve.ErrInDoubt) {
		t.Fatalf("cancelled while waiting: %v", err)
	}
	unlock()
	if err := b.Close(); err != nil { // (waits for the request)
		t.Fatal(err)
	}
	if s := stock(t, c, 7, it, 1); s.Held != 3 {
		t.Fatalf("stock %+v", s)
	}
}

func TestBatcherBadInputAndClose(t *testing.T) {
	ctx := context.Background()
	if _, err := reserve.OpenBatcher(ctx, db.DSN, nil, 0); !errors.Is(err, reserve.ErrInvalid) {
		t.Fatalf("no connections: %v", err)
	}
	if _, err := reserve.OpenBatcher(ctx, db.DSN+"&colour=blue", nil, 1); !errors.Is(err, reserve.ErrInvalid) {
		t.Fatalf("bad dsn: %v", err)
	}
	b, err := reserve.OpenBatcher(ctx, db.DSN, nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.ReserveOne(ctx, 8, "", 1, 1, 1, 0); !errors.Is(err, reserve.ErrToken) {
		t.Fatalf("empty token: %v", err)
	}
	if err := b.ReserveOne(ctx, 8, "bq", 1, 1, 0, 0); !errors.Is(err, reserve.ErrQuantity) {
		t.Fatalf("zero quantity: %v", err)
	}
	if err := b.Claim(ctx, 8, "never-reserved"); !errors.Is(err, reserve.ErrNotFound) {
		t.Fatalf("unknown checkout: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := b.Claim(cctx, 8, "x"); !errors.Is(err, context.Canceled) {
		t.Fatalf("ended context: %v", err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Claim(ctx, 8, "x"); !errors.Is(err, reserve.ErrClosed) {
		t.Fatalf("after close: %v", err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
}
