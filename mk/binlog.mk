# The binary-log check (tests/binlog/): rsv_open against a server that
# writes a binary log, in STATEMENT, ROW and MIXED format.  It starts a
# second throwaway server of its own (--log-bin); make check runs it.
CHECK_EXTRA += tests/binlog/run.sh

.PHONY: binlog-test
binlog-test: lib
	tests/binlog/run.sh
