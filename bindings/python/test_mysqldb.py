"""The README's recipe for a Django application: a claim that joins the
transaction of a mysqlclient (MySQLdb) connection, so that it commits or
rolls back together with the application's order row.

It does what Django's transaction.atomic() does on that connection
(autocommit off, the order row written, commit or rollback), with
mysqlclient itself: Debian's python3-mysqldb, built against MariaDB
Connector/C.  Run by run-tests.sh with an interpreter that has MySQLdb,
against the server in $RSV_TEST_SOCKET, in a database rsvmysqldb_<pid> of
its own, dropped at the end.
"""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import MySQLdb  # noqa: E402

import libreserve as rsv  # noqa: E402

SOCK = os.environ.get("RSV_TEST_SOCKET")
USER = os.environ.get("RSV_TEST_USER", "root")
PASSWORD = os.environ.get("RSV_TEST_PASSWORD") or ""
DB = "rsvmysqldb_%d" % os.getpid()


def mysqldb(db=DB):
    kw = dict(unix_socket=SOCK, user=USER, passwd=PASSWORD)
    if db:
        kw["db"] = db
    return MySQLdb.connect(**kw)


def setUpModule():
    if not SOCK:
        raise RuntimeError("RSV_TEST_SOCKET is not set: run run-tests.sh "
                           "under tools/mariadb.sh run")
    with rsv.Connection(unix_socket=SOCK, user=USER, password=PASSWORD) as c:
        c.execute("CREATE DATABASE %s" % DB)
        c.select_db(DB)
        c.execute_file(rsv.find_schema())
        c.execute("CREATE TABLE orders (token VARCHAR(64) PRIMARY KEY, "
                  "total INT NOT NULL) ENGINE=InnoDB")


def tearDownModule():
    if SOCK and not os.environ.get("RSV_TEST_KEEP_DB"):
        with rsv.Connection(unix_socket=SOCK, user=USER,
                            password=PASSWORD) as c:
            c.execute("DROP DATABASE IF EXISTS %s" % DB)


class TestMySQLdbTransaction(unittest.TestCase):

    def setUp(self):
        self.db = mysqldb()
        self.ctx = rsv.Context(self.db)

    def tearDown(self):
        self.ctx.close()
        self.db.close()

    def orders(self, token):
        other = mysqldb()  # another session: what is committed
        try:
            cur = other.cursor()
            cur.execute("SELECT COUNT(*) FROM orders WHERE token = %s",
                        (token,))
            return cur.fetchone()[0]
        finally:
            other.close()

    def test_same_client_library(self):
        libs = rsv._client_libraries()
        self.assertTrue(libs and all(n.startswith("libmariadb") for n in libs),
                        libs)
        self.assertEqual(self.ctx.connection_handle,
                         rsv.native_handle(self.db))

    def test_claim_commits_and_rolls_back_with_the_order(self):
        ctx, shop = self.ctx, os.getpid()
        ctx.stock_set(shop, 42, 7, 10)
        ctx.reserve_one(shop, "order-1", 42, 7, 2)

        # Django: with transaction.atomic(): Order.objects.create(...);
        # ctx.claim(...); then an exception rolls the block back.
        self.db.autocommit(False)
        cur = self.db.cursor()
        cur.execute("INSERT INTO orders VALUES (%s, %s)", ("order-1", 59))
        ctx.claim(shop, "order-1")
        self.db.rollback()
        self.assertEqual(self.orders("order-1"), 0)
        self.assertIs(ctx.checkout_status(shop, "order-1").status,
                      rsv.Status.HELD)
        self.assertEqual(ctx.stock_get(shop, 42, 7).on_hand, 10)

        # the block again, committed this time
        cur.execute("INSERT INTO orders VALUES (%s, %s)", ("order-1", 59))
        ctx.claim(shop, "order-1")
        self.assertEqual(self.orders("order-1"), 0)  # not yet committed
        self.db.commit()
        self.db.autocommit(True)
        self.assertEqual(self.orders("order-1"), 1)
        self.assertIs(ctx.checkout_status(shop, "order-1").status,
                      rsv.Status.CLAIMED)
        st = ctx.stock_get(shop, 42, 7)
        self.assertEqual((st.on_hand, st.held), (8, 0))
        self.assertEqual(ctx.audit(shop), [])

    def test_calls_that_need_their_own_transaction_say_so(self):
        ctx, shop = self.ctx, os.getpid() + 1
        ctx.stock_set(shop, 1, 1, 3)
        self.db.autocommit(False)
        cur = self.db.cursor()
        cur.execute("INSERT INTO orders VALUES (%s, %s)", ("order-x", 1))
        with self.assertRaises(rsv.InTransaction):
            ctx.reserve_one(shop, "order-x", 1, 1, 1)
        self.db.rollback()
        self.db.autocommit(True)
        self.assertEqual(ctx.stock_get(shop, 1, 1).held, 0)

    def test_bad_handles(self):
        with self.assertRaises(TypeError):
            rsv.native_handle(object())
        closed = mysqldb()
        closed.close()
        with self.assertRaises(rsv.InvalidArgument):
            rsv.Context(closed)


if __name__ == "__main__":
    unittest.main()
