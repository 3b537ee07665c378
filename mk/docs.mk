# The documentation matches the code, in make check:
#   tests/readme-test.sh    the README's minimal program is
#                           examples/minimal.c word for word, and it runs
#                           as the README says
#   tests/manpages-test.py  every function the header declares has a man
#                           page whose SYNOPSIS gives the same prototype

CHECK_EXTRA += tests/readme-test.sh tests/manpages-test.py
