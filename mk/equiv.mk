# The two engine paths held to each other: tests/check_equiv.c runs the
# same seeded random calls through the schema's procedures and through
# statements only, and compares every answer and row (docs/testing.md,
# "The two engine paths").
#
#   make check-equiv           the suite as make check runs it: 3 sequences
#                              of 100 steps, then buyer threads on both paths
#   make check-equiv-long      EQUIV_SEQUENCES (default 10) sequences of
#                              EQUIV_STEPS (default 1000) steps, and
#                              EQUIV_OPS (default 200) calls per buyer thread
#                              (20-40 s per sequence on two cores)
#   make check-equiv-selftest  the suite made to fail by schemas with one
#                              procedure changed (tests/equiv-selftest.sh)
#
# RSV_EQUIV_SEED=N repeats a run (every run prints its seed);
# RSV_EQUIV_STRICT=1 fails on the differences the suite knows and prints.
# make check runs the suite (it is one of tests/check_*.c) and the
# self-test.

CHECK_EXTRA += tests/equiv-selftest.sh

EQUIV_SEQUENCES ?= 10
EQUIV_STEPS ?= 1000
EQUIV_OPS ?= 200

.PHONY: check-equiv check-equiv-long check-equiv-selftest

check-equiv: deps
	@$(MAKE) --no-print-directory lib $(B)/tests/check_equiv
	tools/mariadb.sh run $(B)/tests/check_equiv

check-equiv-long: deps
	@$(MAKE) --no-print-directory lib $(B)/tests/check_equiv
	RSV_EQUIV_SEQUENCES=$(EQUIV_SEQUENCES) RSV_EQUIV_STEPS=$(EQUIV_STEPS) \
	    RSV_EQUIV_OPS=$(EQUIV_OPS) tools/mariadb.sh run $(B)/tests/check_equiv

check-equiv-selftest: deps
	@$(MAKE) --no-print-directory lib $(B)/tests/check_equiv
	RSV_BUILD=$(B) tools/mariadb.sh run tests/equiv-selftest.sh
