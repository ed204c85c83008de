/*
 * bench_common.h: what the C benchmarks cq_bench.c and cq_group_bench.c share: the error check, the clock, the
 * machine-readable report line, opening the device (the first one or $RDMA_TEST_DEVICE, its IPv4-mapped GID and a
 * protection domain) and a reliable-connected QP connected to itself. Define BENCH_NAME (the program's name, for
 * its messages) before including it; it is included by one source file per program (static definitions).
 */
#ifndef BENCH_COMMON_H
#define BENCH_COMMON_H

#include <errno.h>
#include <infiniband/verbs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifndef BENCH_NAME
#error "define BENCH_NAME before including bench_common.h"
#endif

#define PORT 1
#define SLOT 64
#define MSG_LEN 16
#define MAX_REPS 64

#define CHECK(cond, what) do { if (!(cond)) { fprintf(stderr, BENCH_NAME ": %s failed: %s (%s:%d)\n", what, \
        strerror(errno), __FILE__, __LINE__); exit(1); } } while (0)

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_port_attr port_attr;
static union ibv_gid gid;
static int gid_index;

static inline uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* One line per case: case=NAME EXTRA impl=c unit=UNIT median=.. min=.. max=.. reps=N (sorts v). */
static void report(const char *name, const char *extra, const char *unit, double *v, int n)
{
    qsort(v, n, sizeof(double), cmp_double);
    double median = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
    printf("case=%s%s impl=c unit=%s median=%.2f min=%.2f max=%.2f reps=%d\n", name, extra, unit, median, v[0],
           v[n - 1], n);
    fflush(stdout);
}

/* The index of the port's first IPv4-mapped GID (stored in gid), or -1. */
static int find_ipv4_gid(void)
{
    for (int i = 0; i < port_attr.gid_tbl_len; i++) {
        union ibv_gid g;
        if (ibv_query_gid(ctx, PORT, i, &g))
            continue;
        static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
        if (memcmp(g.raw, prefix, 12) == 0 && (g.raw[12] | g.raw[13] | g.raw[14] | g.raw[15])) {
            gid = g;
            return i;
        }
    }
    return -1;
}

/* Opens the first device (or $RDMA_TEST_DEVICE), queries its port and IPv4 GID, allocates the PD. */
static void open_device(void)
{
    int n;
    struct ibv_device **list = ibv_get_device_list(&n);
    CHECK(list && n > 0, "ibv_get_device_list (no RDMA device)");
    const char *want = getenv("RDMA_TEST_DEVICE");
    struct ibv_device *dev = list[0];
    if (want && *want) {
        dev = NULL;
        for (int i = 0; i < n; i++)
            if (!strcmp(ibv_get_device_name(list[i]), want))
                dev = list[i];
        CHECK(dev, "RDMA_TEST_DEVICE lookup");
    }
    ctx = ibv_open_device(dev);
    CHECK(ctx, "ibv_open_device");
    fprintf(stderr, BENCH_NAME ": device %s\n", ibv_get_device_name(dev));
    ibv_free_device_list(list);
    CHECK(ibv_query_port(ctx, PORT, &port_attr) == 0, "ibv_query_port");
    gid_index = find_ipv4_gid();
    CHECK(gid_index >= 0, "find IPv4 GID");
    pd = ibv_alloc_pd(ctx);
    CHECK(pd, "ibv_alloc_pd");
}

/* An RC QP of depth work requests each way, moved INIT -> RTR -> RTS connected to itself. */
static struct ibv_qp *create_loopback(struct ibv_cq *scq, struct ibv_cq *rcq, int depth)
{
    struct ibv_qp_init_attr init = {
        .send_cq = scq, .recv_cq = rcq, .qp_type = IBV_QPT_RC, .sq_sig_all = 0,
        .cap = {.max_send_wr = depth, .max_recv_wr = depth, .max_send_sge = 1, .max_recv_sge = 1},
    };
    struct ibv_qp *qp = ibv_create_qp(pd, &init);
    CHECK(qp, "ibv_create_qp");
    struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = PORT,
                            .qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE
                                               | IBV_ACCESS_REMOTE_READ};
    CHECK(!ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS), "INIT");
    memset(&a, 0, sizeof a);
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = port_attr.active_mtu;
    a.dest_qp_num = qp->qp_num;
    a.rq_psn = 0;
    a.max_dest_rd_atomic = 1;
    a.min_rnr_timer = 12;
    a.ah_attr.is_global = 1;
    a.ah_attr.port_num = PORT;
    a.ah_attr.dlid = port_attr.lid;
    a.ah_attr.grh.dgid = gid;
    a.ah_attr.grh.sgid_index = gid_index;
    a.ah_attr.grh.hop_limit = 1;
    CHECK(!ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN
                                     | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER), "RTR");
    memset(&a, 0, sizeof a);
    a.qp_state = IBV_QPS_RTS;
    a.timeout = 14;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.sq_psn = 0;
    a.max_rd_atomic = 1;
    CHECK(!ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY
                                     | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC), "RTS");
    return qp;
}

#endif
