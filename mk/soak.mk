# make soak: the mixed-operation soak (issue 3): many threads, random carts
# in random line order, every operation mixed; must end with
# Innodb_deadlocks unchanged and the audit clean.  Not part of make check
# while it has a known hang (see CHANGELOG).
.PHONY: soak
soak: deps
	@$(MAKE) --no-print-directory lib $(B)/tests/check_semantics
	RSV_SOAK=1 CK_RUN_CASE=soak_without_deadlocks tools/mariadb.sh run $(B)/tests/check_semantics
