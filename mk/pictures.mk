# mk/pictures.mk - the pictures of the README and docs/, drawn by
# tests/bench/plot.py from the records committed beside them in docs/img/.
#
#   make pictures     docs/img/bench-headline.svg from
#                     docs/img/bench-quick.txt (the output of a `make
#                     bench-quick` run), and docs/img/sweep-backlog.svg
#                     from docs/img/sweep-backlog.txt, and
#                     docs/img/bench-crowd.svg from docs/img/bench-crowd.txt
#                     (the output of a `make bench-crowd` run)
#   make sweep-backlog-record
#                     record docs/img/sweep-backlog.txt anew (a minute of
#                     load on a throwaway MariaDB), then draw it
#
# To show a new benchmark run: cp build/bench/results-quick.txt
# docs/img/bench-quick.txt && make pictures (a crowd run:
# build/bench/results-crowd.txt to docs/img/bench-crowd.txt).  tests/pictures-test.sh (in
# make check) checks that the committed pictures are what plot.py draws
# from the committed records.

PICTURES := docs/img/bench-headline.svg docs/img/sweep-backlog.svg \
            docs/img/bench-crowd.svg

.PHONY: pictures sweep-backlog-record

pictures: $(PICTURES)

docs/img/bench-headline.svg: docs/img/bench-quick.txt tests/bench/plot.py
	python3 tests/bench/plot.py --headline $< $@

docs/img/bench-crowd.svg: docs/img/bench-crowd.txt tests/bench/plot.py
	python3 tests/bench/plot.py --crowd $< $@

docs/img/sweep-backlog.svg: docs/img/sweep-backlog.txt tests/bench/plot.py
	python3 tests/bench/plot.py --backlog $< $@

sweep-backlog-record: lib http-deps $(B)/examples/http_checkout $(B)/rsv-admin
	B=$(B) tools/mariadb.sh run tests/bench/sweep-backlog.sh docs/img/sweep-backlog.txt
	python3 tests/bench/plot.py --backlog docs/img/sweep-backlog.txt docs/img/sweep-backlog.svg

CHECK_EXTRA += tests/pictures-test.sh
