/*
 * insn_plugin.c: a QEMU TCG plugin (API version 1, QEMU 7.2) that counts the guest's executed instructions and
 * writes the counts to a host file each time the guest executes a marker instruction: the deterministic mode of
 * scripts/bench (BENCH_INSNS=1, docs/benchmarks.md "Instructions per message").
 *
 *   qemu-system-x86_64 ... -accel tcg,thread=single -plugin FILE/insn_plugin.so,out=HOST_FILE[,profile=on]
 *
 * Counting: an inline add of the block's instruction count at the start of every translated block, into one of
 * two global counters, user (block address below 2^63) and kernel (above: x86-64's kernel half). Single-threaded
 * TCG runs every vCPU on one host thread, so the plain adds are exact (under multi-threaded TCG they would race).
 * A block left early by a guest exception (a page fault in its middle) counts its whole length: the counts are
 * deterministic for the same guest work, not exact to the instruction.
 *
 * Markers: four forms of xchg of a 64-bit register with itself, which do nothing and which compilers never emit
 * (they emit nop):
 *   48 87 f6  xchg %rsi,%rsi   label start
 *   48 87 d2  xchg %rdx,%rdx   label bit 0
 *   48 87 db  xchg %rbx,%rbx   label bit 1
 *   48 87 c9  xchg %rcx,%rcx   MARK: write "mark SEQ total=T user=U kernel=K vcpu=V label=TEXT"
 * bench_mark.h sends a label (its bytes, most significant bit first) between a label start and the MARK. The
 * instructions executed between a label start and its MARK (the label's transmission, on every vCPU) are left out
 * of all the counts written, so a label costs the measured window nothing; a MARK counts the instructions before
 * it only (the rest of its block is subtracted). Only user-mode markers count.
 *
 * profile=on: every block also counts its executions; a MARK whose label starts with "B " zeroes them, one whose
 * label is "E" (or starts with "E ") writes "prof SEQ VADDR INSNS" for every block address that executed in between (the
 * instructions of all the blocks starting at that address: user addresses of different processes fall together).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qemu_plugin_v1.h"

QEMU_PLUGIN_EXPORT int qemu_plugin_version = 1;

enum { K_START = 1, K_BIT0, K_BIT1, K_MARK };

static uint64_t n_user, n_kernel;     /* executed instructions (inline adds) */
static uint64_t hid_user, hid_kernel; /* the labels' transmissions, left out */
static uint64_t lab_user, lab_kernel;
static int in_label;
static char label[1024];
static size_t label_len;
static unsigned bits, cur;
static uint64_t seq;
static FILE *out;
static int profile;

struct tbp {
	uint64_t vaddr;
	uint64_t n;
	uint64_t count;
};
static struct tbp **tbs;
static size_t ntbs, captbs;

static int cmp_vaddr(const void *a, const void *b) {
	uint64_t x = (*(struct tbp *const *) a)->vaddr, y = (*(struct tbp *const *) b)->vaddr;
	return (x > y) - (x < y);
}

static void profile_mark(void) {
	if (!strncmp(label, "B ", 2)) {
		for (size_t i = 0; i < ntbs; i++) tbs[i]->count = 0;
	} else if (label[0] == 'E' && (label[1] == 0 || label[1] == ' ')) {
		qsort(tbs, ntbs, sizeof *tbs, cmp_vaddr);
		for (size_t i = 0; i < ntbs;) {
			uint64_t va = tbs[i]->vaddr, sum = 0;
			for (; i < ntbs && tbs[i]->vaddr == va; i++) sum += tbs[i]->count * tbs[i]->n;
			if (sum) fprintf(out, "prof %" PRIu64 " %" PRIx64 " %" PRIu64 "\n", seq, va, sum);
		}
		fflush(out);
	}
}

static void on_marker(unsigned int vcpu, void *userdata) {
	uintptr_t v = (uintptr_t) userdata;
	unsigned kind = v & 0xff;
	uint64_t u = n_user - (v >> 8), k = n_kernel; /* before this instruction */
	switch (kind) {
	case K_START:
		in_label = 1;
		lab_user = u;
		lab_kernel = k;
		label_len = 0;
		bits = cur = 0;
		break;
	case K_BIT0:
	case K_BIT1:
		if (!in_label) break;
		cur = (cur << 1) | (kind == K_BIT1);
		if (++bits == 8) {
			if (label_len < sizeof label - 1) label[label_len++] = (char) cur;
			bits = cur = 0;
		}
		break;
	case K_MARK:
		if (in_label) {
			hid_user += u - lab_user;
			hid_kernel += k - lab_kernel;
			in_label = 0;
		} else {
			label_len = 0;
		}
		label[label_len] = 0;
		u -= hid_user;
		k -= hid_kernel;
		fprintf(out, "mark %" PRIu64 " total=%" PRIu64 " user=%" PRIu64 " kernel=%" PRIu64 " vcpu=%u label=%s\n", ++seq,
			u + k, u, k, vcpu, label);
		fflush(out);
		if (profile) profile_mark();
		break;
	}
}

static void tb_trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb) {
	(void) id;
	size_t n = qemu_plugin_tb_n_insns(tb);
	uint64_t va = qemu_plugin_tb_vaddr(tb);
	int kernel = (int) (va >> 63);
	qemu_plugin_register_vcpu_tb_exec_inline(tb, QEMU_PLUGIN_INLINE_ADD_U64, kernel ? &n_kernel : &n_user, n);
	if (profile) {
		struct tbp *p = malloc(sizeof *p);
		if (p && (ntbs < captbs || (tbs = realloc(tbs, (captbs = captbs ? 2 * captbs : 65536) * sizeof *tbs)))) {
			p->vaddr = va;
			p->n = n;
			p->count = 0;
			tbs[ntbs++] = p;
			qemu_plugin_register_vcpu_tb_exec_inline(tb, QEMU_PLUGIN_INLINE_ADD_U64, &p->count, 1);
		}
	}
	if (kernel) return;
	for (size_t i = 0; i < n; i++) {
		struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
		if (qemu_plugin_insn_size(insn) != 3) continue;
		const unsigned char *b = qemu_plugin_insn_data(insn);
		if (b[0] != 0x48 || b[1] != 0x87) continue;
		unsigned kind = b[2] == 0xc9 ? K_MARK : b[2] == 0xd2 ? K_BIT0 : b[2] == 0xdb ? K_BIT1 : b[2] == 0xf6 ? K_START : 0;
		if (kind)
			qemu_plugin_register_vcpu_insn_exec_cb(insn, on_marker, QEMU_PLUGIN_CB_NO_REGS,
				(void *) (uintptr_t) (kind | (uint64_t) (n - 1 - i) << 8));
	}
}

static void at_exit(qemu_plugin_id_t id, void *userdata) {
	(void) id;
	(void) userdata;
	fprintf(out, "exit total=%" PRIu64 " user=%" PRIu64 " kernel=%" PRIu64 " hidden=%" PRIu64 " marks=%" PRIu64 "\n",
		n_user + n_kernel, n_user, n_kernel, hid_user + hid_kernel, seq);
	fclose(out);
}

QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc, char **argv) {
	const char *path = NULL;
	for (int i = 0; i < argc; i++) {
		if (!strncmp(argv[i], "out=", 4)) path = argv[i] + 4;
		else if (!strcmp(argv[i], "profile=on")) profile = 1;
		else if (strcmp(argv[i], "profile=off")) {
			fprintf(stderr, "insn_plugin: unknown argument %s (out=FILE, profile=on|off)\n", argv[i]);
			return 1;
		}
	}
	if (!path) {
		fprintf(stderr, "insn_plugin: no out=FILE argument\n");
		return 1;
	}
	if (!(out = fopen(path, "w"))) {
		perror(path);
		return 1;
	}
	fprintf(out, "# insn_plugin: target=%s api=%d..%d system=%d vcpus=%d profile=%d\n", info->target_name,
		info->version.min, info->version.cur, info->system_emulation,
		info->system_emulation ? info->system.smp_vcpus : 1, profile);
	fflush(out);
	qemu_plugin_register_vcpu_tb_trans_cb(id, tb_trans);
	qemu_plugin_register_atexit_cb(id, at_exit, NULL);
	return 0;
}
