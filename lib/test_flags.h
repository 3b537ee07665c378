/*
 * test_flags.h - option flags for the project's own tests and benchmark.
 * Not part of the installed header: they make a context predictable or
 * slower, never more correct, so users have no reason to set them.
 *
 * Only a test build of the library (compiled with -DRSV_TEST_BUILD: the
 * Makefile's build/test/libreserve.so, which the tests link) accepts them
 * in rsv_options.flags; the library that is installed refuses them with
 * RSV_EINVAL like any unknown flag.
 */
#ifndef RSV_TEST_FLAGS_H
#define RSV_TEST_FLAGS_H

/* Read every pool from its lowest id instead of from the context's
 * cursor: the same statements every time, for tests that count them. */
#define TEST_OPT_READ_FROM_BOTTOM 0x4u
/* Never use the schema's procedures: every reserve, claim and release
 * sends its statements one by one (the path of a claim in the caller's
 * transaction, a re-reserve or the slow path), for tests of that path
 * and for comparison. */
#define TEST_OPT_STATEMENTS_ONLY 0x8u

#ifdef RSV_TEST_BUILD
#define TEST_OPT_FLAGS (TEST_OPT_READ_FROM_BOTTOM | TEST_OPT_STATEMENTS_ONLY)
#else
#define TEST_OPT_FLAGS 0u
#endif

#endif
