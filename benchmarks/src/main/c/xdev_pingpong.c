/*
 * The C side of the cross-device ping-pong benchmark (scripts/bench, docs/benchmarks.md): rdma-core's
 * ibv_rc_pingpong -e (libibverbs/examples/rc_pingpong.c) - the same TCP exchange of 52-byte records, the same QP
 * attributes, receives (wr_id 1) and sends (wr_id 2) of SIZE bytes into one buffer, the client sending first, the
 * next send once the previous send and a receive completed, one completion event per wake-up and one poll per
 * event - plus a clock around every round trip on the client. Its Java twin is dev.rdma.benchmarks.XdevPingPong;
 * either side interoperates with the other and with ibv_rc_pingpong (against the Java twin, give this side twice
 * its WARMUP, in whole repetitions: the Java twin warms up twice).
 *
 *   xdev_pingpong DEVICE GID_INDEX TCP_PORT ITERS WARMUP REPS SIZE [SERVER_IPV4]
 *
 * The client prints, after WARMUP round trips, REPS repetitions of ITERS round trips summarised as
 *   case=xdev_rate impl=c unit=msgs/s median=.. min=.. max=.. reps=R     (2 messages per round trip)
 *   case=xdev_p50 impl=c unit=us ...   case=xdev_p99 impl=c unit=us ...  (per-repetition percentiles)
 * (the prefix "xdev" is $XDEV_CASE when set: scripts/bench names the C twin of case xstarter "xstarter_c"; $XDEV_PARAMS,
 * when set, is printed after the case name). With XDEV_CPU=n the process pins itself to CPU n before the loop, as the
 * Java twin pins its loop thread. With XDEV_MODE=poll the program is ibv_rc_pingpong without -e: no completion
 * channel wait, the CQ polled until it returns a completion (busy polling), the rest unchanged - except for a pause
 * instruction between empty polls, as a spin loop has (DPDK's rte_pause, the JDK's Thread.onSpinWait, which the Java
 * twin calls): under QEMU's single-threaded TCG a spin without it keeps the emulator from the other vCPU until the
 * next timer kick, about 4 ms per hop (both twins measured 255 msgs/s that way, an 8 ms round trip).
 * With BENCH_INSNS=1 (scripts/bench's instruction-count mode, bench_mark.h) the client marks each measured
 * repetition's round trips for insn_plugin.c, its bookkeeping between them left out.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <endian.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <immintrin.h>
#include <infiniband/verbs.h>

#include "bench_mark.h"

#define RECV_WRID 1
#define SEND_WRID 2
#define RX_DEPTH 500

static void die(const char *what) { perror(what); exit(1); }

static double now_us(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

struct dest { unsigned lid, qpn, psn; union ibv_gid gid; };

static void gid_to_wire(const union ibv_gid *gid, char *w) {
	uint32_t t[4];
	memcpy(t, gid, sizeof t);
	for (int i = 0; i < 4; i++) sprintf(w + 8 * i, "%08x", htobe32(t[i]));
}

static void wire_to_gid(const char *w, union ibv_gid *gid) {
	uint32_t t[4];
	char tmp[9] = { 0 };
	for (int i = 0; i < 4; i++) { unsigned v; memcpy(tmp, w + 8 * i, 8); sscanf(tmp, "%x", &v); t[i] = be32toh(v); }
	memcpy(gid, t, sizeof t);
}

static void encode(const struct dest *d, char msg[52]) {
	char g[33];
	gid_to_wire(&d->gid, g);
	sprintf(msg, "%04x:%06x:%06x:%s", d->lid, d->qpn, d->psn, g);
}

static void decode(const char msg[52], struct dest *d) {
	char g[33];
	if (sscanf(msg, "%x:%x:%x:%32s", &d->lid, &d->qpn, &d->psn, g) != 4) { fprintf(stderr, "bad record\n"); exit(1); }
	wire_to_gid(g, &d->gid);
}

static void readn(int fd, void *buf, size_t n) {
	size_t got = 0;
	while (got < n) { ssize_t r = read(fd, (char *) buf + got, n - got); if (r <= 0) die("read"); got += r; }
}

static void connect_qp(struct ibv_qp *qp, const struct dest *me, const struct dest *rem, int gidx) {
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_RTR, .path_mtu = IBV_MTU_1024, .dest_qp_num = rem->qpn,
		.rq_psn = rem->psn, .max_dest_rd_atomic = 1, .min_rnr_timer = 12,
		.ah_attr = { .is_global = 0, .dlid = rem->lid, .sl = 0, .port_num = 1 } };
	if (rem->gid.global.interface_id) {
		a.ah_attr.is_global = 1;
		a.ah_attr.grh.hop_limit = 1;
		a.ah_attr.grh.dgid = rem->gid;
		a.ah_attr.grh.sgid_index = gidx;
	}
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN
			| IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER)) die("modify RTR");
	struct ibv_qp_attr s = { .qp_state = IBV_QPS_RTS, .timeout = 14, .retry_cnt = 7, .rnr_retry = 7,
		.sq_psn = me->psn, .max_rd_atomic = 1 };
	if (ibv_modify_qp(qp, &s, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN
			| IBV_QP_MAX_QP_RD_ATOMIC)) die("modify RTS");
}

static int cmp(const void *a, const void *b) { double x = *(const double *) a, y = *(const double *) b; return (x > y) - (x < y); }

static void report(const char *name, const char *unit, double *v, int n) {
	const char *prefix = getenv("XDEV_CASE");
	qsort(v, n, sizeof *v, cmp);
	/* name is "xdev_<what>" */
	const char *params = getenv("XDEV_PARAMS");
	printf("case=%s%s%s%s impl=c unit=%s median=%.2f min=%.2f max=%.2f reps=%d\n", prefix && *prefix ? prefix : "xdev",
		name + 4, params && *params ? " " : "", params && *params ? params : "", unit, v[n / 2], v[0], v[n - 1], n);
}

int main(int argc, char **argv) {
	if (argc < 8) { fprintf(stderr, "usage: %s DEVICE GID_INDEX TCP_PORT ITERS WARMUP REPS SIZE [SERVER]\n", argv[0]); return 2; }
	const char *devname = argv[1], *server_ip = argc > 8 ? argv[8] : NULL;
	int gidx = atoi(argv[2]), port = atoi(argv[3]), iters = atoi(argv[4]), warmup = atoi(argv[5]), reps = atoi(argv[6]);
	int size = atoi(argv[7]);
	struct ibv_device **list = ibv_get_device_list(NULL), *dev = NULL;
	for (int i = 0; list && list[i]; i++) if (!strcmp(ibv_get_device_name(list[i]), devname)) dev = list[i];
	if (!dev) { fprintf(stderr, "no device %s\n", devname); return 1; }
	struct ibv_context *ctx = ibv_open_device(dev);
	struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	char *buf = aligned_alloc(4096, 2 * (size_t) size);
	memset(buf, 0x7b, 2 * (size_t) size);
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, 2 * (size_t) size, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_cq *cq = ibv_create_cq(ctx, RX_DEPTH + 1, NULL, ch, 0);
	struct ibv_qp_init_attr ia = { .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 8, .max_recv_wr = RX_DEPTH, .max_send_sge = 1, .max_recv_sge = 1 } };
	struct ibv_qp *qp = ctx && ch && pd && mr && cq ? ibv_create_qp(pd, &ia) : NULL;
	if (!qp) die("setup");
	struct ibv_qp_attr init = { .qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = 1,
		.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ };
	if (ibv_modify_qp(qp, &init, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)) die("INIT");
	struct ibv_sge rsge = { (uintptr_t) buf, size, mr->lkey }, ssge = { (uintptr_t) buf + size, size, mr->lkey };
	struct ibv_recv_wr rwr = { .wr_id = RECV_WRID, .sg_list = &rsge, .num_sge = 1 }, *badr;
	struct ibv_send_wr swr = { .wr_id = SEND_WRID, .sg_list = &ssge, .num_sge = 1, .opcode = IBV_WR_SEND,
		.send_flags = IBV_SEND_SIGNALED }, *bads;
	for (int i = 0; i < RX_DEPTH; i++) if (ibv_post_recv(qp, &rwr, &badr)) die("post_recv");
	int routs = RX_DEPTH;
	const char *mode = getenv("XDEV_MODE");
	int use_event = !(mode && !strcmp(mode, "poll"));
	/* armed before the exchange, as rc_pingpong: the peer may send as soon as it is over */
	if (use_event && ibv_req_notify_cq(cq, 0)) die("req_notify");

	struct ibv_port_attr pa;
	struct dest me = { 0 }, rem;
	if (ibv_query_port(ctx, 1, &pa) || ibv_query_gid(ctx, 1, gidx, &me.gid)) die("query");
	srand48(getpid() * time(NULL));
	me.lid = pa.lid; me.qpn = qp->qp_num; me.psn = lrand48() & 0xffffff;
	char msg[52];
	int fd;
	if (server_ip) {
		struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port) };
		inet_pton(AF_INET, server_ip, &sa.sin_addr);
		fd = socket(AF_INET, SOCK_STREAM, 0);
		if (connect(fd, (struct sockaddr *) &sa, sizeof sa)) die("connect");
		encode(&me, msg);
		if (write(fd, msg, sizeof msg) != sizeof msg) die("write");
		readn(fd, msg, sizeof msg);
		if (write(fd, "done", 5) != 5) die("write done");
		close(fd);
		decode(msg, &rem);
		connect_qp(qp, &me, &rem, gidx);
	} else {
		int one = 1, lfd = socket(AF_INET, SOCK_STREAM, 0);
		setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
		struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = INADDR_ANY };
		if (bind(lfd, (struct sockaddr *) &sa, sizeof sa) || listen(lfd, 1)) die("listen");
		fd = accept(lfd, NULL, NULL);
		close(lfd);
		readn(fd, msg, sizeof msg);
		decode(msg, &rem);
		connect_qp(qp, &me, &rem, gidx);
		encode(&me, msg);
		if (write(fd, msg, sizeof msg) != sizeof msg) die("write");
		readn(fd, msg, 5);
		close(fd);
	}

	const char *cpu = getenv("XDEV_CPU");
	if (cpu && *cpu) {
		cpu_set_t set;
		CPU_ZERO(&set);
		CPU_SET(atoi(cpu), &set);
		if (sched_setaffinity(0, sizeof set, &set)) die("sched_setaffinity");
	}
	int total = warmup + iters * reps, scnt = 0, rcnt = 0, pending = RECV_WRID, events = 0;
	double *rtt = malloc(sizeof(double) * (total + 1)), t0 = 0, start = now_us();
	double *rate = malloc(sizeof(double) * reps), *p50 = malloc(sizeof(double) * reps), *p99 = malloc(sizeof(double) * reps);
	if (server_ip) {
		t0 = now_us();
		if (ibv_post_send(qp, &swr, &bads)) die("post_send");
		pending |= SEND_WRID;
	}
	while (rcnt < total || scnt < total) {
		if (use_event) {
			struct ibv_cq *ev_cq;
			void *ev_ctx;
			if (ibv_get_cq_event(ch, &ev_cq, &ev_ctx)) die("get_cq_event");
			events++;
			if (ibv_req_notify_cq(cq, 0)) die("req_notify");
		}
		/* one poll per event, as ibv_rc_pingpong -e: the CQ is re-armed before it, so a
		 * completion that arrives later raises the next event; a side has at most two
		 * completions outstanding (its send and one receive). Without events (XDEV_MODE=poll),
		 * polled until a completion is there, as ibv_rc_pingpong without -e */
		struct ibv_wc wc[2];
		int ne;
		while ((ne = ibv_poll_cq(cq, 2, wc)) == 0 && !use_event)
			_mm_pause();
		if (ne < 0) die("poll_cq");
		for (int i = 0; i < ne; i++) {
			if (wc[i].status != IBV_WC_SUCCESS) { fprintf(stderr, "wc %s\n", ibv_wc_status_str(wc[i].status)); return 1; }
			if (wc[i].wr_id == SEND_WRID) scnt++;
			else {
				rcnt++;
				if (--routs <= 1) {
					for (; routs < RX_DEPTH; routs++) if (ibv_post_recv(qp, &rwr, &badr)) die("post_recv");
				}
			}
			pending &= ~(int) wc[i].wr_id;
			if (!pending && server_ip) {
				double t = now_us();
				rtt[scnt - 1] = t - t0;
				if (scnt == warmup) {
					start = t;
					if (bench_mark_enabled()) {
						const char *c = getenv("XDEV_CASE"), *params = getenv("XDEV_PARAMS");
						char b[256];
						snprintf(b, sizeof b, "B case=%s impl=c rt=%d %s", c && *c ? c : "xdev", iters,
							params ? params : "");
						bench_mark(b);
						bench_mark("R");
					}
				}
				if (scnt > warmup && (scnt - warmup) % iters == 0) {
					int r = (scnt - warmup) / iters - 1;
					bench_mark("P");
					rate[r] = 2.0 * iters / ((t - start) / 1e6);
					start = t;
					double *v = rtt + warmup + r * iters;
					qsort(v, iters, sizeof *v, cmp);
					p50[r] = v[iters / 2];
					p99[r] = v[(int) (iters * 0.99)];
					bench_mark(r + 1 < reps ? "R" : "E");
				}
			}
			if (scnt < total && !pending) {
				t0 = now_us();
				if (ibv_post_send(qp, &swr, &bads)) die("post_send");
				pending = RECV_WRID | SEND_WRID;
			}
		}
	}
	ibv_ack_cq_events(cq, events);
	struct rusage ru;
	if (!getrusage(RUSAGE_SELF, &ru))
		printf("# xdev_pingpong C %s cpu: %.1f us user + %.1f us system per round trip (whole run, %d round trips)\n",
			server_ip ? "client" : "server", (ru.ru_utime.tv_sec * 1e6 + ru.ru_utime.tv_usec) / total,
			(ru.ru_stime.tv_sec * 1e6 + ru.ru_stime.tv_usec) / total, total);
	if (server_ip) {
		printf("# xdev_pingpong C client on %s -> %s: %d round trips of %d bytes, %s, %d completion events, %s\n",
			devname, server_ip, total, size, use_event ? "events" : "busy polling", events,
			cpu && *cpu ? "pinned to a cpu" : "not pinned");
		report("xdev_rate", "msgs/s", rate, reps);
		report("xdev_p50", "us", p50, reps);
		report("xdev_p99", "us", p99, reps);
	}
	ibv_destroy_qp(qp); ibv_destroy_cq(cq); ibv_dereg_mr(mr); ibv_dealloc_pd(pd); ibv_destroy_comp_channel(ch);
	ibv_close_device(ctx); ibv_free_device_list(list); free(buf);
	return 0;
}
