# The documentation matches the code, in make check:
#   tests/readme-test.sh    the README's minimal program is
#                           examples/minimal.c word for word, and it runs
#                           as the README says
#   tests/manpages-test.py  every function the headers declare has a man
#                           page whose SYNOPSIS gives the same prototype
#   tests/docs-names.py     every identifier docs/internals.md names exists
#                           in the code
# (tests/check_decisions runs docs/internals.md's decision table.)

CHECK_EXTRA += tests/readme-test.sh tests/manpages-test.py tests/docs-names.py
