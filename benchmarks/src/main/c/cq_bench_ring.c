/*
 * libcqbench_ring.so: a completion queue without a device, for the ring_* rows of docs/benchmarks.md.
 *
 * Its poll functions do per call what a user-space provider such as Soft-RoCE does (the kernel writes completions to
 * a ring shared with the process, so polling never enters the kernel): take the CQ's spin lock, load the producer
 * index with acquire ordering, copy one 48-byte struct ibv_wc per completion, store the consumer index with release
 * ordering, unlock. Here the ring lives in process memory and ring_fill() plays the kernel's part.
 *
 * The struct handed out is a real struct ibv_cq_ex (its context's ops.poll_cq and its iterator and reader pointers
 * set), so the C program polls it with the verbs.h inlines (ibv_poll_cq, ibv_start_poll, ibv_wc_read_*) and the Java
 * binding with its own poll paths, both ending in the same functions below. The pair of measurements then isolates
 * the caller's cost - C or Java - on any CPU, including the host's own one, where there is no RDMA device.
 * Written for this benchmark; not a provider's source.
 */
#include <errno.h>
#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct ring_cq {
    struct ibv_cq_ex ex;    /* first member: the address handed out is the struct ibv_cq_ex * and struct ibv_cq * */
    struct ibv_context ctx; /* ex.context: its ops.poll_cq is what ibv_poll_cq calls */
    pthread_spinlock_t lock;
    uint32_t mask;
    uint32_t consumer;
    uint32_t producer;         /* written by ring_fill (release), read by the poll functions (acquire) */
    const struct ibv_wc *cur;  /* the iterator's current completion; NULL when there is none */
    uint64_t next_wr_id;
    struct ibv_wc *slots;
};

struct ring_cq *ring_create(int min_entries);
void ring_fill(struct ring_cq *r, int n);
void ring_destroy(struct ring_cq *r);
/* ibv_destroy_cq's signature, for the binding's CQ object over a ring: the ring itself is freed by ring_destroy */
int ring_destroy_cq(struct ibv_cq *cq);

static inline struct ring_cq *ring_of(void *cq)
{
    return (struct ring_cq *)cq;
}

static inline int ring_empty(const struct ring_cq *r)
{
    return r->consumer == __atomic_load_n(&r->producer, __ATOMIC_ACQUIRE);
}

static inline void ring_advance(struct ring_cq *r)
{
    __atomic_store_n(&r->consumer, r->consumer + 1, __ATOMIC_RELEASE);
}

static int ring_poll_cq(struct ibv_cq *cq, int num_entries, struct ibv_wc *wc)
{
    struct ring_cq *r = ring_of(cq);
    int n = 0;
    pthread_spin_lock(&r->lock);
    while (n < num_entries && !ring_empty(r)) {
        memcpy(&wc[n++], &r->slots[r->consumer & r->mask], sizeof *wc);
        ring_advance(r);
    }
    pthread_spin_unlock(&r->lock);
    return n;
}

/* Points the iterator at the oldest completion; 0 when the ring is empty. */
static int ring_current(struct ring_cq *r)
{
    if (ring_empty(r)) {
        r->cur = NULL;
        return 0;
    }
    r->cur = &r->slots[r->consumer & r->mask];
    r->ex.wr_id = r->cur->wr_id;
    r->ex.status = r->cur->status;
    return 1;
}

static int ring_start_poll(struct ibv_cq_ex *cq, struct ibv_poll_cq_attr *attr)
{
    struct ring_cq *r = ring_of(cq);
    (void)attr;
    pthread_spin_lock(&r->lock);
    if (!ring_current(r)) {
        pthread_spin_unlock(&r->lock);
        return ENOENT;
    }
    return 0;
}

static int ring_next_poll(struct ibv_cq_ex *cq)
{
    struct ring_cq *r = ring_of(cq);
    ring_advance(r);
    return ring_current(r) ? 0 : ENOENT;
}

static void ring_end_poll(struct ibv_cq_ex *cq)
{
    struct ring_cq *r = ring_of(cq);
    if (r->cur)
        ring_advance(r);
    r->cur = NULL;
    pthread_spin_unlock(&r->lock);
}

static enum ibv_wc_opcode ring_read_opcode(struct ibv_cq_ex *cq) { return ring_of(cq)->cur->opcode; }
static uint32_t ring_read_vendor_err(struct ibv_cq_ex *cq) { return ring_of(cq)->cur->vendor_err; }
static uint32_t ring_read_byte_len(struct ibv_cq_ex *cq) { return ring_of(cq)->cur->byte_len; }
static __be32 ring_read_imm_data(struct ibv_cq_ex *cq) { return ring_of(cq)->cur->imm_data; }
static uint32_t ring_read_qp_num(struct ibv_cq_ex *cq) { return ring_of(cq)->cur->qp_num; }
static uint32_t ring_read_src_qp(struct ibv_cq_ex *cq) { return ring_of(cq)->cur->src_qp; }
static unsigned int ring_read_wc_flags(struct ibv_cq_ex *cq) { return ring_of(cq)->cur->wc_flags; }
static uint32_t ring_read_slid(struct ibv_cq_ex *cq) { return ring_of(cq)->cur->slid; }
static uint8_t ring_read_sl(struct ibv_cq_ex *cq) { return ring_of(cq)->cur->sl; }
static uint8_t ring_read_dlid_path_bits(struct ibv_cq_ex *cq) { return ring_of(cq)->cur->dlid_path_bits; }

/* A ring of at least min_entries completions (a power of two), empty; NULL when out of memory. */
struct ring_cq *ring_create(int min_entries)
{
    uint32_t size = 1;
    while (size < (uint32_t)min_entries)
        size <<= 1;
    struct ring_cq *r = calloc(1, sizeof *r);
    struct ibv_wc *slots = calloc(size, sizeof *slots);
    if (!r || !slots) {
        free(r);
        free(slots);
        return NULL;
    }
    pthread_spin_init(&r->lock, PTHREAD_PROCESS_PRIVATE);
    r->mask = size - 1;
    r->slots = slots;
    r->ctx.ops.poll_cq = ring_poll_cq;
    r->ex.context = &r->ctx;
    r->ex.cqe = (int)size;
    r->ex.start_poll = ring_start_poll;
    r->ex.next_poll = ring_next_poll;
    r->ex.end_poll = ring_end_poll;
    r->ex.read_opcode = ring_read_opcode;
    r->ex.read_vendor_err = ring_read_vendor_err;
    r->ex.read_byte_len = ring_read_byte_len;
    r->ex.read_imm_data = ring_read_imm_data;
    r->ex.read_qp_num = ring_read_qp_num;
    r->ex.read_src_qp = ring_read_src_qp;
    r->ex.read_wc_flags = ring_read_wc_flags;
    r->ex.read_slid = ring_read_slid;
    r->ex.read_sl = ring_read_sl;
    r->ex.read_dlid_path_bits = ring_read_dlid_path_bits;
    return r;
}

/* Publishes n successful send completions (wr_id counting up), as a provider's kernel half would. Not timed. */
void ring_fill(struct ring_cq *r, int n)
{
    uint32_t p = r->producer;
    for (int i = 0; i < n; i++, p++) {
        struct ibv_wc *w = &r->slots[p & r->mask];
        memset(w, 0, sizeof *w);
        w->wr_id = r->next_wr_id++;
        w->status = IBV_WC_SUCCESS;
        w->opcode = IBV_WC_SEND;
        w->byte_len = 16;
        w->qp_num = 17;
    }
    __atomic_store_n(&r->producer, p, __ATOMIC_RELEASE);
}

void ring_destroy(struct ring_cq *r)
{
    if (!r)
        return;
    pthread_spin_destroy(&r->lock);
    free(r->slots);
    free(r);
}

int ring_destroy_cq(struct ibv_cq *cq)
{
	(void)cq;
	return 0;
}
