# The README's minimal program (examples/minimal.c): the README shows it
# word for word and it runs as shown (tests/readme-test.sh, in make check).

CHECK_EXTRA += tests/readme-test.sh
