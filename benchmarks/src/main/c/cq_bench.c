/*
 * cq_bench: the C baseline of the project's completion-queue benchmarks (docs/benchmarks.md).
 *
 * Measures, on the first RDMA device (or $RDMA_TEST_DEVICE), with a reliable-connected QP connected to itself:
 *   batch_poll     ns per completion to drain a CQ pre-filled with K send completions, ibv_poll_cq batch 1/16/32
 *   ext_iter       the same with the extended CQ iterator, one completion per ibv_start_poll..ibv_end_poll (the
 *                  pattern rdma-core 44's rxe needs and the Java binding uses there), reading wr_id, status, byte_len
 *   ext_copy       the same, reading every standard field into a struct ibv_wc (what the Java batch copy does)
 *   empty_poll     ns per ibv_poll_cq (batch 16) on an empty CQ; empty_ext: ns per ibv_start_poll returning ENOENT
 *   e2e            messages/s of a looped-back ping-pong with events (arm, drain, get_cq_event, ack, re-arm)
 *   e2e_events     the same ping-pong with one completion event per message: get_cq_event, ack, arm, drain until
 *                  empty, and only then post the next message (on rxe a loopback completes inside ibv_post_send, so
 *                  the e2e loop above almost never needs to wait for an event)
 *   diag_call      ns per call of bench_nop (libcqbench_nop.so, an empty function shaped like poll_cq) through a
 *                  function pointer: the C side of the fixed cost of a call (no device needed: CQ_BENCH_CASES=call)
 *   diag_read      ns per completion to read wr_id and status from 32 ibv_wc in memory (no device needed either)
 *   ring_*         batch_poll, ext_iter, ext_copy, empty_poll, empty_ext with the same loops on the device-less
 *                  completion ring of libcqbench_ring.so (cq_bench_ring.c): no device needed (CQ_BENCH_CASES=ring)
 *
 * Every case: W warm-up repetitions, then R measured ones; prints one machine-readable line per case:
 *   case=batch_poll batch=16 impl=c unit=ns median=.. min=.. max=.. reps=R
 * The Java twin (dev.rdma.benchmarks.CqBench) runs the same cases with the same parameters.
 *
 * usage: cq_bench [K R W EMPTY_ITERS E2E_MSGS]   (defaults 4096 7 3 200000 2000)
 * build: gcc -O2 -Wall -o cq_bench cq_bench.c -libverbs
 */
#define _GNU_SOURCE
#define BENCH_NAME "cq_bench"
#include "bench_common.h"
#include <dlfcn.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>


static int K = 4096, REPS = 7, WARMUP = 3, EMPTY_ITERS = 200000, E2E_MSGS = 2000;

static struct ibv_mr *mr;
static char *buf;
static volatile uint64_t sink;

/* dlopen of the library named by the environment variable var (a path); exits when it cannot be loaded. */
static void *open_lib(const char *var)
{
    const char *lib = getenv(var);
    if (!lib || !*lib) {
        fprintf(stderr, "cq_bench: %s (the path of a library built by scripts/bench) is not set\n", var);
        exit(1);
    }
    void *h = dlopen(lib, RTLD_NOW);
    if (!h) {
        fprintf(stderr, "cq_bench: dlopen %s: %s\n", lib, dlerror());
        exit(1);
    }
    return h;
}

/* ------------------------------------------------------------------ setup: a self-connected RC QP */

/* The device (bench_common.h) and the registered buffer of 2 * K slots. */
static void open_device_and_buffer(void)
{
    open_device();
    size_t size = (size_t)SLOT * K * 2;
    buf = calloc(1, size);
    mr = ibv_reg_mr(pd, buf, size, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
    CHECK(mr, "ibv_reg_mr");
}

static void post_recv(struct ibv_qp *qp, uint64_t wr_id, int slot)
{
    struct ibv_sge sge = {.addr = (uintptr_t)buf + (size_t)SLOT * K + (size_t)slot * SLOT, .length = SLOT,
                          .lkey = mr->lkey};
    struct ibv_recv_wr wr = {.wr_id = wr_id, .sg_list = &sge, .num_sge = 1}, *bad;
    CHECK(ibv_post_recv(qp, &wr, &bad) == 0, "ibv_post_recv");
}

static void post_send(struct ibv_qp *qp, uint64_t wr_id, int slot, int len)
{
    struct ibv_sge sge = {.addr = (uintptr_t)buf + (size_t)slot * SLOT, .length = len, .lkey = mr->lkey};
    struct ibv_send_wr wr = {.wr_id = wr_id, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND,
                             .send_flags = IBV_SEND_SIGNALED}, *bad;
    CHECK(ibv_post_send(qp, &wr, &bad) == 0, "ibv_post_send");
}

/*
 * Fills send_cq with K send completions: K receives, K signaled sends, wait until the K receives completed (drained
 * from recv_cq), then a pause so that the last ACKs have produced their send completions. Not timed.
 */
static void fill(struct ibv_qp *qp, struct ibv_cq *recv_cq)
{
    struct ibv_wc wc[32];
    for (int i = 0; i < K; i++)
        post_recv(qp, i, i);
    for (int i = 0; i < K; i++)
        post_send(qp, i, i, MSG_LEN);
    int got = 0;
    uint64_t deadline = now_ns() + 60000000000ull;
    while (got < K) {
        int n = ibv_poll_cq(recv_cq, 32, wc);
        CHECK(n >= 0, "ibv_poll_cq(recv)");
        for (int i = 0; i < n; i++)
            CHECK(wc[i].status == IBV_WC_SUCCESS, "receive completion status");
        got += n;
        CHECK(now_ns() < deadline, "fill (timeout waiting for receives)");
    }
    usleep(20000);
}

/* ------------------------------------------------------------------ (1) batch poll, legacy */

/* The timed part of batch_poll: drains K completions with ibv_poll_cq, reading wr_id and status; returns their sum. */
static uint64_t drain_legacy(struct ibv_cq *cq, int batch, struct ibv_wc *wc, long *empties)
{
    uint64_t sum = 0;
    int got = 0;
    while (got < K) {
        int n = ibv_poll_cq(cq, batch, wc);
        if (n < 0) {
            fprintf(stderr, "cq_bench: ibv_poll_cq returned %d\n", n);
            exit(1);
        }
        if (n == 0)
            (*empties)++;
        for (int i = 0; i < n; i++)
            sum += wc[i].wr_id + wc[i].status;
        got += n;
    }
    return sum;
}

static void bench_batch(int batch)
{
    struct ibv_cq *scq = ibv_create_cq(ctx, K, NULL, NULL, 0);
    struct ibv_cq *rcq = ibv_create_cq(ctx, K, NULL, NULL, 0);
    CHECK(scq && rcq, "ibv_create_cq");
    struct ibv_qp *qp = create_loopback(scq, rcq, K);
    struct ibv_wc *wc = calloc(batch, sizeof *wc);
    double v[MAX_REPS];
    for (int r = 0; r < WARMUP + REPS; r++) {
        fill(qp, rcq);
        long empties = 0;
        uint64_t t0 = now_ns();
        sink += drain_legacy(scq, batch, wc, &empties);
        uint64_t t1 = now_ns();
        if (empties)
            fprintf(stderr, "cq_bench: batch %d rep %d: %ld empty polls during the drain\n", batch, r, empties);
        if (r >= WARMUP)
            v[r - WARMUP] = (double)(t1 - t0) / K;
    }
    char extra[32];
    snprintf(extra, sizeof extra, " batch=%d", batch);
    report("batch_poll", extra, "ns", v, REPS);
    free(wc);
    ibv_destroy_qp(qp);
    ibv_destroy_cq(scq);
    ibv_destroy_cq(rcq);
}

/* ------------------------------------------------------------------ (1b) extended CQ iterator */

static struct ibv_cq_ex *create_cq_ex(int cqe, struct ibv_comp_channel *ch)
{
    struct ibv_cq_init_attr_ex attr = {
        .cqe = cqe, .channel = ch, .comp_vector = 0,
        /* the Java side's CqInitAttributes.of(): BYTE_LEN .. DLID_PATH_BITS */
        .wc_flags = IBV_WC_STANDARD_FLAGS,
    };
    struct ibv_cq_ex *cq = ibv_create_cq_ex(ctx, &attr);
    CHECK(cq, "ibv_create_cq_ex");
    return cq;
}

/*
 * The timed part of ext_iter / ext_copy: drains K completions, up to 32 per "poll" call like the Java buffer of 32,
 * one completion per start..end (rxe < 59); returns the sum of what it read.
 */
static uint64_t drain_ext(struct ibv_cq_ex *cq, int copy, struct ibv_wc *wcs)
{
    uint64_t sum = 0;
    int got = 0;
    while (got < K) {
        for (int n = 0; n < 32 && got < K; n++) {
            struct ibv_poll_cq_attr pa = {0};
            int rc = ibv_start_poll(cq, &pa);
            if (rc == ENOENT)
                break;
            if (rc) {
                fprintf(stderr, "cq_bench: ibv_start_poll returned %d\n", rc);
                exit(1);
            }
            if (!copy) {
                sum += cq->wr_id + cq->status + ibv_wc_read_byte_len(cq);
            } else {
                struct ibv_wc *w = &wcs[n];
                w->wr_id = cq->wr_id;
                w->status = cq->status;
                w->vendor_err = ibv_wc_read_vendor_err(cq);
                w->qp_num = ibv_wc_read_qp_num(cq);
                if (w->status == IBV_WC_SUCCESS) {
                    w->opcode = ibv_wc_read_opcode(cq);
                    w->wc_flags = ibv_wc_read_wc_flags(cq);
                    w->byte_len = ibv_wc_read_byte_len(cq);
                    w->imm_data = ibv_wc_read_imm_data(cq);
                    w->src_qp = ibv_wc_read_src_qp(cq);
                    w->slid = ibv_wc_read_slid(cq);
                    w->sl = ibv_wc_read_sl(cq);
                    w->dlid_path_bits = ibv_wc_read_dlid_path_bits(cq);
                }
                sum += w->wr_id + w->status;
            }
            ibv_end_poll(cq);
            got++;
        }
    }
    return sum;
}

static void bench_ext(int copy)
{
    struct ibv_cq_ex *scq = create_cq_ex(K, NULL);
    struct ibv_cq *rcq = ibv_create_cq(ctx, K, NULL, NULL, 0);
    CHECK(rcq, "ibv_create_cq");
    struct ibv_qp *qp = create_loopback(ibv_cq_ex_to_cq(scq), rcq, K);
    struct ibv_wc *wcs = calloc(32, sizeof *wcs);
    double v[MAX_REPS];
    for (int r = 0; r < WARMUP + REPS; r++) {
        fill(qp, rcq);
        uint64_t t0 = now_ns();
        sink += drain_ext(scq, copy, wcs);
        uint64_t t1 = now_ns();
        if (r >= WARMUP)
            v[r - WARMUP] = (double)(t1 - t0) / K;
    }
    report(copy ? "ext_copy" : "ext_iter", " batch=32", "ns", v, REPS);
    free(wcs);
    ibv_destroy_qp(qp);
    ibv_destroy_cq(ibv_cq_ex_to_cq(scq));
    ibv_destroy_cq(rcq);
}

/* ------------------------------------------------------------------ (2) empty poll */

/* One repetition of empty_poll: ns per ibv_poll_cq(16) on the empty cq (a struct ibv_cq *). */
static double time_empty_poll(void *cq)
{
    struct ibv_wc wc[16];
    int total = 0;
    uint64_t t0 = now_ns();
    for (int i = 0; i < EMPTY_ITERS; i++)
        total += ibv_poll_cq(cq, 16, wc);
    uint64_t t1 = now_ns();
    CHECK(total == 0, "empty CQ stayed empty");
    return (double)(t1 - t0) / EMPTY_ITERS;
}

/* One repetition of empty_ext: ns per ibv_start_poll returning ENOENT on the empty cq (a struct ibv_cq_ex *). */
static double time_empty_ext(void *cq)
{
    int total = 0;
    uint64_t t0 = now_ns();
    for (int i = 0; i < EMPTY_ITERS; i++) {
        struct ibv_poll_cq_attr pa = {0};
        int rc = ibv_start_poll(cq, &pa);
        if (rc != ENOENT) {
            total++;
            if (rc == 0)
                ibv_end_poll(cq);
        }
    }
    uint64_t t1 = now_ns();
    CHECK(total == 0, "empty extended CQ stayed empty");
    return (double)(t1 - t0) / EMPTY_ITERS;
}

/* Warm-up and measured repetitions of one empty-poll case (time_empty_poll or time_empty_ext), then its line. */
static void report_empty(const char *name, const char *extra, double (*time_one)(void *), void *cq)
{
    double v[MAX_REPS];
    for (int r = 0; r < WARMUP + REPS; r++) {
        double ns = time_one(cq);
        if (r >= WARMUP)
            v[r - WARMUP] = ns;
    }
    report(name, extra, "ns", v, REPS);
}

static void bench_empty(void)
{
    struct ibv_cq *cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
    CHECK(cq, "ibv_create_cq");
    report_empty("empty_poll", " batch=16", time_empty_poll, cq);
    ibv_destroy_cq(cq);
    struct ibv_cq_ex *cqx = create_cq_ex(64, NULL);
    report_empty("empty_ext", " batch=32", time_empty_ext, cqx);
    ibv_destroy_cq(ibv_cq_ex_to_cq(cqx));
}

/* ------------------------------------------------------------------ diagnosis: the same polls without a device */

/*
 * The ring_* rows: batch_poll, ext_iter, ext_copy, empty_poll and empty_ext with the same loops as above, on the
 * device-less completion ring of libcqbench_ring.so ($CQ_BENCH_RING_LIB), whose poll functions do per call what a
 * user-space provider does. No device needed: this runs on the host CPU too, without emulation.
 */
static void bench_ring(void)
{
    void *h = open_lib("CQ_BENCH_RING_LIB");
    void *(*create)(int) = (void *(*)(int))dlsym(h, "ring_create");
    void (*ring_fill)(void *, int) = (void (*)(void *, int))dlsym(h, "ring_fill");
    void (*destroy)(void *) = (void (*)(void *))dlsym(h, "ring_destroy");
    CHECK(create && ring_fill && destroy, "dlsym ring_create/ring_fill/ring_destroy");
    struct ibv_cq_ex *x = create(K);
    CHECK(x, "ring_create");
    struct ibv_cq *cq = ibv_cq_ex_to_cq(x);
    struct ibv_wc wcs[32];
    double v[MAX_REPS];
    static const int batches[] = {1, 16, 32};
    for (int b = 0; b < 3; b++) {
        for (int r = 0; r < WARMUP + REPS; r++) {
            ring_fill(x, K);
            long empties = 0;
            uint64_t t0 = now_ns();
            sink += drain_legacy(cq, batches[b], wcs, &empties);
            uint64_t t1 = now_ns();
            CHECK(empties == 0, "ring drain without empty polls");
            if (r >= WARMUP)
                v[r - WARMUP] = (double)(t1 - t0) / K;
        }
        char extra[32];
        snprintf(extra, sizeof extra, " batch=%d", batches[b]);
        report("ring_batch_poll", extra, "ns", v, REPS);
    }
    for (int copy = 0; copy < 2; copy++) {
        for (int r = 0; r < WARMUP + REPS; r++) {
            ring_fill(x, K);
            uint64_t t0 = now_ns();
            sink += drain_ext(x, copy, wcs);
            uint64_t t1 = now_ns();
            if (r >= WARMUP)
                v[r - WARMUP] = (double)(t1 - t0) / K;
        }
        report(copy ? "ring_ext_copy" : "ring_ext_iter", " batch=32", "ns", v, REPS);
    }
    report_empty("ring_empty_poll", " batch=16", time_empty_poll, cq);
    report_empty("ring_empty_ext", " batch=32", time_empty_ext, x);
    destroy(x);
}

/* ------------------------------------------------------------------ diagnosis: the fixed cost of a call */

static void bench_call(void)
{
    void *h = open_lib("CQ_BENCH_NOP_LIB");
    /* volatile: the compiler must load and call the pointer every time, as the provider's ops.poll_cq is called */
    int (*volatile fn)(void *, int, void *) = (int (*)(void *, int, void *))dlsym(h, "bench_nop");
    CHECK(fn, "dlsym bench_nop");
    struct ibv_wc wc[16];
    double v[MAX_REPS];
    for (int r = 0; r < WARMUP + REPS; r++) {
        int total = 0;
        uint64_t t0 = now_ns();
        for (int i = 0; i < EMPTY_ITERS; i++)
            total += fn(&v, 16, wc);
        uint64_t t1 = now_ns();
        CHECK(total == 0, "bench_nop returned 0");
        if (r >= WARMUP)
            v[r - WARMUP] = (double)(t1 - t0) / EMPTY_ITERS;
    }
    report("diag_call", "", "ns", v, REPS);

    /* diag_read: reading wr_id and status of 32 ibv_wc already in memory (what follows every poll) */
    struct ibv_wc w32[32];
    memset(w32, 0, sizeof w32);
    for (int i = 0; i < 32; i++)
        w32[i].wr_id = (uint64_t)i;
    int rounds = EMPTY_ITERS / 32 > 0 ? EMPTY_ITERS / 32 : 1;
    for (int r = 0; r < WARMUP + REPS; r++) {
        uint64_t sum = 0;
        uint64_t t0 = now_ns();
        for (int j = 0; j < rounds; j++) {
            w32[j & 31].wr_id = (uint64_t)j; /* the memory changes between rounds, as after a poll */
            __asm__ volatile("" ::: "memory");
            for (int i = 0; i < 32; i++)
                sum += w32[i].wr_id + w32[i].status;
        }
        uint64_t t1 = now_ns();
        sink += sum;
        if (r >= WARMUP)
            v[r - WARMUP] = (double)(t1 - t0) / ((double)rounds * 32);
    }
    report("diag_read", " batch=32", "ns", v, REPS);
}

/* ------------------------------------------------------------------ (3) end to end: ping-pong with events */

#define E2E_DEPTH 16

/* One CQ with a channel for sends and receives of a self-connected QP, E2E_DEPTH receives posted. */
struct ping_pong {
    struct ibv_comp_channel *ch;
    struct ibv_cq *cq;
    struct ibv_qp *qp;
};

static struct ping_pong ping_pong_open(void)
{
    struct ping_pong p;
    p.ch = ibv_create_comp_channel(ctx);
    CHECK(p.ch, "ibv_create_comp_channel");
    p.cq = ibv_create_cq(ctx, 4 * E2E_DEPTH, NULL, p.ch, 0);
    CHECK(p.cq, "ibv_create_cq");
    p.qp = create_loopback(p.cq, p.cq, E2E_DEPTH);
    for (int i = 0; i < E2E_DEPTH; i++)
        post_recv(p.qp, 1000000 + i, i);
    return p;
}

static void ping_pong_close(struct ping_pong p)
{
    ibv_destroy_qp(p.qp);
    ibv_destroy_cq(p.cq);
    ibv_destroy_comp_channel(p.ch);
}

/* A ping-pong completion: a receive is posted again (returns 1), a send is counted in *sends_done (returns 0). */
static int ping_pong_completion(struct ibv_qp *qp, const struct ibv_wc *wc, int *sends_done)
{
    CHECK(wc->status == IBV_WC_SUCCESS, "ping-pong completion status");
    if (wc->opcode == IBV_WC_RECV) {
        post_recv(qp, wc->wr_id, (int)(wc->wr_id - 1000000));
        return 1;
    }
    (*sends_done)++;
    return 0;
}

/* One e2e round of E2E_MSGS messages: drain, and only when the CQ is empty arm and wait for an event. Returns the
 * events got. */
static unsigned long e2e_round(struct ping_pong *p)
{
    struct ibv_wc wc[16];
    unsigned long events = 0;
    int msgs = 0, sent = 0, sends_done = 0;
    post_send(p->qp, sent, sent % E2E_DEPTH, MSG_LEN);
    sent++;
    while (msgs < E2E_MSGS || sends_done < sent) {
        int n = ibv_poll_cq(p->cq, 16, wc);
        CHECK(n >= 0, "ibv_poll_cq");
        if (n == 0) {
            CHECK(ibv_req_notify_cq(p->cq, 0) == 0, "ibv_req_notify_cq");
            n = ibv_poll_cq(p->cq, 16, wc); /* what arrived before the arm */
            CHECK(n >= 0, "ibv_poll_cq");
            if (n == 0) {
                struct ibv_cq *ev_cq;
                void *ev_ctx;
                CHECK(ibv_get_cq_event(p->ch, &ev_cq, &ev_ctx) == 0, "ibv_get_cq_event");
                ibv_ack_cq_events(ev_cq, 1);
                events++;
                continue;
            }
        }
        for (int i = 0; i < n; i++) {
            if (ping_pong_completion(p->qp, &wc[i], &sends_done)) {
                msgs++;
                if (sent < E2E_MSGS) {
                    post_send(p->qp, sent, sent % E2E_DEPTH, MSG_LEN);
                    sent++;
                }
            }
        }
    }
    return events;
}

/* One e2e_events round: every message goes through the event path: wait for the event, ack, arm, drain, post the
 * next message. Returns the events got. */
static unsigned long e2e_events_round(struct ping_pong *p)
{
    struct ibv_wc wc[16];
    unsigned long events = 0;
    int msgs = 0, sent = 0, sends_done = 0;
    CHECK(ibv_req_notify_cq(p->cq, 0) == 0, "ibv_req_notify_cq");
    post_send(p->qp, sent, sent % E2E_DEPTH, MSG_LEN);
    sent++;
    while (msgs < E2E_MSGS || sends_done < sent) {
        struct ibv_cq *ev_cq;
        void *ev_ctx;
        CHECK(ibv_get_cq_event(p->ch, &ev_cq, &ev_ctx) == 0, "ibv_get_cq_event");
        ibv_ack_cq_events(ev_cq, 1);
        events++;
        CHECK(ibv_req_notify_cq(p->cq, 0) == 0, "ibv_req_notify_cq");
        int to_send = 0, n;
        while ((n = ibv_poll_cq(p->cq, 16, wc)) > 0) {
            for (int i = 0; i < n; i++) {
                if (ping_pong_completion(p->qp, &wc[i], &sends_done)) {
                    msgs++;
                    to_send++;
                }
            }
        }
        CHECK(n == 0, "ibv_poll_cq");
        for (; to_send > 0 && sent < E2E_MSGS; to_send--) {
            post_send(p->qp, sent, sent % E2E_DEPTH, MSG_LEN);
            sent++;
        }
    }
    return events;
}

/* An e2e case: WARMUP + REPS timed rounds on one ping-pong, the rate of the measured ones. */
static void bench_e2e_case(const char *name, unsigned long (*round)(struct ping_pong *))
{
    struct ping_pong p = ping_pong_open();
    double v[MAX_REPS];
    unsigned long events = 0;
    for (int r = 0; r < WARMUP + REPS; r++) {
        uint64_t t0 = now_ns();
        events += round(&p);
        uint64_t t1 = now_ns();
        if (r >= WARMUP)
            v[r - WARMUP] = E2E_MSGS * 1e9 / (double)(t1 - t0);
    }
    fprintf(stderr, "cq_bench: %s: %lu events for %d messages\n", name, events, (WARMUP + REPS) * E2E_MSGS);
    report(name, "", "msgs_per_s", v, REPS);
    ping_pong_close(p);
}

int main(int argc, char **argv)
{
    if (argc > 1) K = atoi(argv[1]);
    if (argc > 2) REPS = atoi(argv[2]);
    if (argc > 3) WARMUP = atoi(argv[3]);
    if (argc > 4) EMPTY_ITERS = atoi(argv[4]);
    if (argc > 5) E2E_MSGS = atoi(argv[5]);
    if (K < 32 || REPS < 1 || REPS > MAX_REPS || WARMUP < 0 || EMPTY_ITERS < 1 || E2E_MSGS < 1) {
        fprintf(stderr, "usage: cq_bench [K>=32 REPS(1..%d) WARMUP EMPTY_ITERS E2E_MSGS]\n", MAX_REPS);
        return 2;
    }
    const char *only = getenv("CQ_BENCH_CASES"); /* optional filter, e.g. "batch,empty" */
    int device = !only || strstr(only, "batch") || strstr(only, "ext") || strstr(only, "empty") || strstr(only, "e2e");
    if (device)
        open_device_and_buffer();
    printf("# impl=c K=%d reps=%d warmup=%d empty_iters=%d e2e_msgs=%d\n", K, REPS, WARMUP, EMPTY_ITERS, E2E_MSGS);
    if (!only || strstr(only, "batch")) {
        bench_batch(1);
        bench_batch(16);
        bench_batch(32);
    }
    if (!only || strstr(only, "ext")) {
        bench_ext(0);
        bench_ext(1);
    }
    if (!only || strstr(only, "empty"))
        bench_empty();
    if (!only || strstr(only, "e2e")) {
        bench_e2e_case("e2e", e2e_round);
        bench_e2e_case("e2e_events", e2e_events_round);
    }
    if (!only || strstr(only, "call"))
        bench_call();
    if (!only || strstr(only, "ring"))
        bench_ring();
    if (!device)
        return 0; /* the device-less cases only (call, ring): e.g. the host-CPU run of scripts/bench */
    fprintf(stderr, "cq_bench: done (sink %llu)\n", (unsigned long long)sink);
    ibv_dereg_mr(mr);
    ibv_dealloc_pd(pd);
    ibv_close_device(ctx);
    return 0;
}
