// The migration handle's tests: a shop through its stages against the
// test database, the old store a map of this process, the stages set in
// rsv_migration_stage as rsv-admin migrate sets them.

package reserve_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"libreserve/reserve"
)

// oldStore keeps counters and holds in a map, as the Redis design kept
// them, and notes the thread each call ran on.
type oldStore struct {
	mu     sync.Mutex
	stock  int64
	holds  map[string]*oldHold
	thread map[string]int // "op token": the OS thread of the call
}

type oldHold struct {
	qty   int64
	state string // held, claimed, released
}

func newOldStore(stock int64) *oldStore {
	return &oldStore{stock: stock, holds: map[string]*oldHold{}, thread: map[string]int{}}
}

func (s *oldStore) Do(op reserve.Op, shop uint64, tok string, item, loc uint64, qty int64, ttl time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.thread[fmt.Sprint(op, " ", tok)] = syscall.Gettid()
	h := s.holds[tok]
	if op == reserve.OpReserve {
		switch {
		case h != nil:
			return nil
		case s.stock < qty:
			return fmt.Errorf("old store: %d left: %w", s.stock, reserve.ErrOutOfStock)
		}
		s.stock -= qty
		s.holds[tok] = &oldHold{qty, "held"}
		return nil
	}
	switch {
	case h == nil:
		return reserve.ErrNotFound
	case h.state == "claimed":
		return reserve.ErrClaimed
	case op == reserve.OpClaim && h.state == "released":
		return reserve.ErrReleased
	case op == reserve.OpClaim:
		h.state = "claimed"
	case h.state == "held":
		h.state = "released"
		s.stock += h.qty
	}
	return nil
}

func (s *oldStore) hold(tok string) *oldHold {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.holds[tok]
}

func (s *oldStore) threadOf(op reserve.Op, tok string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.thread[fmt.Sprint(op, " ", tok)]
}

// migShop gives each test a shop of its own: a stage is a shop's.
var nextShop struct {
	sync.Mutex
	n uint64
}

func migShop() uint64 {
	nextShop.Lock()
	defer nextShop.Unlock()
	nextShop.n++
	return 7000 + nextShop.n
}

// setStage sets a shop's stage as rsv-admin migrate does: under the named
// lock, with the next version.
func setStage(t *testing.T, shop uint64, st reserve.Stage) {
	t.Helper()
	db.Query(t, fmt.Sprintf("START TRANSACTION; UPDATE rsv_migration_change SET changes = changes + 1, changed_at = NOW(6) WHERE id = 1; "+
		"INSERT INTO rsv_migration_stage (shop_id, stage, version, changed_at) "+
		"SELECT %d, %d, COALESCE(MAX(version), 0) + 1, NOW(6) FROM rsv_migration_stage "+
		"ON DUPLICATE KEY UPDATE stage = VALUES(stage), version = VALUES(version); "+
		"COMMIT", shop, st))
}

// follow waits until the handle follows the shop's stage.
func follow(t *testing.T, m *reserve.Migration, shop uint64, st reserve.Stage) {
	t.Helper()
	for i := 0; i < 3000; i++ {
		if got, err := m.Stage(shop); err != nil {
			t.Fatal(err)
		} else if got == st {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("the handle never followed shop %d to stage %v", shop, st)
}

func openMigration(t *testing.T, c *reserve.Conn, l reserve.Legacy) *reserve.Migration {
	t.Helper()
	m, err := reserve.OpenMigration(context.Background(), c, db.DSN, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	if err := m.SetRefresh(100 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if l != nil {
		if err := m.SetLegacy(l); err != nil {
			t.Fatal(err)
		}
	}
	return m
}

func drain(t *testing.T, m *reserve.Migration) {
	t.Helper()
	if err := m.Drain(30 * time.Second); err != nil {
		t.Fatal(err)
	}
}

func migStat(t *testing.T, m *reserve.Migration, shop uint64, kind reserve.MigrationStat) uint64 {
	t.Helper()
	v, err := m.Stat(shop, false, kind)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func mustNil(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// A shop through old, shadow (a planted mismatch), primary (the old store
// kept current from the handle's thread) and back to shadow.
func TestMigrationStages(t *testing.T) {
	// The test's calls of the old store run on this OS thread; the
	// handle's own thread is another.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	caller := syscall.Gettid()
	ctx := context.Background()
	shop := migShop()
	c, it := stocked(t, nil, shop, 1, 10)
	old := newOldStore(3) // libreserve has 10: the old store drifted
	m := openMigration(t, c, old)

	if st, err := m.Stage(shop); err != nil || st != reserve.StageOld {
		t.Fatalf("a shop without a row: %v %v", st, err)
	}
	mustNil(t, "reserve a at old", m.ReserveOne(ctx, shop, "a", it, 1, 1, 0))
	if th := old.threadOf(reserve.OpReserve, "a"); th != caller {
		t.Fatalf("at old the old store ran on thread %d, not the caller's %d", th, caller)
	}
	if _, err := c.Status(ctx, shop, "a"); !errors.Is(err, reserve.ErrNotFound) {
		t.Fatalf("at old libreserve saw the reserve: %v", err)
	}

	setStage(t, shop, reserve.StageShadow)
	follow(t, m, shop, reserve.StageShadow)
	mustNil(t, "reserve b at shadow", m.ReserveOne(ctx, shop, "b", it, 1, 2, 0))
	// the old store's refusal, as its error: it has none left, libreserve has
	err := m.ReserveOne(ctx, shop, "c", it, 1, 1, 0)
	e := wantCode(t, err, reserve.ErrOutOfStock)
	if e.Op != "migrate reserve" || e.Line != 0 || !strings.Contains(e.Message, "old store: 0 left") {
		t.Fatalf("the old store's refusal: %#v", e)
	}
	mustNil(t, "claim b at shadow", m.Claim(ctx, shop, "b"))
	drain(t, m)
	if st, err := c.Status(ctx, shop, "b"); err != nil || st.Status != reserve.Claimed {
		t.Fatalf("libreserve's side of b: %+v %v", st, err)
	}
	if st, err := c.Status(ctx, shop, "c"); err != nil || st.Status != reserve.Released {
		t.Fatalf("libreserve's hold of what the old store refused, not given back: %+v %v", st, err)
	}
	if n := migStat(t, m, shop, reserve.MigOldRefusedNewAccepted); n != 1 {
		t.Fatalf("old refused, new accepted: %d, want 1", n)
	}
	if n, err := m.Stat(0, true, reserve.MigBothAccepted); err != nil || n != 2 {
		t.Fatalf("both accepted, all shops: %d %v, want 2", n, err)
	}

	setStage(t, shop, reserve.StagePrimary)
	follow(t, m, shop, reserve.StagePrimary)
	// libreserve answers now, with its message; a claim it refused is not
	// sent to the old store
	e = wantCode(t, m.Claim(ctx, shop, "a"), reserve.ErrNotFound)
	if e.Op != "migrate claim" || strings.Contains(e.Message, "old store") {
		t.Fatalf("libreserve's refusal: %#v", e)
	}
	drain(t, m)
	if h := old.hold("a"); h == nil || h.state != "held" {
		t.Fatalf("a claim libreserve refused reached the old store: %+v", h)
	}
	old.mu.Lock()
	old.stock += 5 // a delivery the old store is told of
	old.mu.Unlock()
	mustNil(t, "reserve d at primary", m.ReserveOne(ctx, shop, "d", it, 1, 1, 0))
	drain(t, m)
	if h := old.hold("d"); h == nil || h.state != "held" || h.qty != 1 {
		t.Fatalf("the old store was not kept current: %+v", h)
	}
	if th := old.threadOf(reserve.OpReserve, "d"); th == 0 || th == caller {
		t.Fatalf("at primary the old store ran on thread %d, the caller's is %d", th, caller)
	}
	prom, err := m.Prometheus()
	if err != nil || !strings.Contains(prom, fmt.Sprintf("libreserve_migration_stage{shop=\"%d\"} 2", shop)) {
		t.Fatalf("prometheus: %v\n%s", err, prom)
	}

	// back to shadow: the old store decides again, and knows of d
	setStage(t, shop, reserve.StageShadow)
	follow(t, m, shop, reserve.StageShadow)
	mustNil(t, "claim d back at shadow", m.Claim(ctx, shop, "d"))
	wantCode(t, m.ReserveOne(ctx, shop, "f", it, 1, 5, 0), reserve.ErrOutOfStock)
	drain(t, m)
	if st, err := c.Status(ctx, shop, "d"); err != nil || st.Status != reserve.Claimed {
		t.Fatalf("libreserve's side of d: %+v %v", st, err)
	}
	if n := migStat(t, m, shop, reserve.MigOldRefusedNewAccepted); n != 2 {
		t.Fatalf("old refused, new accepted after the flip back: %d, want 2", n)
	}
	offered := migStat(t, m, shop, reserve.MigOffered)
	applied := migStat(t, m, shop, reserve.MigApplied)
	dropped := migStat(t, m, shop, reserve.MigDropped)
	if offered == 0 || offered != applied+dropped {
		t.Fatalf("books: offered %d, applied %d, dropped %d", offered, applied, dropped)
	}
	if errs := m.LegacyErrors(); len(errs) != 0 {
		t.Fatalf("the old store failed: %v", errs)
	}
}

var errOldDown = errors.New("old store down")

// The old store's errors as the caller gets them, and a closed handle.
func TestMigrationErrors(t *testing.T) {
	ctx := context.Background()
	shop := migShop()
	c, it := stocked(t, nil, shop, 1, 10)
	m := openMigration(t, c, reserve.LegacyFunc(func(op reserve.Op, shop uint64, tok string, item, loc uint64, qty int64, ttl time.Duration) error {
		switch tok {
		case "refused":
			return fmt.Errorf("redis: stock:%d:%d is 0: %w", item, loc, reserve.ErrOutOfStock)
		case "claimed":
			return reserve.ErrClaimed
		case "down":
			return fmt.Errorf("redis: %w", errOldDown)
		case "panics":
			panic("the old store panics")
		case "ttl":
			if ttl != 1500*time.Millisecond || qty != 3 {
				return fmt.Errorf("ttl %v, quantity %d", ttl, qty)
			}
		}
		return nil
	}))
	mustNil(t, "accepted", m.ReserveOne(ctx, shop, "ok", it, 1, 1, 0))
	mustNil(t, "ttl", m.ReserveOne(ctx, shop, "ttl", it, 1, 3, 1500*time.Millisecond))
	e := wantCode(t, m.ReserveOne(ctx, shop, "refused", it, 1, 1, 0), reserve.ErrOutOfStock)
	if !e.Expected() || !strings.Contains(e.Message, fmt.Sprintf("stock:%d:1 is 0", it)) {
		t.Fatalf("refused: %#v", e)
	}
	wantCode(t, m.Claim(ctx, shop, "claimed"), reserve.ErrClaimed)
	err := m.Release(ctx, shop, "down")
	if e := wantCode(t, err, reserve.ErrDB); e.Expected() || !errors.Is(err, errOldDown) || !strings.Contains(e.Message, "old store down") {
		t.Fatalf("a failing old store: %#v", err)
	}
	err = m.ReserveOne(ctx, shop, "panics", it, 1, 1, 0)
	if e := wantCode(t, err, reserve.ErrDB); !strings.Contains(e.Message, "panicked: the old store panics") {
		t.Fatalf("a panicking old store: %#v", e)
	}
	if errs := m.LegacyErrors(); len(errs) != 2 || !errors.Is(errs[0], errOldDown) {
		t.Fatalf("LegacyErrors: %v", errs)
	}
	// refused before any store is asked, at every stage
	if err := m.ReserveOne(ctx, shop, "", it, 1, 1, 0); !errors.Is(err, reserve.ErrToken) || !errors.Is(err, fs.ErrInvalid) {
		t.Fatalf("empty token: %v", err)
	}
	wantCode(t, m.ReserveOne(ctx, shop, "neg-ttl", it, 1, 1, -time.Second), reserve.ErrQuantity)
	wantCode(t, m.SetRefresh(time.Millisecond), reserve.ErrInvalid)
	if _, err := m.Stat(shop, false, reserve.MigrationStat(99)); !errors.Is(err, reserve.ErrInvalid) {
		t.Fatalf("an unknown stat: %v", err)
	}

	// at shadow a failing old store is counted, not compared
	setStage(t, shop, reserve.StageShadow)
	follow(t, m, shop, reserve.StageShadow)
	wantCode(t, m.Claim(ctx, shop, "down"), reserve.ErrDB)
	if n := migStat(t, m, shop, reserve.MigOldFailed); n != 1 {
		t.Fatalf("old failed: %d, want 1", n)
	}

	mustNil(t, "remove the old store", m.SetLegacy(nil))
	e = wantCode(t, m.ReserveOne(ctx, shop, "gone", it, 1, 1, 0), reserve.ErrInvalid)
	if !strings.Contains(e.Message, "SetLegacy") {
		t.Fatalf("no old store: %#v", e)
	}
	mustNil(t, "close", m.Close())
	mustNil(t, "close again", m.Close())
	if err := m.ReserveOne(ctx, shop, "closed", it, 1, 1, 0); !errors.Is(err, reserve.ErrClosed) {
		t.Fatalf("a closed handle: %v", err)
	}
	if _, err := m.Stage(shop); !errors.Is(err, reserve.ErrClosed) {
		t.Fatalf("a closed handle's stage: %v", err)
	}
	// the Conn goes on without it
	mustNil(t, "the Conn after the handle", c.ReserveOne(ctx, shop, "after", it, 1, 1, 0))
}

// Monitoring goroutines read the handle while checkouts go through it and
// the handle's thread calls the old store.
func TestMigrationConcurrentReaders(t *testing.T) {
	ctx := context.Background()
	shop := migShop()
	c, it := stocked(t, nil, shop, 1, 1000)
	old := newOldStore(1000)
	m := openMigration(t, c, old)
	setStage(t, shop, reserve.StagePrimary)
	follow(t, m, shop, reserve.StagePrimary)
	stop := make(chan struct{})
	var readers sync.WaitGroup
	for i := 0; i < 2; i++ {
		readers.Add(1)
		go func() {
			defer readers.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := m.Prometheus(); err != nil {
					t.Error(err)
					return
				}
				if _, err := m.Stat(shop, false, reserve.MigOffered); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	var buyers sync.WaitGroup
	for g := 0; g < 4; g++ {
		buyers.Add(1)
		go func(g int) {
			defer buyers.Done()
			for i := 0; i < 10; i++ {
				tok := fmt.Sprintf("g%d-%d", g, i)
				if err := m.ReserveOne(ctx, shop, tok, it, 1, 1, 0); err != nil {
					t.Error(err)
					return
				}
				if err := m.Claim(ctx, shop, tok); err != nil {
					t.Error(err)
					return
				}
			}
		}(g)
	}
	buyers.Wait()
	drain(t, m)
	close(stop)
	readers.Wait()
	old.mu.Lock()
	defer old.mu.Unlock()
	if old.stock != 960 || len(old.holds) != 40 {
		t.Fatalf("the old store kept current: stock %d, %d holds", old.stock, len(old.holds))
	}
	for tok, h := range old.holds {
		if h.state != "claimed" {
			t.Fatalf("%s %s in the old store", tok, h.state)
		}
	}
}
