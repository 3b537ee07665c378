# The binary-log check (tests/binlog/): rsv_open against a server that
# writes a binary log, in STATEMENT, ROW and MIXED format.  It starts a
# second throwaway server of its own (--log-bin); make check runs it.
CHECK_EXTRA += tests/binlog/run.sh

.PHONY: check-binlog
check-binlog: lib
	tests/binlog/run.sh

# The older names of the targets above.
.PHONY: binlog-test
binlog-test: check-binlog
