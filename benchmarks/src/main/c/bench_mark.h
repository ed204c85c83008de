/*
 * bench_mark.h: the guest's side of scripts/bench's instruction-count mode (BENCH_INSNS=1, insn_plugin.c): a
 * labelled marker at the boundaries of a measured window. Off (one getenv, then one load and branch per call)
 * unless the environment has BENCH_INSNS=1: a normal run executes no marker instruction.
 *
 *   bench_mark("B case=xdev impl=c rt=500");   a group of windows begins (rt: round trips per window)
 *   bench_mark("N");   a window boundary: closes the window opened by the previous N or R, opens the next
 *   bench_mark("P");   closes the window (work up to the next R is outside every window)
 *   bench_mark("R");   opens a window
 *   bench_mark("E");   the group ends
 *
 * The plugin receives the label as bits (one marker instruction per bit) and leaves the instructions of that
 * transmission out of its counts, then writes one line at the MARK instruction. Static definitions: included by
 * one source file per program; bench_mark.c builds the same function into libbenchmark.so for the Java benchmarks
 * (dev.rdma.benchmarks.InsnMark).
 */
#ifndef BENCH_MARK_H
#define BENCH_MARK_H

#include <stdlib.h>
#include <string.h>

static int bench_mark_on = -1;

static inline int bench_mark_enabled(void) {
	if (bench_mark_on < 0) {
		const char *v = getenv("BENCH_INSNS");
		bench_mark_on = v && !strcmp(v, "1");
	}
	return bench_mark_on;
}

/* the marker instructions (insn_plugin.c): xchg of a register with itself, emitted as bytes */
#define BENCH_MARK_START() __asm__ volatile(".byte 0x48,0x87,0xf6" ::: "memory")
#define BENCH_MARK_BIT0() __asm__ volatile(".byte 0x48,0x87,0xd2" ::: "memory")
#define BENCH_MARK_BIT1() __asm__ volatile(".byte 0x48,0x87,0xdb" ::: "memory")
#define BENCH_MARK_MARK() __asm__ volatile(".byte 0x48,0x87,0xc9" ::: "memory")

/* Sends label (may be NULL: no label) and marks; does nothing unless BENCH_INSNS=1. */
static __attribute__((noinline, unused)) void bench_mark_always(const char *label) {
	BENCH_MARK_START();
	for (const unsigned char *p = (const unsigned char *) (label ? label : ""); *p; p++) {
		for (int b = 7; b >= 0; b--) {
			if ((*p >> b) & 1) BENCH_MARK_BIT1();
			else BENCH_MARK_BIT0();
		}
	}
	BENCH_MARK_MARK();
}

static inline __attribute__((unused)) void bench_mark(const char *label) {
	if (bench_mark_enabled()) bench_mark_always(label);
}

#endif
