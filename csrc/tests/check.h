/* A tiny test runner: CHECK records failures, the runner prints
 * "N passed, N failed" and exits non-zero on any failure. */
#ifndef TNRT_CHECK_H
#define TNRT_CHECK_H
#include <stdio.h>
#include <string.h>

static int g_failed_checks, g_tests_passed, g_tests_failed;

#define CHECK(cond)                                                              \
  do {                                                                           \
    if (!(cond)) {                                                               \
      fprintf(stderr, "  %s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      g_failed_checks++;                                                         \
    }                                                                            \
  } while (0)

#define RUN(test)                          \
  do {                                     \
    int before = g_failed_checks;          \
    test();                                \
    if (g_failed_checks == before)         \
      g_tests_passed++;                    \
    else {                                 \
      g_tests_failed++;                    \
      fprintf(stderr, "FAIL %s\n", #test); \
    }                                      \
  } while (0)

#define REPORT(name)                                                           \
  (printf("%s: %d passed, %d failed\n", name, g_tests_passed, g_tests_failed), \
   g_tests_failed ? 1 : 0)
#endif
