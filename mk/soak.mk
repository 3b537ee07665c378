# make soak: the mixed-operation soak at full size (16 threads x
# 2,000 operations; tests/check_soak.c).  make check runs it small.
SOAK_THREADS ?= 16
SOAK_OPS ?= 2000
.PHONY: soak
soak: deps
	@$(MAKE) --no-print-directory lib $(B)/tests/check_soak
	RSV_SOAK_THREADS=$(SOAK_THREADS) RSV_SOAK_OPS=$(SOAK_OPS) tools/mariadb.sh run $(B)/tests/check_soak
