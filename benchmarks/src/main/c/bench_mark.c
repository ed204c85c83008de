/*
 * bench_mark.c: libbenchmark.so, bench_mark.h's marker for the Java benchmarks (dev.rdma.benchmarks.InsnMark calls
 * bench_mark_label through an FFM downcall, only when BENCH_INSNS=1), and, with -DBENCH_MARK_MAIN, the program
 * bench_mark (`bench_mark LABEL`: one mark, for scripts; `bench_mark --loop N`: the self-test of scripts/bench's
 * instruction-count mode, a mark, N iterations of a loop of 2 instructions, a mark).
 */
#include <stdio.h>

#include "bench_mark.h"

__attribute__((visibility("default"))) void bench_mark_label(const char *label) {
	bench_mark_always(label);
}

#ifdef BENCH_MARK_MAIN
int main(int argc, char **argv) {
	if (argc == 3 && !strcmp(argv[1], "--loop")) {
		long n = atol(argv[2]);
		char b[64];
		snprintf(b, sizeof b, "B case=insns_check impl=check rt=%ld", n);
		bench_mark_always(b);
		/* exactly 2 instructions per iteration (dec, jnz) when n >= 1 */
		if (n > 0) __asm__ volatile("1: dec %0\n\tjnz 1b" : "+r"(n));
		bench_mark_always("E");
		return 0;
	}
	if (argc != 2) {
		fprintf(stderr, "usage: bench_mark LABEL | bench_mark --loop N\n");
		return 2;
	}
	bench_mark_always(argv[1]);
	return 0;
}
#endif
