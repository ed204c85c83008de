package dev.rdma.benchmarks.starter;

import java.lang.management.ManagementFactory;
import java.util.Arrays;
import java.util.Locale;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import dev.rdma.benchmarks.CqBench;
import dev.rdma.benchmarks.Repetitions;
import dev.rdma.spring.annotation.RdmaCompletionListener;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import dev.rdma.verbs.CompletionBatch;
import dev.rdma.verbs.CompletionQueue;
import dev.rdma.verbs.Context;
import dev.rdma.verbs.LoopbackQueuePair;
import dev.rdma.verbs.WcOpcode;
import dev.rdma.verbs.WorkCompletion;
import org.springframework.beans.factory.DisposableBean;
import org.springframework.beans.factory.annotation.Qualifier;
import org.springframework.boot.ApplicationArguments;
import org.springframework.boot.ApplicationRunner;
import org.springframework.boot.SpringApplication;
import org.springframework.boot.autoconfigure.SpringBootApplication;
import org.springframework.boot.autoconfigure.condition.ConditionalOnProperty;
import org.springframework.context.annotation.Bean;
import org.springframework.stereotype.Component;

/**
 * End to end through the starter: the same ping-pong as {@code bench_e2e} of cq_bench.c
 * (one message in flight on a self-connected RC QP, send and receive completions on one
 * CQ with a completion channel), but every completion reaches an
 * {@link RdmaCompletionListener} method on the starter's poller thread in {@code event}
 * mode (arm, drain, wait, get events, ack, re-arm), and the listener posts the next
 * message. Prints {@code case=e2e_starter} and the allocation of the poller thread per
 * message. With {@code --bench.metrics=true} the application has a Micrometer registry,
 * so the poller records its meters (per poll batch) and its listener timer:
 * {@code case=e2e_starter_metrics}. {@code --bench.batch=true} uses a batch listener
 * ({@code CompletionBatch}, one call per poll) and {@code --bench.type=extended} an
 * extended CQ ({@code ibv_create_cq_ex}): {@code e2e_starter_batch},
 * {@code e2e_starter_ext}, {@code e2e_starter_ext_batch}.
 *
 * <pre>java ... dev.rdma.benchmarks.starter.StarterPingPong MSGS REPS WARMUP [--bench.metrics=true]
 *     [--bench.batch=true] [--bench.type=extended]</pre>
 */
@SpringBootApplication
public class StarterPingPong {

	static final String[] PROPERTIES = { "--spring.main.banner-mode=off", "--logging.level.root=WARN",
			"--rdma.required=true", "--rdma.devices.bench.port=1", "--rdma.channels.events.device=bench",
			"--rdma.completion-queues.pp.device=bench", "--rdma.completion-queues.pp.type=legacy",
			"--rdma.completion-queues.pp.entries=64", "--rdma.completion-queues.pp.channel=events",
			"--rdma.completion-queues.pp.polling.mode=event", "--rdma.completion-queues.pp.polling.batch-size=16", };

	/**
	 * The registry an application with Actuator would have; without it the starter
	 * records no meters.
	 */
	@Bean
	@ConditionalOnProperty(name = "bench.metrics", havingValue = "true")
	MeterRegistry benchMeterRegistry() {
		return new SimpleMeterRegistry();
	}

	public static void main(String[] args) {
		String[] all = Arrays.copyOf(PROPERTIES, PROPERTIES.length + args.length);
		System.arraycopy(args, 0, all, PROPERTIES.length, args.length);
		for (String arg : args) { // --bench.type=legacy|extended: the kind of the
									// ping-pong's CQ
			if (arg.startsWith("--bench.type=")) {
				all[Arrays.asList(all)
					.indexOf("--rdma.completion-queues.pp.type=legacy")] = "--rdma.completion-queues.pp.type="
							+ arg.substring("--bench.type=".length());
			}
		}
		String device = System.getenv("RDMA_TEST_DEVICE");
		if (device != null && !device.isBlank()) {
			all = Arrays.copyOf(all, all.length + 1);
			all[all.length - 1] = "--rdma.devices.bench.name=" + device;
		}
		System.exit(SpringApplication.exit(SpringApplication.run(StarterPingPong.class, all)));
	}

	/** A listener taking one completion per call (the default). */
	@Component
	@ConditionalOnProperty(name = "bench.batch", havingValue = "false", matchIfMissing = true)
	static class SinglePingPong extends PingPong {

		SinglePingPong(@Qualifier("bench") Context context, @Qualifier("pp") CompletionQueue queue,
				org.springframework.core.env.Environment env) {
			super(context, queue, env);
		}

		/** On the poller thread: one call per completion. */
		@RdmaCompletionListener(queue = "pp")
		public void onCompletion(WorkCompletion wc) {
			handle(wc);
		}

	}

	/**
	 * A batch listener ({@code --bench.batch=true}): one call per poll with every
	 * completion of the batch.
	 */
	@Component
	@ConditionalOnProperty(name = "bench.batch", havingValue = "true")
	static class BatchPingPong extends PingPong {

		BatchPingPong(@Qualifier("bench") Context context, @Qualifier("pp") CompletionQueue queue,
				org.springframework.core.env.Environment env) {
			super(context, queue, env);
		}

		/** On the poller thread: one call per poll batch. */
		@RdmaCompletionListener(queue = "pp", batch = true)
		public void onBatch(CompletionBatch batch) {
			for (int i = 0, n = batch.size(); i < n; i++) {
				handle(batch.get(i));
			}
		}

	}

	abstract static class PingPong implements ApplicationRunner, DisposableBean {

		static final int DEPTH = 16;
		static final int SLOT = 64;
		static final int MSG_LEN = 16;
		static final long RECV_ID_BASE = 1_000_000;
		static final int RECV = WcOpcode.RECV.code();

		/**
		 * Events the poller takes (single-message exchanges with a pause) before the
		 * repetitions.
		 */
		static final int EVENT_PATH_WARMUP = 300;

		private final LoopbackQueuePair qp;

		private final CompletionQueue queue;

		private int messages;

		private int msgs;

		private int sent;

		private int sendsDone;

		private volatile Thread poller;

		private volatile CountDownLatch done = new CountDownLatch(1);

		private final String name;

		PingPong(Context context, CompletionQueue queue, org.springframework.core.env.Environment env) {
			this.name = "e2e_starter"
					+ ("extended".equals(env.getProperty("rdma.completion-queues.pp.type")) ? "_ext" : "")
					+ (env.getProperty("bench.batch", Boolean.class, false) ? "_batch" : "")
					+ (env.getProperty("bench.metrics", Boolean.class, false) ? "_metrics" : "");
			this.qp = new LoopbackQueuePair(context, queue, queue, DEPTH, SLOT);
			this.queue = queue;
			for (int i = 0; i < DEPTH; i++) {
				qp.postRecv(RECV_ID_BASE + i, i);
			}
		}

		/** On the poller thread: what the listener does with one completion. */
		final void handle(WorkCompletion wc) {
			CountDownLatch latch = done; // volatile read: sees the counters the runner
											// reset before writing it
			if (poller == null) {
				poller = Thread.currentThread();
			}
			if (!wc.isSuccess()) {
				throw new IllegalStateException("ping-pong completion " + wc.status());
			}
			if (wc.opcodeCode() == RECV) {
				msgs++;
				long id = wc.wrId();
				qp.postRecv(id, (int) (id - RECV_ID_BASE));
				if (sent < messages) {
					qp.postSend(sent, sent % DEPTH, MSG_LEN, null);
					sent++;
				}
			}
			else {
				sendsDone++;
			}
			if (msgs == messages && sendsDone == sent) {
				latch.countDown();
			}
		}

		@Override
		public void run(ApplicationArguments args) throws InterruptedException {
			var rest = args.getNonOptionArgs();
			int n = rest.size() > 0 ? Integer.parseInt(rest.get(0)) : 2000;
			int reps = rest.size() > 1 ? Integer.parseInt(rest.get(1)) : 7;
			int warmup = rest.size() > 2 ? Integer.parseInt(rest.get(2)) : 5;
			var threads = (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();
			double[] rate = new double[reps];
			double[] bytes = new double[reps];
			// The poller's event path (arm, wait, get the event) runs once per idle
			// period, about once per repetition
			// here. The JDK customizes a method handle on its 128th call from code the
			// JIT has not compiled yet (a
			// one-time class of 64 KiB, allocated by the calling thread): make the poller
			// take the event path 300
			// times first (one message, then a pause in which it arms and waits), so that
			// the repetitions measure
			// the steady state.
			long eventsWanted = queue.eventsGot() + EVENT_PATH_WARMUP;
			for (int i = 0; i < 10 * EVENT_PATH_WARMUP && queue.eventsGot() < eventsWanted; i++) {
				exchange(1, threads);
				Thread.sleep(1);
			}
			long warmEvents = queue.eventsGot() - eventsWanted + EVENT_PATH_WARMUP;
			Repetitions rep = new Repetitions(name, warmup, reps);
			while (rep.next()) {
				double[] m = exchange(n, threads);
				if (rep.measured()) {
					rate[rep.index()] = n * 1e9 / m[0];
					bytes[rep.index()] = m[1];
					if (Boolean.getBoolean("bench.verbose")) {
						System.err.printf(Locale.ROOT, "StarterPingPong: rep %d: %.0f msgs/s, %.2f B/message, at %s%n",
								rep.index(), rate[rep.index()], m[1], java.time.LocalTime.now());
					}
				}
			}
			System.err.println("StarterPingPong: " + name + ": " + warmEvents + " completion events in the event-path "
					+ "warm-up, then " + (queue.eventsGot() - eventsWanted + EVENT_PATH_WARMUP - warmEvents) + " for "
					+ (long) rep.total() * n + " messages (" + rep.total() + " repetitions)");
			CqBench.report(name, "", "msgs_per_s", rate);
			CqBench.report("alloc", " of=" + name + "_poller", "B_per_message", bytes);
		}

		/**
		 * Ping-pongs {@code n} messages; returns {nanoseconds, bytes the poller thread
		 * allocated per message}.
		 */
		private double[] exchange(int n, com.sun.management.ThreadMXBean threads) throws InterruptedException {
			CountDownLatch latch = new CountDownLatch(1);
			// handed to the poller thread through the volatile write of done
			// (happens-before its next read)
			messages = n;
			msgs = 0;
			sendsDone = 0;
			sent = 1;
			done = latch;
			Thread p = poller;
			long a0 = p == null ? 0 : threads.getThreadAllocatedBytes(p.threadId());
			long t0 = System.nanoTime();
			qp.postSend(0, 0, MSG_LEN, null);
			if (!latch.await(120, TimeUnit.SECONDS)) {
				throw new IllegalStateException(name + ": timed out at " + msgs + " of " + n + " messages");
			}
			long t1 = System.nanoTime();
			long a1 = p == null ? 0 : threads.getThreadAllocatedBytes(p.threadId());
			return new double[] { t1 - t0, p == null ? Double.NaN : (double) (a1 - a0) / n };
		}

		@Override
		public void destroy() {
			qp.close();
		}

	}

}
