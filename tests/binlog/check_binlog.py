"""rsv_open and the binary log format.

Runs against a server started with --log-bin (tests/binlog/run.sh):
statement-based replication of SKIP LOCKED / LIMIT statements is unsafe, so
rsv_open must refuse binlog_format=STATEMENT with RSV_ESERVER and a message
naming the setting; ROW and MIXED are accepted.  The check reads the session's format, so one server
covers every case.
"""
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bindings", "python"))
import libreserve as rsv  # noqa: E402

SOCK = os.environ["RSV_TEST_SOCKET"]
DB = "rsvbinlog_%d" % os.getpid()


def connect(fmt):
    c = rsv.Connection(unix_socket=SOCK, user="root", db=DB)
    c.execute("SET SESSION binlog_format = '%s'" % fmt)
    return c


class BinlogFormat(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        with rsv.Connection(unix_socket=SOCK, user="root") as c:
            if c.scalar_int("SELECT @@log_bin") != 1:
                raise RuntimeError("the server must run with --log-bin")
            c.execute("CREATE DATABASE %s" % DB)
            c.select_db(DB)
            c.execute_file(rsv.find_schema())

    @classmethod
    def tearDownClass(cls):
        with rsv.Connection(unix_socket=SOCK, user="root") as c:
            c.execute("DROP DATABASE IF EXISTS %s" % DB)

    def test_statement_format_is_refused(self):
        with connect("STATEMENT") as c:
            with self.assertRaises(rsv.UnsupportedServer) as e:
                rsv.Context(c)
            self.assertEqual(e.exception.code, rsv.ESERVER)
            self.assertIn("binlog_format=STATEMENT", str(e.exception))

    def test_row_and_mixed_are_accepted(self):
        for fmt in ("ROW", "MIXED"):
            with connect(fmt) as c:
                with rsv.Context(c) as ctx:
                    shop = os.getpid() + (1 if fmt == "ROW" else 2)
                    ctx.stock_set(shop, 1, 1, 3)
                    ctx.reserve_one(shop, b"binlog-" + fmt.encode(), 1, 1, 2)
                    ctx.claim(shop, b"binlog-" + fmt.encode())


if __name__ == "__main__":
    unittest.main(verbosity=2)
