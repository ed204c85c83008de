/*
 * A provider stand-in for NativeStandInTest: functions with the signatures of struct ibv_cq_ex's iterator and readers
 * and of struct efadv_cq's readers, returning known values and recording each call. Compiled by the test with gcc
 * (dev.rdma.verbs.testing.StandInLibrary). Native code, so the binding calls it through the same critical downcalls
 * as a real provider (a critical downcall must never reach a Java upcall stub).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

static char calls[65536];
static size_t calls_len;

/* what the test sets: the CQ (and efadv_cq) pointer every call must carry, and how many completions remain */
void *si_cq;
void *si_dv;
int si_remaining;
/* calls made with a wrong pointer or a non-zero ibv_poll_cq_attr.comp_mask */
int si_bad;
/* a provider failure: after si_fail_after more start_poll/next_poll calls, the next one returns si_fail_code
 * (once); -1: never */
int si_fail_after = -1;
int si_fail_code;

static void record(const char *slot, const void *p, const void *want)
{
	size_t n = strlen(slot);
	if (calls_len + n + 2 < sizeof(calls)) {
		memcpy(calls + calls_len, slot, n);
		calls_len += n;
		calls[calls_len++] = '\n';
		calls[calls_len] = 0;
	}
	if (p != want)
		si_bad++;
}

const char *si_calls(void) { return calls; }
void si_clear(void) { calls_len = 0; calls[0] = 0; si_bad = 0; si_fail_after = -1; }

/* what start_poll and next_poll return: 0 while completions remain, then ENOENT, unless a failure is due */
static int poll_rc(void)
{
	if (si_fail_after >= 0 && si_fail_after-- == 0)
		return si_fail_code;
	return si_remaining-- > 0 ? 0 : ENOENT;
}

int si_start_poll(void *cq, const uint32_t *attr)
{
	record("start_poll", cq, si_cq);
	if (attr == NULL || *attr != 0)
		si_bad++;
	return poll_rc();
}
int si_next_poll(void *cq) { record("next_poll", cq, si_cq); return poll_rc(); }
void si_end_poll(void *cq) { record("end_poll", cq, si_cq); }

/* IBV_WC_RECV_RDMA_WITH_IMM */
uint32_t si_read_opcode(void *cq) { record("read_opcode", cq, si_cq); return 129; }
uint32_t si_read_vendor_err(void *cq) { record("read_vendor_err", cq, si_cq); return 0x87654321u; }
/* 4294967280 as u32 */
uint32_t si_read_byte_len(void *cq) { record("read_byte_len", cq, si_cq); return 0xFFFFFFF0u; }
/* the provider returns network order: 0x0A0B0C0D on the wire */
uint32_t si_read_imm_data(void *cq) { record("read_imm_data", cq, si_cq); return __builtin_bswap32(0x0A0B0C0Du); }
uint32_t si_read_qp_num(void *cq) { record("read_qp_num", cq, si_cq); return 0x00ABCDEFu; }
uint32_t si_read_src_qp(void *cq) { record("read_src_qp", cq, si_cq); return 0x00123456u; }
/* IBV_WC_WITH_IMM | IBV_WC_GRH */
unsigned int si_read_wc_flags(void *cq) { record("read_wc_flags", cq, si_cq); return 2 | 1; }
/* u32: wider than ibv_wc.slid */
uint32_t si_read_slid(void *cq) { record("read_slid", cq, si_cq); return 0x00012345u; }
uint8_t si_read_sl(void *cq) { record("read_sl", cq, si_cq); return 0xF0; }
uint8_t si_read_dlid_path_bits(void *cq) { record("read_dlid_path_bits", cq, si_cq); return 0x81; }
uint64_t si_read_completion_ts(void *cq) { record("read_completion_ts", cq, si_cq); return 0xF000000000000001ull; }
uint16_t si_read_cvlan(void *cq) { record("read_cvlan", cq, si_cq); return 0xFFFE; }
uint32_t si_read_flow_tag(void *cq) { record("read_flow_tag", cq, si_cq); return 0xCAFEF00Du; }

struct si_tm_info {
	uint64_t tag;
	uint32_t priv;
};
void si_read_tm_info(void *cq, struct si_tm_info *info)
{
	record("read_tm_info", cq, si_cq);
	info->tag = 0x1122334455667788ull;
	info->priv = 0x99AABBCCu;
}
uint64_t si_read_completion_wallclock_ns(void *cq)
{
	record("read_completion_wallclock_ns", cq, si_cq);
	return 1700000000123456789ull;
}

int si_wc_read_sgid(void *dv, uint8_t *gid)
{
	record("wc_read_sgid", dv, si_dv);
	for (int i = 0; i < 16; i++)
		gid[i] = (uint8_t)(0xF0 + i);
	return 0;
}
bool si_wc_is_unsolicited(void *dv) { record("wc_is_unsolicited", dv, si_dv); return true; }

/* struct ibv_wc as verbs.h lays it out (48 bytes) */
struct si_wc {
	uint64_t wr_id;
	uint32_t status, opcode, vendor_err, byte_len, imm_data, qp_num, src_qp;
	unsigned int wc_flags;
	uint16_t pkey_index, slid;
	uint8_t sl, dlid_path_bits;
};
_Static_assert(sizeof(struct si_wc) == 48, "struct ibv_wc is 48 bytes");

/* ibv_context_ops.poll_cq's signature: up to n of the remaining completions, the values of the readers above */
int si_poll_cq(void *cq, int n, struct si_wc *wc)
{
	record("poll_cq", cq, si_cq);
	int i = 0;
	for (; i < n && si_remaining > 0; i++, si_remaining--) {
		memset(&wc[i], 0, sizeof(wc[i]));
		wc[i].wr_id = 0xDEADBEEF00000042ull;
		wc[i].opcode = 129;
		wc[i].vendor_err = 0x87654321u;
		wc[i].byte_len = 0xFFFFFFF0u;
		wc[i].imm_data = __builtin_bswap32(0x0A0B0C0Du);
		wc[i].qp_num = 0x00ABCDEFu;
		wc[i].src_qp = 0x00123456u;
		wc[i].wc_flags = 2 | 1;
		wc[i].slid = 0x2345;
		wc[i].sl = 0xF0;
		wc[i].dlid_path_bits = 0x81;
	}
	return i;
}

/* ibv_destroy_cq's signature: what the binding's CQ object over this memory calls when closed */
int si_destroy_cq(void *cq) { record("destroy_cq", cq, si_cq); return 0; }
