package dev.rdma.benchmarks;

import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.util.Arrays;
import java.util.EnumSet;
import java.util.Locale;

import dev.rdma.verbs.CompletionChannel;
import dev.rdma.verbs.CompletionQueue;
import dev.rdma.verbs.Context;
import dev.rdma.verbs.MemoryRegion;
import dev.rdma.verbs.ProtectionDomain;
import dev.rdma.verbs.QueuePair;
import dev.rdma.verbs.WorkCompletion;
import dev.rdma.verbs.WorkCompletionBuffer;
import dev.rdma.verbs.exchange.ExchangeListener;
import dev.rdma.verbs.exchange.ExchangeOptions;
import dev.rdma.verbs.exchange.OutOfBand;

/**
 * The Java side of the cross-device ping-pong benchmark: the twin of
 * {@code benchmarks/src/main/c/xdev_pingpong.c} (which is {@code ibv_rc_pingpong -e} with
 * a clock), through the binding - the exchange of {@code dev.rdma.verbs.exchange}, the
 * completion channel's events, {@code poll(buffer)} - with the same arguments, algorithm
 * and output lines ({@code impl=java}). Nothing is allocated per message. After the
 * warm-up round trips both sides wait until the JIT is quiet ({@link Jit#awaitQuiet()}),
 * inside an unmeasured round trip.
 *
 * <pre>XdevPingPong DEVICE GID_INDEX TCP_PORT ITERS WARMUP REPS SIZE [SERVER_IPV4]</pre>
 */
public final class XdevPingPong {

	static final long RECV_WRID = 1;

	static final long SEND_WRID = 2;

	static final int RX_DEPTH = 500;

	private XdevPingPong() {
	}

	public static void main(String[] args) throws Exception {
		if (args.length < 7) {
			System.err.println("usage: XdevPingPong DEVICE GID_INDEX TCP_PORT ITERS WARMUP REPS SIZE [SERVER_IPV4]");
			System.exit(2);
		}
		String device = args[0];
		int gidIndex = Integer.parseInt(args[1]);
		int port = Integer.parseInt(args[2]);
		int iters = Integer.parseInt(args[3]);
		int warmup = Integer.parseInt(args[4]);
		int reps = Integer.parseInt(args[5]);
		int size = Integer.parseInt(args[6]);
		String serverIp = args.length > 7 ? args[7] : null;
		boolean client = serverIp != null;
		ExchangeOptions options = ExchangeOptions.defaults().withGidIndex(gidIndex);
		try (Context ctx = Context.open(device); WorkCompletionBuffer buffer = new WorkCompletionBuffer(2)) {
			CompletionChannel channel = ctx.createCompletionChannel();
			CompletionQueue cq = ctx.createCompletionQueue(RX_DEPTH + 1, channel, 0);
			ProtectionDomain pd = ctx.allocateProtectionDomain();
			MemoryRegion mr = pd.registerMemory(2L * size, EnumSet.of(MemoryRegion.Access.LOCAL_WRITE));
			mr.buffer().fill((byte) 0x7b);
			QueuePair qp = pd.createQueuePair(new QueuePair.Attributes(cq, cq, 8, RX_DEPTH, false));
			qp.moveToInit(1);
			for (int i = 0; i < RX_DEPTH; i++) {
				qp.postRecv(RECV_WRID, mr, 0, size);
			}
			int routs = RX_DEPTH;
			// armed before the exchange, as rc_pingpong: the peer may send as soon as it
			// is over
			cq.requestNotify(false);
			if (client) {
				OutOfBand.connect(qp, new InetSocketAddress(InetAddress.getByName(serverIp), port), options);
			}
			else {
				try (ExchangeListener listener = ExchangeListener.bind(new InetSocketAddress(port))) {
					OutOfBand.accept(listener, qp, options.withConnectTimeout(java.time.Duration.ofMinutes(5)));
				}
			}

			int total = warmup + iters * reps;
			long[] rtt = new long[total + 1];
			double[] rate = new double[reps];
			double[] p50 = new double[reps];
			double[] p99 = new double[reps];
			int scnt = 0;
			int rcnt = 0;
			long pending = RECV_WRID;
			int events = 0;
			long t0 = 0;
			long start = System.nanoTime();
			long eventTimeout = 60_000_000_000L;
			if (client) {
				t0 = System.nanoTime();
				qp.postSend(SEND_WRID, mr, size, size, QueuePair.SendOpcode.SEND, 0, true);
				pending |= SEND_WRID;
			}
			while (rcnt < total || scnt < total) {
				if (channel.getEvent(eventTimeout, null) == null) {
					throw new IllegalStateException(
							"no completion event within 60 s after " + scnt + " sends and " + rcnt + " receives");
				}
				events++;
				cq.ackEvents();
				cq.requestNotify(false);
				int n;
				while ((n = cq.poll(buffer)) > 0) {
					for (int i = 0; i < n; i++) {
						WorkCompletion wc = buffer.get(i);
						if (!wc.isSuccess()) {
							throw new IllegalStateException("completion of wr_id " + wc.wrId() + ": " + wc.status());
						}
						long wrId = wc.wrId();
						if (wrId == SEND_WRID) {
							scnt++;
						}
						else {
							rcnt++;
							if (rcnt == warmup && !client) {
								// before the last warm-up pong: the client's unmeasured
								// round trip
								// absorbs the wait
								Jit.awaitQuiet();
							}
							if (--routs <= 1) {
								for (; routs < RX_DEPTH; routs++) {
									qp.postRecv(RECV_WRID, mr, 0, size);
								}
							}
						}
						pending &= ~wrId;
						if (pending == 0 && client) {
							long t = System.nanoTime();
							rtt[scnt - 1] = t - t0;
							if (scnt == warmup) {
								// with single-threaded TCG a compilation on the other
								// vCPU takes its
								// time from the measured round trips: start when the JIT
								// is quiet
								Jit.awaitQuiet();
								t = System.nanoTime();
								start = t;
							}
							if (scnt > warmup && (scnt - warmup) % iters == 0) {
								int r = (scnt - warmup) / iters - 1;
								rate[r] = 2.0 * iters / ((t - start) / 1e9);
								start = t;
								long[] v = Arrays.copyOfRange(rtt, warmup + r * iters, warmup + (r + 1) * iters);
								Arrays.sort(v);
								p50[r] = v[iters / 2] / 1e3;
								p99[r] = v[(int) (iters * 0.99)] / 1e3;
							}
						}
						if (scnt < total && pending == 0) {
							t0 = System.nanoTime();
							qp.postSend(SEND_WRID, mr, size, size, QueuePair.SendOpcode.SEND, 0, true);
							pending = RECV_WRID | SEND_WRID;
						}
					}
				}
			}
			if (client) {
				System.out.printf(Locale.ROOT,
						"# xdev_pingpong Java client on %s -> %s: %d round trips of %d bytes, %d completion events%n",
						device, serverIp, total, size, events);
				report("xdev_rate", "msgs/s", rate);
				report("xdev_p50", "us", p50);
				report("xdev_p99", "us", p99);
			}
		}
	}

	private static void report(String name, String unit, double[] v) {
		Arrays.sort(v);
		System.out.printf(Locale.ROOT, "case=%s impl=java unit=%s median=%.2f min=%.2f max=%.2f reps=%d%n", name, unit,
				v[v.length / 2], v[0], v[v.length - 1], v.length);
	}

}
