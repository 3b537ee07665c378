// Cancellation through context.Context: a call waiting for a row lock is
// cut when its context ends, answers an error matching both the
// library's code and the context's, applies nothing twice, and the Conn
// goes on working.

package reserve_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"libreserve/reserve"
	"libreserve/reserve/internal/testdb"
)

// lockCheckout holds the row of a checkout in another session, so that
// a claim of it waits, until the returned function rolls back.
func lockCheckout(t *testing.T, shop uint64, tok string) func() {
	t.Helper()
	s, err := db.Session()
	if err != nil {
		t.Fatal(err)
	}
	q := fmt.Sprintf("START TRANSACTION; SELECT status FROM rsv_checkouts WHERE shop_id = %d AND checkout_token = '%s' FOR UPDATE", shop, tok)
	if err := s.Run(q); err != nil {
		t.Fatal(err)
	}
	return func() {
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// waitForLockWait returns once a session of the test's database waits
// for a row lock.
func waitForLockWait(t *testing.T, d *testdb.DB) {
	t.Helper()
	for i := 0; ; i++ {
		n := d.Query(t, "SELECT COUNT(*) FROM information_schema.innodb_trx t JOIN information_schema.processlist p ON p.id = t.trx_mysql_thread_id WHERE t.trx_state = 'LOCK WAIT' AND p.db = DATABASE()")
		if n != "0" {
			return
		}
		if i > 3000 {
			t.Fatal("no call ever waited for the lock")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestCancelClaimWaitingForLock(t *testing.T) {
	bg := context.Background()
	// A generous budget: the call must end by cancellation, not by it.
	c, it := stocked(t, &reserve.Options{CallTimeout: time.Minute, LockWait: 50 * time.Second}, 6, 1, 5)
	if err := c.ReserveOne(bg, 6, "cancel-1", it, 1, 2, 0); err != nil {
		t.Fatal(err)
	}
	unlock := lockCheckout(t, 6, "cancel-1")
	ctx, cancel := context.WithCancel(bg)
	done := make(chan error, 1)
	go func() { done <- c.Claim(ctx, 6, "cancel-1") }()
	waitForLockWait(t, db)
	cancel()
	err := <-done
	unlock()
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("the claim canceled while it waited: %v does not match context.Canceled", err)
	}
	var e *reserve.Error
	if !errors.As(err, &e) || (e.Code != reserve.ErrCanceled && e.Code != reserve.ErrConn && e.Code != reserve.ErrInDoubt) {
		t.Fatalf("canceled claim: %v", err)
	}
	t.Logf("canceled claim: %v", err)
	// The next call reconnects by itself; repeating the claim settles it
	// (the server may have finished the cut call once the lock was gone):
	// either way the units leave the stock once.
	if err := c.Claim(bg, 6, "cancel-1"); err != nil && !errors.Is(err, reserve.ErrClaimed) {
		t.Fatalf("repeated claim: %v", err)
	}
	if s := stock(t, c, 6, it, 1); s.OnHand != 3 || s.Held != 0 {
		t.Fatalf("stock after the canceled and repeated claim %+v", s)
	}
}

func TestCanceledBeforeTheCall(t *testing.T) {
	bg := context.Background()
	c, it := stocked(t, nil, 6, 2, 5)
	ctx, cancel := context.WithCancel(bg)
	cancel()
	err := c.ReserveOne(ctx, 6, "cancel-2", it, 2, 1, 0)
	if !errors.Is(err, context.Canceled) || !errors.Is(err, reserve.ErrCanceled) {
		t.Fatalf("reserve with an ended context: %v", err)
	}
	if _, err := c.Status(bg, 6, "cancel-2"); !errors.Is(err, reserve.ErrNotFound) {
		t.Fatalf("a call whose context had ended wrote something: %v", err)
	}
	if err := c.StockSet(ctx, 6, it, 2, 9); !errors.Is(err, context.Canceled) {
		t.Fatalf("stock set with an ended context: %v", err)
	}
	if s := stock(t, c, 6, it, 2); s.OnHand != 5 {
		t.Fatalf("stock %+v", s)
	}
}

// A context that ends while a call waits for its turn on the Conn.
func TestCanceledWaitingForTheConn(t *testing.T) {
	bg := context.Background()
	c, it := stocked(t, &reserve.Options{CallTimeout: time.Minute, LockWait: 50 * time.Second}, 6, 3, 5)
	if err := c.ReserveOne(bg, 6, "cancel-3", it, 3, 1, 0); err != nil {
		t.Fatal(err)
	}
	unlock := lockCheckout(t, 6, "cancel-3")
	first := make(chan error, 1)
	go func() { first <- c.Claim(bg, 6, "cancel-3") }()
	waitForLockWait(t, db)
	ctx, cancel := context.WithCancel(bg)
	second := make(chan error, 1)
	go func() { second <- c.Release(ctx, 6, "cancel-3") }()
	cancel()
	if err := <-second; !errors.Is(err, context.Canceled) {
		t.Fatalf("the waiting release: %v", err)
	}
	unlock()
	if err := <-first; err != nil {
		t.Fatalf("the claim that held the Conn: %v", err)
	}
}
