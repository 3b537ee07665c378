#!/usr/bin/env python3
"""The raw-socket cases of tests/http-test.sh, against a running HTTP
checkout server (examples/http_checkout.c): what curl cannot send or does
not show (pipelining, limits, malformed heads, clients that stall or hang
up).  Plain python3.

Usage: http-client.py PORT CASE [ARGS]
  protocol          keep-alive, pipelining, HEAD, HTTP/1.0, 100-continue,
                    and heads the server must refuse (431, 413, 501, 505,
                    400, 415), closing when the framing is lost
  slow-head         a head never finished: answered 408 and closed
  idle              a connection that sends nothing: closed
  hangup SHOP SQL...  with a server of one context: a claim held up by a
                    row lock, requests queued behind it, every client
                    hanging up; the queued requests are dropped unstarted,
                    the claim finishes.  SQL... is the mariadb client's
                    command for the test database.

Prints "ok ..." per check; exits 1 at the first failure ("FAIL ...").
Waits are bounded (60 s) only so that a broken server cannot hang the
test: nothing here depends on how fast anything is.
"""
import json
import socket
import subprocess
import sys
import time

LIMIT_S = 60


class Failed(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Failed(what)
    print("ok   " + what)


def connect(port):
    return socket.create_connection(("127.0.0.1", port), timeout=LIMIT_S)


class Reader:
    """Answers read off one connection, in order."""

    def __init__(self, sock):
        self.sock, self.buf = sock, b""

    def _fill(self):
        data = self.sock.recv(65536)
        self.buf += data
        return bool(data)

    def answer(self, head_only=False):
        """(status, headers, body), or None at EOF before a whole one."""
        while b"\r\n\r\n" not in self.buf:
            if not self._fill():
                return None
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ")[1])
        headers = {}
        for line in lines[1:]:
            k, v = line.split(":", 1)
            headers[k.strip().lower()] = v.strip()
        if status == 100:
            return self.answer(head_only)
        n = 0 if head_only else int(headers.get("content-length", "0"))
        while len(self.buf) < n:
            if not self._fill():
                return None
        body, self.buf = self.buf[:n], self.buf[n:]
        return status, headers, body

    def eof(self):
        """True once the server closed (whatever else it sent first)."""
        try:
            while self._fill():
                pass
        except ConnectionResetError:
            pass
        return True


def form(method, path, body="", extra=""):
    return ("%s %s HTTP/1.1\r\nHost: t\r\n%sContent-Type: "
            "application/x-www-form-urlencoded\r\nContent-Length: %d\r\n\r\n%s"
            % (method, path, extra, len(body), body)).encode()


def once(port, raw):
    """Send raw bytes on a new connection: the first answer, and whether
    the server then closed the connection."""
    s = connect(port)
    s.sendall(raw)
    r = Reader(s)
    a = r.answer()
    closed = a is not None and a[1].get("connection") == "close" and r.eof()
    s.close()
    return a, closed


def stats(port):
    s = connect(port)
    s.sendall(b"GET /stats HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
    a = Reader(s).answer()
    s.close()
    return json.loads(a[2])


def wait_for(port, pred, what):
    deadline = time.monotonic() + LIMIT_S
    while True:
        st = stats(port)
        if pred(st):
            print("ok   " + what)
            return st
        if time.monotonic() > deadline:
            raise Failed("%s (server stats: %s)" % (what, st))
        time.sleep(0.05)


def code_of(a):
    return json.loads(a[2]).get("code") if a and a[2] else None


def case_protocol(port):
    # keep-alive and pipelining: three requests in one write, three
    # answers in order on the same connection
    s = connect(port)
    r = Reader(s)
    s.sendall(b"GET /stats HTTP/1.1\r\nHost: t\r\n\r\n" +
              form("POST", "/release", "shop=1&token=no-such") +
              b"GET /nope HTTP/1.1\r\nHost: t\r\n\r\n")
    got = [r.answer() for _ in range(3)]
    check([a[0] for a in got] == [200, 404, 404] and
          code_of(got[1]) == "RSV_ENOTFOUND" and
          code_of(got[2]) == "not_found",
          "three pipelined requests answered in order on one connection")
    # HEAD: the head of GET, no body, and the connection goes on
    s.sendall(b"HEAD /stats HTTP/1.1\r\nHost: t\r\n\r\n")
    a = r.answer(head_only=True)
    check(a[0] == 200 and int(a[1]["content-length"]) > 0 and a[2] == b"",
          "HEAD /stats: a Content-Length and no body")
    # 100-continue: the client waits for it before sending the body
    s.sendall(form("POST", "/release", "", "Expect: 100-continue\r\n")
              .replace(b"Content-Length: 0", b"Content-Length: 20"))
    while b"\r\n\r\n" not in r.buf:
        r._fill()
    check(r.buf.startswith(b"HTTP/1.1 100 Continue\r\n\r\n"),
          "Expect: 100-continue answered 100 before the body")
    s.sendall(b"shop=1&token=no-such")
    a = r.answer()
    check(a[0] == 404 and code_of(a) == "RSV_ENOTFOUND",
          "... and the request answered once the body came")
    # a bad parameter keeps the connection: its framing is intact
    s.sendall(form("POST", "/claim", "shop=1&token=x&shop=2"))
    a = r.answer()
    check(a[0] == 400 and a[1]["connection"] == "keep-alive" and
          "twice" in json.loads(a[2])["message"],
          "a parameter given twice: 400, connection kept")
    s.sendall(form("POST", "/claim", '{"shop":1}')
              .replace(b"x-www-form-urlencoded", b"json"))
    a = r.answer()
    check(a[0] == 415, "a JSON body: 415 (forms only)")
    s.close()

    # HTTP/1.0 closes unless asked not to
    a, closed = once(port, b"GET /stats HTTP/1.0\r\n\r\n")
    check(a[0] == 200 and closed, "HTTP/1.0: answered, then closed")

    # heads the server must refuse; each closes: the framing is lost
    refused = [
        ("a head over 8 KiB", 431,
         b"GET /stats HTTP/1.1\r\nHost: t\r\nX-Pad: " + b"a" * 9000 +
         b"\r\n\r\n"),
        ("a body over 4 KiB", 413,
         b"POST /claim HTTP/1.1\r\nHost: t\r\nContent-Length: 5000\r\n\r\n"),
        ("Transfer-Encoding: chunked", 501,
         b"POST /claim HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked"
         b"\r\n\r\n0\r\n\r\n"),
        ("HTTP/2.0", 505, b"GET /stats HTTP/2.0\r\nHost: t\r\n\r\n"),
        ("HTTP/1.1 without Host", 400, b"GET /stats HTTP/1.1\r\n\r\n"),
        ("a garbage request line", 400, b"HELLO\r\n\r\n"),
        ("two Content-Lengths", 400,
         b"POST /claim HTTP/1.1\r\nHost: t\r\nContent-Length: 1\r\n"
         b"Content-Length: 2\r\n\r\nab"),
        ("a folded header", 400,
         b"GET /stats HTTP/1.1\r\nHost: t\r\nX-A: b\r\n c\r\n\r\n"),
    ]
    for what, status, raw in refused:
        a, closed = once(port, raw)
        check(a is not None and a[0] == status and closed and
              json.loads(a[2])["ok"] is False,
              "%s: %d with a JSON message, then closed" % (what, status))


def case_slow_head(port):
    before = stats(port)["timeouts"]
    s = connect(port)
    s.sendall(b"POST /reserve HTTP/1.1\r\nHost: t\r\nContent-Le")
    r = Reader(s)
    a = r.answer()
    check(a is not None and a[0] == 408 and r.eof(),
          "a head never finished: 408, then closed")
    s.close()
    check(stats(port)["timeouts"] == before + 1, "... counted as a timeout")


def case_idle(port):
    s = connect(port)
    check(Reader(s).eof(), "a connection that sends nothing: closed")
    s.close()


def case_hangup(port, shop, sql):
    base = stats(port)
    check(base["contexts"] == 1, "the server has one context")

    def call(path, body):
        s = connect(port)
        s.sendall(form("POST", path, body, "Connection: close\r\n"))
        a = Reader(s).answer()
        s.close()
        return a

    a = call("/reserve", "shop=%s&token=hang-claim&item=1&location=1" % shop)
    check(a[0] == 200, "reserved hang-claim")

    # Hold hang-claim's checkout row: its claim then waits for the lock,
    # running on the one context, and everything after it queues.
    lock = subprocess.Popen(sql + ["-N", "-B", "-n"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    try:
        lock.stdin.write(
            "START TRANSACTION;\nSELECT status FROM rsv_checkouts WHERE "
            "shop_id = %s AND checkout_token = 'hang-claim' FOR UPDATE;\n"
            % shop)
        lock.stdin.flush()
        check(lock.stdout.readline().strip() == "1",
              "a session holds hang-claim's checkout row")
        claimer = connect(port)
        claimer.sendall(form("POST", "/claim",
                             "shop=%s&token=hang-claim" % shop))
        wait_for(port, lambda st: st["busy"] == 1,
                 "the claim runs, waiting for the lock")
        queued = []
        for i in range(5):
            q = connect(port)
            q.sendall(form("POST", "/reserve",
                           "shop=%s&token=hang-q%d&item=1&location=1"
                           % (shop, i)))
            queued.append(q)
        wait_for(port, lambda st: st["queued"] == 5,
                 "five reserves wait for the context")
        for q in queued:
            q.close()
        wait_for(port, lambda st: st["queued"] == 0 and
                 st["abandoned"] == base["abandoned"] + 5,
                 "their clients hung up: all five dropped, none started")
        claimer.close()
        wait_for(port, lambda st: st["connections"] == 1,
                 "the claim's client hung up too")
        lock.stdin.write("ROLLBACK;\n")
        lock.stdin.close()
        lock.wait(LIMIT_S)
    finally:
        if lock.poll() is None:
            lock.kill()
            lock.wait()
    st = wait_for(port, lambda st: st["busy"] == 0 and
                  st["unheard"] == base["unheard"] + 1,
                  "the claim finished once the lock was gone, unheard")
    check(st["calls"] == base["calls"] + 2,
          "two calls ran: the reserve and the claim, no queued reserve")
    rows = subprocess.run(
        sql + ["-N", "-B", "-e",
               "SELECT checkout_token, status FROM rsv_checkouts WHERE "
               "shop_id = %s ORDER BY checkout_token" % shop],
        check=True, capture_output=True, text=True).stdout.split("\n")
    check([r for r in rows if r] == ["hang-claim\t2"],
          "in the database: hang-claim claimed, no hang-q checkout")
    a = call("/reserve", "shop=%s&token=hang-after&item=1&location=1" % shop)
    check(a[0] == 200, "the context serves the next request")


def main():
    if len(sys.argv) < 3:
        sys.stderr.write(__doc__)
        return 2
    port, case = int(sys.argv[1]), sys.argv[2]
    cases = {"protocol": case_protocol, "slow-head": case_slow_head,
             "idle": case_idle, "hangup": case_hangup}
    if case not in cases:
        sys.stderr.write(__doc__)
        return 2
    try:
        if case == "hangup":
            case_hangup(port, sys.argv[3], sys.argv[4:])
        else:
            cases[case](port)
    except (Failed, OSError, ValueError, KeyError, IndexError,
            subprocess.SubprocessError) as e:
        print("FAIL %s: %s" % (case, e))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
