/*
 * cq_group_bench: the C twin of a poller group thread (issue 16, docs/benchmarks.md "Poller groups").
 *
 * N completion queues, each with its own completion channel and its own self-connected RC QP (send and receive
 * completions on that CQ), each QP keeping one message in flight: on its receive completion the handler records the
 * message's latency (post of the send to the handling of its receive), re-posts the receive and posts the next send.
 * THREADS threads own the CQs (CQ i on thread i % THREADS, for life) and run the loop of the Java group thread
 * (rdma-spring-boot-autoconfigure's GroupPollLoop, event mode), step by step:
 *   drain each ready CQ up to a batch budget (ibv_poll_cq, batch 32; a CQ that used it all stays ready);
 *   arm a CQ drained below its budget (ibv_req_notify_cq) and drain it once more;
 *   one epoll_wait over every channel of the thread and its wake-up eventfd (only a look while a CQ is ready);
 *   per readable channel ibv_get_cq_event (non-blocking fd), which names the CQ that fired: count it, ack every 64
 *   events (ibv_ack_cq_events), make it ready.
 * Same budget (256), batch (32) and ack batch (64) as the Java group's defaults. Traffic runs from set-up to
 * tear-down; after WARMUP_MS the aggregate rate and latency percentiles are measured over REPS windows of REP_MS.
 * With IDLE_S > 0, after the last N: traffic stopped, the threads armed and waiting, the process CPU time
 * (getrusage) over IDLE_S seconds. Over the measured windows, the CPU per message of each group thread and of the
 * process (user+system, "# group ... cpu per message" line). BENCH_GROUP_TAG (e.g. pair=1) is appended to the
 * parameters of every line.
 *
 *   case=group_rate n=512 threads=2 impl=c unit=msgs_per_s median=.. min=.. max=.. reps=R   (and group_p50/_p99
 *   in us, group_idle_cpu in % of one core)
 *
 * usage: cq_group_bench THREADS WARMUP_MS REP_MS REPS IDLE_S N...
 * build: gcc -O2 -Wall -pthread -o cq_group_bench cq_group_bench.c -libverbs
 */
#define _GNU_SOURCE
#define BENCH_NAME "cq_group_bench"
#include "bench_common.h"
#include <errno.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define DEPTH 4
#define RECV_ID_BASE 1000000
#define BATCH 32
#define BUDGET 256
#define ACK_BATCH 64
#define MAX_EVENTS 256
#define WAIT_MS 500
#define SUB_BITS 4
#define SUB (1 << SUB_BITS)
#define BUCKETS (SUB + (41 - SUB_BITS) * SUB)

#define LOAD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)
#define STORE(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELAXED)

struct queue {
    struct ibv_comp_channel *ch;
    struct ibv_cq *cq;
    struct ibv_qp *qp;
    struct ibv_mr *mr;
    char *buf;
    struct thread *owner;
    uint64_t sent_at, sent, received; /* received: written by the owner, read by main */
    int unacked, queued;
};

struct thread {
    pthread_t tid;
    int efd, wake;
    struct queue **ready; /* ring of ready queues */
    int head, count, cap;
    pid_t task; /* the thread's task id, for its CPU time in /proc/self/task */
    uint64_t msgs;
    uint64_t hist[BUCKETS];
    int quit;
};

static volatile int stopping;

static int bucket(uint64_t v)
{
    if (v < SUB)
        return (int)v;
    int msb = 63 - __builtin_clzll(v);
    int i = SUB + (msb - SUB_BITS) * SUB + (int)((v >> (msb - SUB_BITS)) & (SUB - 1));
    return i < BUCKETS ? i : BUCKETS - 1;
}

static double bucket_value(int i)
{
    if (i < SUB)
        return i;
    int m = (i - SUB) / SUB + SUB_BITS, s = (i - SUB) % SUB;
    double w = (double)(1ull << (m - SUB_BITS));
    return (SUB + s) * w + w / 2;
}

static double percentile(const uint64_t *h, double q)
{
    uint64_t total = 0, seen = 0;
    for (int i = 0; i < BUCKETS; i++)
        total += h[i];
    if (!total)
        return 0.0 / 0.0;
    uint64_t rank = (uint64_t)(q * total + 0.999999);
    for (int i = 0; i < BUCKETS; i++) {
        seen += h[i];
        if (seen >= rank && h[i])
            return bucket_value(i);
    }
    return bucket_value(BUCKETS - 1);
}

static void post_recv(struct queue *q, uint64_t wr_id, int slot)
{
    struct ibv_sge sge = {.addr = (uintptr_t)q->buf + (size_t)(DEPTH + slot) * SLOT, .length = SLOT,
                          .lkey = q->mr->lkey};
    struct ibv_recv_wr wr = {.wr_id = wr_id, .sg_list = &sge, .num_sge = 1}, *bad;
    CHECK(ibv_post_recv(q->qp, &wr, &bad) == 0, "ibv_post_recv");
}

static void post_send(struct queue *q)
{
    struct ibv_sge sge = {.addr = (uintptr_t)q->buf + (size_t)(q->sent % DEPTH) * SLOT, .length = MSG_LEN,
                          .lkey = q->mr->lkey};
    struct ibv_send_wr wr = {.wr_id = q->sent, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND,
                             .send_flags = IBV_SEND_SIGNALED}, *bad;
    q->sent_at = now_ns();
    CHECK(ibv_post_send(q->qp, &wr, &bad) == 0, "ibv_post_send");
    q->sent++;
}

/* ------------------------------------------------------------------ the group thread's loop */

static void make_ready(struct thread *t, struct queue *q)
{
    if (q->queued)
        return;
    q->queued = 1;
    t->ready[(t->head + t->count++) % t->cap] = q;
}

/* The listener: one completion. */
static void handle(struct thread *t, struct queue *q, struct ibv_wc *wc)
{
    CHECK(wc->status == IBV_WC_SUCCESS, "completion status");
    if (wc->opcode != IBV_WC_RECV)
        return;
    uint64_t now = now_ns();
    int b = bucket(now - q->sent_at);
    STORE(t->hist[b], LOAD(t->hist[b]) + 1);
    post_recv(q, wc->wr_id, (int)(wc->wr_id - RECV_ID_BASE));
    STORE(t->msgs, t->msgs + 1);
    if (!stopping)
        post_send(q);
    STORE(q->received, q->received + 1);
}

/* Polls q until it is empty or its budget is used; returns the completions. */
static int drain(struct thread *t, struct queue *q)
{
    struct ibv_wc wc[BATCH];
    int total = 0, n;
    while (total < BUDGET) {
        n = ibv_poll_cq(q->cq, BATCH, wc);
        CHECK(n >= 0, "ibv_poll_cq");
        for (int i = 0; i < n; i++)
            handle(t, q, &wc[i]);
        total += n;
        if (n < BATCH)
            break;
    }
    return total;
}

static void *group_thread(void *arg)
{
    struct thread *t = arg;
    struct epoll_event evs[MAX_EVENTS];
    STORE(t->task, (pid_t)syscall(SYS_gettid));
    while (!LOAD(t->quit)) {
        /* drain the ready queues, each up to its budget; arm those drained below it and drain them once more */
        for (int turn = t->count; turn > 0; turn--) {
            struct queue *q = t->ready[t->head];
            t->head = (t->head + 1) % t->cap;
            t->count--;
            q->queued = 0;
            if (drain(t, q) >= BUDGET) {
                make_ready(t, q);
                continue;
            }
            CHECK(ibv_req_notify_cq(q->cq, 0) == 0, "ibv_req_notify_cq");
            if (drain(t, q) > 0)
                make_ready(t, q);
        }
        /* one wait on every channel and the waker: only a look while a queue is ready */
        int n = epoll_wait(t->efd, evs, MAX_EVENTS, t->count ? 0 : WAIT_MS);
        CHECK(n >= 0 || errno == EINTR, "epoll_wait");
        for (int i = 0; i < n; i++) {
            struct queue *q = evs[i].data.ptr;
            if (!q) {
                uint64_t v;
                (void)!read(t->wake, &v, sizeof v);
                continue;
            }
            /* the event names the CQ that fired: count, ack in batches, make it ready */
            struct ibv_cq *cq;
            void *cq_ctx;
            if (ibv_get_cq_event(q->ch, &cq, &cq_ctx) != 0) {
                CHECK(errno == EAGAIN, "ibv_get_cq_event");
                continue;
            }
            struct queue *fired = cq_ctx;
            if (++fired->unacked >= ACK_BATCH) {
                ibv_ack_cq_events(fired->cq, fired->unacked);
                fired->unacked = 0;
            }
            make_ready(t, fired);
        }
    }
    return NULL;
}

/* ------------------------------------------------------------------ one size */

/* The user and system clock ticks of a task of this process (0 when it cannot be read). */
static void task_cpu(pid_t task, uint64_t *user, uint64_t *sys)
{
    char path[64], buf[1024];
    *user = *sys = 0;
    snprintf(path, sizeof path, "/proc/self/task/%d/stat", (int)task);
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    size_t len = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[len] = 0;
    char *p = strrchr(buf, ')');
    unsigned long long u, s;
    /* after the name: state (field 3) ... utime (14), stime (15) */
    if (p && sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &u, &s) == 2) {
        *user = u;
        *sys = s;
    }
}

/* Prints the CPU per message of each group thread and of the whole process over a measured period (as GroupBench's
 * "cpu per message by thread" line): user+system microseconds, clock ticks of 1/100 s. */
static void print_cpu(const char *extra, struct thread *ts, int threads, const uint64_t (*before)[2],
                      const struct rusage *r0, uint64_t msgs)
{
    double tick = 1e6 / 100;
    struct rusage r1;
    getrusage(RUSAGE_SELF, &r1);
    printf("# group%s cpu per message by thread (user+system):", extra);
    for (int k = 0; k < threads; k++) {
        uint64_t u, s;
        task_cpu(ts[k].task, &u, &s);
        printf(" group-%d %.0f+%.0f us;", k, (u - before[k][0]) * tick / msgs, (s - before[k][1]) * tick / msgs);
    }
    double pu = (r1.ru_utime.tv_sec - r0->ru_utime.tv_sec) * 1e6 + (r1.ru_utime.tv_usec - r0->ru_utime.tv_usec);
    double ps = (r1.ru_stime.tv_sec - r0->ru_stime.tv_sec) * 1e6 + (r1.ru_stime.tv_usec - r0->ru_stime.tv_usec);
    printf(" process %.0f+%.0f us\n", pu / msgs, ps / msgs);
    fflush(stdout);
}

static void run(int n, int threads, int warmup_ms, int rep_ms, int reps, int idle_s)
{
    char extra[128];
    const char *tag = getenv("BENCH_GROUP_TAG"); /* e.g. pair=1: a C/Java pair of one run (scripts/bench) */
    snprintf(extra, sizeof extra, " n=%d threads=%d%s%s", n, threads, tag && *tag ? " " : "", tag && *tag ? tag : "");
    uint64_t t_start = now_ns();
    struct queue *qs = calloc(n, sizeof *qs);
    struct thread *ts = calloc(threads, sizeof *ts);
    CHECK(qs && ts, "calloc");
    for (int k = 0; k < threads; k++) {
        ts[k].efd = epoll_create1(EPOLL_CLOEXEC);
        CHECK(ts[k].efd >= 0, "epoll_create1");
        ts[k].wake = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        CHECK(ts[k].wake >= 0, "eventfd");
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
        CHECK(!epoll_ctl(ts[k].efd, EPOLL_CTL_ADD, ts[k].wake, &ev), "epoll_ctl(waker)");
        ts[k].cap = n / threads + 1;
        ts[k].ready = calloc(ts[k].cap, sizeof(struct queue *));
        CHECK(ts[k].ready, "calloc");
    }
    for (int i = 0; i < n; i++) {
        struct queue *q = &qs[i];
        struct thread *t = &ts[i % threads];
        q->owner = t;
        q->ch = ibv_create_comp_channel(ctx);
        CHECK(q->ch, "ibv_create_comp_channel");
        int fl = fcntl(q->ch->fd, F_GETFL);
        CHECK(fl >= 0 && fcntl(q->ch->fd, F_SETFL, fl | O_NONBLOCK) == 0, "fcntl(O_NONBLOCK)");
        q->cq = ibv_create_cq(ctx, 4 * DEPTH, q, q->ch, 0);
        CHECK(q->cq, "ibv_create_cq");
        CHECK(posix_memalign((void **)&q->buf, 4096, 2 * DEPTH * SLOT) == 0, "posix_memalign");
        q->mr = ibv_reg_mr(pd, q->buf, 2 * DEPTH * SLOT, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE
                                                         | IBV_ACCESS_REMOTE_READ);
        CHECK(q->mr, "ibv_reg_mr");
        q->qp = create_loopback(q->cq, q->cq, DEPTH);
        for (int s = 0; s < DEPTH; s++)
            post_recv(q, RECV_ID_BASE + s, s);
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = q};
        CHECK(!epoll_ctl(t->efd, EPOLL_CTL_ADD, q->ch->fd, &ev), "epoll_ctl(channel)");
        make_ready(t, q); /* drained and armed on the first turn */
    }
    stopping = 0;
    for (int k = 0; k < threads; k++)
        CHECK(pthread_create(&ts[k].tid, NULL, group_thread, &ts[k]) == 0, "pthread_create");
    /* traffic: one message in flight per QP, posted from here once; the handlers post the rest */
    for (int i = 0; i < n; i++)
        post_send(&qs[i]);
    usleep(warmup_ms * 1000);

    double rate[MAX_REPS], p50[MAX_REPS], p99[MAX_REPS];
    static uint64_t h0[BUCKETS], h1[BUCKETS];
    uint64_t (*cpu0)[2] = calloc(threads, sizeof *cpu0);
    CHECK(cpu0, "calloc");
    uint64_t measured_from = 0;
    for (int k = 0; k < threads; k++) {
        task_cpu(LOAD(ts[k].task), &cpu0[k][0], &cpu0[k][1]);
        measured_from += LOAD(ts[k].msgs);
    }
    struct rusage r0;
    getrusage(RUSAGE_SELF, &r0);
    for (int r = 0; r < reps; r++) {
        uint64_t m0 = 0, m1 = 0;
        memset(h0, 0, sizeof h0);
        memset(h1, 0, sizeof h1);
        for (int k = 0; k < threads; k++) {
            m0 += LOAD(ts[k].msgs);
            for (int b = 0; b < BUCKETS; b++)
                h0[b] += LOAD(ts[k].hist[b]);
        }
        uint64_t t0 = now_ns();
        usleep(rep_ms * 1000);
        uint64_t t1 = now_ns();
        for (int k = 0; k < threads; k++) {
            m1 += LOAD(ts[k].msgs);
            for (int b = 0; b < BUCKETS; b++)
                h1[b] += LOAD(ts[k].hist[b]);
        }
        for (int b = 0; b < BUCKETS; b++)
            h1[b] -= h0[b];
        CHECK(m1 > m0, "traffic (no message completed in a window)");
        rate[r] = (double)(m1 - m0) * 1e9 / (double)(t1 - t0);
        p50[r] = percentile(h1, 0.50) / 1e3;
        p99[r] = percentile(h1, 0.99) / 1e3;
    }
    uint64_t measured = 0;
    for (int k = 0; k < threads; k++)
        measured += LOAD(ts[k].msgs);
    print_cpu(extra, ts, threads, (const uint64_t (*)[2])cpu0, &r0, measured - measured_from);
    free(cpu0);
    report("group_rate", extra, "msgs_per_s", rate, reps);
    report("group_p50", extra, "us", p50, reps);
    report("group_p99", extra, "us", p99, reps);

    /* stop the traffic: the handlers post no more; wait for the messages in flight */
    stopping = 1;
    uint64_t deadline = now_ns() + 60000000000ull;
    for (int i = 0; i < n; i++)
        while (LOAD(qs[i].received) < qs[i].sent && now_ns() < deadline)
            usleep(1000);
    if (idle_s > 0) {
        usleep(1000000);
        struct rusage u0, u1;
        getrusage(RUSAGE_SELF, &u0);
        uint64_t t0 = now_ns();
        sleep(idle_s);
        getrusage(RUSAGE_SELF, &u1);
        uint64_t t1 = now_ns();
        double cpu = (u1.ru_utime.tv_sec - u0.ru_utime.tv_sec + u1.ru_stime.tv_sec - u0.ru_stime.tv_sec) * 1e9
                     + (u1.ru_utime.tv_usec - u0.ru_utime.tv_usec + u1.ru_stime.tv_usec - u0.ru_stime.tv_usec) * 1e3;
        double pct = 100.0 * cpu / (double)(t1 - t0);
        report("group_idle_cpu", extra, "pct_of_core", &pct, 1);
    }
    for (int k = 0; k < threads; k++) {
        uint64_t one = 1;
        STORE(ts[k].quit, 1);
        (void)!write(ts[k].wake, &one, sizeof one);
        pthread_join(ts[k].tid, NULL);
    }
    for (int i = 0; i < n; i++) {
        struct queue *q = &qs[i];
        if (q->unacked)
            ibv_ack_cq_events(q->cq, q->unacked);
        CHECK(!ibv_destroy_qp(q->qp), "ibv_destroy_qp");
        CHECK(!ibv_dereg_mr(q->mr), "ibv_dereg_mr");
        free(q->buf);
        CHECK(!ibv_destroy_cq(q->cq), "ibv_destroy_cq");
        CHECK(!ibv_destroy_comp_channel(q->ch), "ibv_destroy_comp_channel");
    }
    for (int k = 0; k < threads; k++) {
        close(ts[k].efd);
        close(ts[k].wake);
        free(ts[k].ready);
    }
    free(qs);
    free(ts);
    fprintf(stderr, "cq_group_bench: group%s took %.1f s\n", extra, (now_ns() - t_start) / 1e9);
}

int main(int argc, char **argv)
{
    if (argc < 7) {
        fprintf(stderr, "usage: cq_group_bench THREADS WARMUP_MS REP_MS REPS IDLE_S N...\n");
        return 2;
    }
    int threads = atoi(argv[1]), warmup_ms = atoi(argv[2]), rep_ms = atoi(argv[3]), reps = atoi(argv[4]);
    int idle_s = atoi(argv[5]);
    CHECK(threads >= 1 && reps >= 1 && reps <= MAX_REPS && rep_ms >= 1, "arguments");
    open_device();
    for (int a = 6; a < argc; a++)
        run(atoi(argv[a]), threads, warmup_ms, rep_ms, reps, a == argc - 1 ? idle_s : 0);
    ibv_dealloc_pd(pd);
    ibv_close_device(ctx);
    return 0;
}
