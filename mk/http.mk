# mk/http.mk - the HTTP checkout example (examples/http_*.c: a server on
# libuv worth copying, and the flash sale `make demo` runs against it) and
# its test, driven by wrk.  Included by the top-level Makefile (-include
# mk/*.mk).
#
#   make build/examples/http_checkout   the server and the demo's sale
#   make check-http        tests/http-test.sh against a throwaway MariaDB:
#                         bad input, limits, timeouts, clients that hang
#                         up, then two load phases with wrk (keep-alive
#                         reserve -> claim/release) checked against the
#                         tables and the server's memory (make check runs
#                         it)
#   make check-http-long   the same with longer, wider load phases
#   make check-http-asan   the same with the example, the library and
#                         rsv-admin built with AddressSanitizer and
#                         UBSan (in $(ASAN_B), as make check-asan), the
#                         server's leak check at exit instead of the
#                         memory check
#
# wrk and curl are Debian packages, installed through tools/deps.sh.

HTTP_SRC := examples/http_main.c examples/http_checkout.c examples/http_request.c examples/http_sale.c
HTTP_HDR := examples/http_checkout.h examples/http_request.h examples/http_sale.h
HTTP_PACKAGES := wrk curl

.PHONY: http-deps check-http check-http-long check-http-asan

http-deps:
	@tools/deps.sh packages $(HTTP_PACKAGES)

$(B)/examples/http_checkout: $(HTTP_SRC) $(HTTP_HDR) include/reserve.h include/reserve/libuv.h $(B)/libreserve.so | $(B)/examples nonblock-deps
	$(CC) $(REAL_CFLAGS) $(UV_CFLAGS) $(HTTP_SRC) -o $@ $(REAL_LDFLAGS) -L$(B) -Wl,-rpath,$(CURDIR)/$(B) -lreserve $(MARIADB_LIBS) $(UV_LIBS)

CHECK_EXTRA_BUILD += http-deps $(B)/examples/http_checkout $(B)/rsv-admin
CHECK_EXTRA += tests/http-test.sh

HTTP_TEST_DEPS := lib http-deps $(B)/examples/http_checkout $(B)/rsv-admin

check-http: $(HTTP_TEST_DEPS)
	tools/mariadb.sh run tests/http-test.sh

check-http-long: $(HTTP_TEST_DEPS)
	HTTP_LOAD_SECONDS=60 HTTP_LOAD_CONNECTIONS=256 tools/mariadb.sh run tests/http-test.sh

# The variables of mk/sanitize.mk; the server's sanitizer reports go to
# its log, which the test prints when the server does not exit 0.
check-http-asan: deps http-deps
	@$(MAKE) --no-print-directory B=$(ASAN_B) SAN_CFLAGS="$(SAN_FLAGS)" \
	    SAN_LDFLAGS="$(SAN_FLAGS)" CC="$(ASAN_CC)" \
	    lib $(ASAN_B)/examples/http_checkout $(ASAN_B)/rsv-admin
	$(ASAN_ENV) RSV_BUILD=$(ASAN_B) HTTP_MEMORY_CHECK=0 tools/mariadb.sh run tests/http-test.sh

# The older names of the targets above.
.PHONY: http-test-long http-test-asan http-test
http-test-long: check-http-long
http-test-asan: check-http-asan
http-test: check-http
