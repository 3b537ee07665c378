"""Tests of libreserve.migrate (the migration handle) against a real server.

Run against the server in $RSV_TEST_SOCKET, like test_libreserve (a
database of their own, dropped at the end); normally started by
run-tests.sh.  The old store is a dict in this process; the stages are
set in rsv_migration_stage as rsv-admin migrate sets them.
"""
import os
import re
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import libreserve as rsv  # noqa: E402
from libreserve import migrate  # noqa: E402
from libreserve.migrate import (Migration, MigrationStat, Stage,  # noqa: E402
                                class_name)

SOCK = os.environ.get("RSV_TEST_SOCKET")
USER = os.environ.get("RSV_TEST_USER", "root")
PASSWORD = os.environ.get("RSV_TEST_PASSWORD")
DB = "rsvpymig_%d" % os.getpid()


def connect(db=DB):
    return rsv.Connection(unix_socket=SOCK, user=USER, password=PASSWORD,
                          db=db)


def setUpModule():
    if not SOCK:
        raise RuntimeError("RSV_TEST_SOCKET is not set: run under "
                           "tools/mariadb.sh run bindings/python/run-tests.sh")
    with connect(db=None) as c:
        c.execute("CREATE DATABASE %s" % DB)
        c.select_db(DB)
        c.execute_file(rsv.find_schema())


def tearDownModule():
    if SOCK and not os.environ.get("RSV_TEST_KEEP_DB"):
        with connect(db=None) as c:
            c.execute("DROP DATABASE IF EXISTS %s" % DB)


class OldStore:
    """Counters and holds in a dict, as the Redis design kept them."""

    def __init__(self, stock):
        self.stock = stock
        self.holds = {}
        self.lock = threading.Lock()
        self.threads = set()

    def __call__(self, op, shop, token, item, loc, qty, ttl_ms):
        with self.lock:
            self.threads.add(threading.get_ident())
            if op == rsv.Op.RESERVE:
                if token in self.holds:
                    return
                if self.stock < qty:
                    raise rsv.OutOfStock(rsv.Code.EOUTOFSTOCK)
                self.stock -= qty
                self.holds[token] = [qty, "held"]
                return
            h = self.holds.get(token)
            if h is None:
                raise rsv.NotFound(rsv.Code.ENOTFOUND)
            if h[1] == "claimed":
                raise rsv.AlreadyClaimed(rsv.Code.ECLAIMED)
            if op == rsv.Op.CLAIM:
                if h[1] == "released":
                    raise rsv.AlreadyReleased(rsv.Code.ERELEASED)
                h[1] = "claimed"
            elif h[1] == "held":
                h[1] = "released"
                self.stock += h[0]


_shop = [0]


class TestMigration(unittest.TestCase):

    def setUp(self):
        _shop[0] += 1
        self.shop = (os.getpid() << 16) + _shop[0]
        self.dsn = rsv.make_dsn(DB, user=USER, password=PASSWORD,
                                socket=SOCK)
        self.ctx = rsv.Context(self.dsn)
        self.ctx.stock_set(self.shop, 1, 1, 10)
        self.adm = connect()

    def tearDown(self):
        self.ctx.close()
        self.adm.close()

    def set_stage(self, stage):
        # rsv-admin migrate's rule: the change row locked first, by its
        # update, until the commit
        self.adm.execute("START TRANSACTION")
        self.adm.execute("UPDATE rsv_migration_change SET changes = changes + 1, changed_at = NOW(6) WHERE id = 1")
        self.adm.execute(
            "INSERT INTO rsv_migration_stage (shop_id, stage, version, "
            "changed_at) SELECT %d, %d, COALESCE(MAX(version), 0) + 1, NOW(6) "
            "FROM rsv_migration_stage ON DUPLICATE KEY UPDATE stage = "
            "VALUES(stage), version = VALUES(version)" % (self.shop, stage))
        self.adm.execute("COMMIT")

    def follow(self, m, stage):
        for _ in range(3000):
            if m.stage(self.shop) == stage:
                return
            time.sleep(0.01)
        self.fail("stage %s never followed" % stage)

    def test_stages_in_python(self):
        old = OldStore(3)
        with Migration(self.ctx, self.dsn, old, refresh_ms=100) as m:
            self.assertEqual(m.stage(self.shop), Stage.OLD)
            m.reserve_one(self.shop, "a", 1, 1, 1)
            self.set_stage(Stage.SHADOW)
            self.follow(m, Stage.SHADOW)
            m.reserve_one(self.shop, "b", 1, 1, 2)
            # the old store's refusal, as its exception
            with self.assertRaises(rsv.OutOfStock):
                m.reserve_one(self.shop, "c", 1, 1, 1)
            m.claim(self.shop, "b")
            self.assertTrue(m.drain())
            self.assertEqual(self.ctx.checkout_status(self.shop, "b").status,
                             rsv.Status.CLAIMED)
            self.assertEqual(
                m.stat(MigrationStat.OLD_REFUSED_NEW_ACCEPTED, self.shop), 1)
            self.assertEqual(m.stat(MigrationStat.BOTH_ACCEPTED), 2)
            self.set_stage(Stage.PRIMARY)
            self.follow(m, Stage.PRIMARY)
            # libreserve answers, with the context's message
            with self.assertRaises(rsv.NotFound):
                m.claim(self.shop, "a")
            self.assertTrue(m.drain())
            self.assertEqual(old.holds[b"a"][1], "held")  # not sent there
            with old.lock:
                old.stock += 5  # a delivery
            m.reserve_one(self.shop, "d", 1, 1, 1)
            self.assertTrue(m.drain())
            self.assertIn(b"d", old.holds)  # kept current ...
            self.assertGreater(len(old.threads), 1)  # ... on the handle's thread
            self.assertIn('libreserve_migration_stage{shop="%d"} 2'
                          % self.shop, m.prometheus())

    def test_shadow_through_a_batcher(self):
        # two threads' handles share one batcher: their shadow calls are
        # its entries, answered and counted as on the handles' own
        old = OldStore(4)
        with rsv.Batcher(self.dsn, connections=1) as b:
            ms = [Migration(self.ctx, self.dsn, old, refresh_ms=100)
                  for _ in range(2)]
            try:
                self.set_stage(Stage.SHADOW)
                for m in ms:
                    self.follow(m, Stage.SHADOW)
                    m.set_batcher(b)

                def buy(m, i):
                    m.reserve_one(self.shop, "t%d" % i, 1, 1, 1)
                    m.claim(self.shop, "t%d" % i)
                ts = [threading.Thread(target=buy, args=(ms[i], i))
                      for i in range(2)]
                for t in ts:
                    t.start()
                for t in ts:
                    t.join()
                with self.assertRaises(rsv.OutOfStock):
                    ms[0].reserve_one(self.shop, "big", 1, 1, 3)
                for m in ms:
                    self.assertTrue(m.drain())
                self.assertEqual(b.stats_get(rsv.Stat.CALLS, rsv.Op.RESERVE),
                                 3)
                self.assertEqual(b.stats_get(rsv.Stat.CALLS, rsv.Op.CLAIM), 2)
                for i in range(2):
                    self.assertEqual(
                        self.ctx.checkout_status(self.shop, "t%d" % i).status,
                        rsv.Status.CLAIMED)
                # libreserve held what the old store refused: given back
                self.assertEqual(
                    self.ctx.checkout_status(self.shop, "big").status,
                    rsv.Status.RELEASED)
                self.assertEqual(
                    sum(m.stat(MigrationStat.BOTH_ACCEPTED) for m in ms), 4)
                self.assertEqual(ms[0].stat(
                    MigrationStat.OLD_REFUSED_NEW_ACCEPTED), 1)
                ms[0].set_batcher(None)
                ms[0].reserve_one(self.shop, "own", 1, 1, 1)
                self.assertTrue(ms[0].drain())
                self.assertEqual(b.stats_get(rsv.Stat.CALLS, rsv.Op.RESERVE),
                                 3)
            finally:
                for m in ms:
                    m.close()

    def test_a_failing_old_store(self):
        def broken(*args):
            raise RuntimeError("the old store is down")
        with Migration(self.ctx, self.dsn, broken, refresh_ms=100) as m:
            with self.assertRaises(rsv.DatabaseError):
                m.reserve_one(self.shop, "x", 1, 1, 1)
            self.assertIsInstance(m.legacy_errors[0], RuntimeError)

    def test_class_names(self):
        # the library's names: the enum's, in lower case, and the labels
        # of the handle's own text
        for st in MigrationStat:
            self.assertEqual(class_name(st), st.name.lower())
        for bad in (len(MigrationStat), -1, 2 ** 32):
            self.assertIsNone(class_name(bad))
        with Migration(self.ctx, self.dsn, OldStore(10), refresh_ms=100) as m:
            self.set_stage(Stage.SHADOW)
            self.follow(m, Stage.SHADOW)
            m.reserve_one(self.shop, "n1", 1, 1, 1)
            self.assertTrue(m.drain())
            labels = re.findall(
                r'^libreserve_migration_calls_total\{shop="%d",class="(\w+)"\}'
                % self.shop, m.prometheus(), re.M)
        self.assertEqual(labels, [class_name(st) for st in MigrationStat
                                  if st != MigrationStat.STAGE_READ_FAILED])

    def test_wraps_the_header(self):
        h = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                         "..", "include", "reserve", "migrate.h")
        if not os.path.exists(h):
            self.skipTest("reserve/migrate.h not found")
        with open(h) as f:
            declared = set(re.findall(r"^RSV_EXTERN [^(]*?\b(rsv_\w+)\(",
                                      f.read(), re.M))
        handover = {n for n in declared
                    if n == "rsv_migrate_route" or n.endswith("_answered")
                    or n.startswith("rsv_migrate_mirror_")}
        self.assertEqual(declared - handover, set(migrate.WRAPPED_FUNCTIONS))

    def test_closed_handle(self):
        m = Migration(self.ctx, self.dsn)
        m.close()
        m.close()
        with self.assertRaises(ValueError):
            m.stage(self.shop)


if __name__ == "__main__":
    unittest.main()
