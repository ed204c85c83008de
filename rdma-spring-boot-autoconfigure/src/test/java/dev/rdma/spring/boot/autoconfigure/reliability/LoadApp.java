package dev.rdma.spring.boot.autoconfigure.reliability;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.LockSupport;

import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;

import org.springframework.beans.factory.annotation.Qualifier;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.context.ApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.core.env.Environment;

import dev.rdma.spring.annotation.RdmaCompletionListener;
import dev.rdma.spring.boot.autoconfigure.RdmaAutoConfigurations;
import dev.rdma.spring.listener.PollingMode;
import dev.rdma.verbs.CompletionBatch;
import dev.rdma.verbs.CompletionQueue;
import dev.rdma.verbs.Context;
import dev.rdma.verbs.WorkCompletion;
import dev.rdma.verbs.testing.DeviceTestSupport;
import dev.rdma.verbs.testing.Loopback;

/**
 * Four completion queues sharing one completion channel ({@code events0}) on the device,
 * fed by two self-connected RC QPs: qp0 sends on {@code s0} and receives on {@code r0},
 * qp1 sends on {@code s1} and receives on {@code r1}. Each queue has a listener (two
 * per-completion, two batch) recording every wr_id into a {@link Track}.
 */
@Configuration(proxyBeanMethods = false)
class LoadApp {

	static final String[] QUEUES = { "s0", "r0", "s1", "r1" };

	/**
	 * Outstanding sends (and receives) per QP; the CQs have 4x as many entries, so
	 * nothing overruns.
	 */
	static final int DEPTH = 64;
	static final int CQ_ENTRIES = 256;

	/** The properties of the four queues and the channel in {@code mode}. */
	static ApplicationContextRunner runner(String device, PollingMode mode, int perQueue, String... more) {
		String m = Reliability.lower(mode);
		List<String> props = new ArrayList<>(
				List.of("rdma.channels.events0.device=nic0", "reliability.per-queue=" + perQueue));
		for (String q : QUEUES) {
			String p = "rdma.completion-queues." + q;
			props.add(p + ".type=" + (q.startsWith("s") ? "legacy" : "extended"));
			props.add(p + ".entries=" + CQ_ENTRIES);
			props.add(p + ".channel=events0");
			props.add(p + ".polling.mode=" + m);
		}
		return RdmaAutoConfigurations.onDevice(device)
			.withUserConfiguration(LoadApp.class)
			.withPropertyValues(props.toArray(String[]::new))
			.withPropertyValues(more);
	}

	@Bean
	Recorder recorder(Environment env) {
		return new Recorder(env.getProperty("reliability.per-queue", Integer.class, 1024),
				env.getProperty("reliability.fail-every", Integer.class, 0),
				env.getProperty("reliability.block-ms", Long.class, 0L));
	}

	@Bean
	MeterRegistry meterRegistry() {
		return new SimpleMeterRegistry();
	}

	@Bean
	Loopback qp0(@Qualifier("nic0") Context nic0, @Qualifier("s0") CompletionQueue s0,
			@Qualifier("r0") CompletionQueue r0) {
		return new Loopback(nic0, s0, r0, DEPTH, 64);
	}

	@Bean
	Loopback qp1(@Qualifier("nic0") Context nic0, @Qualifier("s1") CompletionQueue s1,
			@Qualifier("r1") CompletionQueue r1) {
		return new Loopback(nic0, s1, r1, DEPTH, 64);
	}

	/**
	 * What one queue's listener saw. Written by its poller thread only; read after it
	 * stopped (or via delivered).
	 */
	static final class Track {

		final String queue;

		final byte[] seen;

		final AtomicLong delivered = new AtomicLong();

		final AtomicLong failedStatus = new AtomicLong();

		final AtomicLong thrown = new AtomicLong();

		/** Failed completions by {@code ibv_wc_status} code. */
		final Map<Integer, AtomicLong> failedByStatus = new ConcurrentHashMap<>();

		long outOfOrder;

		long duplicates;

		long outOfRange;

		private long next;

		Track(String queue, int n) {
			this.queue = queue;
			this.seen = new byte[n];
		}

		void record(WorkCompletion wc) {
			long id = wc.wrId();
			if (!wc.isSuccess()) {
				failedStatus.incrementAndGet();
				failedByStatus.computeIfAbsent(wc.statusCode(), k -> new AtomicLong()).incrementAndGet();
			}
			if (id < 0 || id >= seen.length) {
				outOfRange++;
			}
			else if (seen[(int) id]++ != 0) {
				duplicates++;
			}
			if (id != next) {
				outOfOrder++;
			}
			next = id + 1;
			delivered.incrementAndGet();
		}

		/** wr_ids never delivered. */
		long lost() {
			long lost = 0;
			for (byte b : seen) {
				if (b == 0) {
					lost++;
				}
			}
			return lost;
		}

	}

	/** The four listeners. */
	static final class Recorder {

		final int perQueue;

		final int failEvery;

		final long blockMs;

		final Track s0;

		final Track r0;

		final Track s1;

		final Track r1;

		/**
		 * Counted down when a listener enters a block (blockMs > 0 and {@link #blockNext}
		 * set).
		 */
		final CountDownLatch blocked = new CountDownLatch(1);

		final CountDownLatch release = new CountDownLatch(1);

		volatile String blockQueue;

		Recorder(int perQueue, int failEvery, long blockMs) {
			this.perQueue = perQueue;
			this.failEvery = failEvery;
			this.blockMs = blockMs;
			s0 = new Track("s0", perQueue);
			r0 = new Track("r0", perQueue);
			s1 = new Track("s1", perQueue);
			r1 = new Track("r1", perQueue);
		}

		Track[] tracks() {
			return new Track[] { s0, r0, s1, r1 };
		}

		Track track(String queue) {
			for (Track t : tracks()) {
				if (t.queue.equals(queue)) {
					return t;
				}
			}
			throw new IllegalArgumentException(queue);
		}

		/**
		 * The next completion on {@code queue} blocks its listener (until
		 * {@link #release} or blockMs).
		 */
		void blockNext(String queue) {
			blockQueue = queue;
		}

		private void maybeBlock(String queue) {
			if (queue.equals(blockQueue)) {
				blockQueue = null;
				blocked.countDown();
				try {
					release.await(blockMs, TimeUnit.MILLISECONDS);
				}
				catch (InterruptedException ex) {
					Thread.currentThread().interrupt();
				}
			}
		}

		private void one(Track t, WorkCompletion wc) {
			t.record(wc);
			maybeBlock(t.queue);
			if (failEvery > 0 && wc.wrId() % failEvery == failEvery - 1) {
				t.thrown.incrementAndGet();
				throw new IllegalStateException("listener failure (every " + failEvery + "th) for wr_id " + wc.wrId());
			}
		}

		private void batch(Track t, CompletionBatch batch) {
			boolean fail = false;
			for (int i = 0; i < batch.size(); i++) {
				WorkCompletion wc = batch.get(i);
				t.record(wc);
				fail |= failEvery > 0 && wc.wrId() % failEvery == failEvery - 1;
			}
			maybeBlock(t.queue);
			if (fail) {
				t.thrown.incrementAndGet();
				throw new IllegalStateException(
						"batch listener failure (a batch with an every-" + failEvery + "th wr_id)");
			}
		}

		@RdmaCompletionListener(queue = "s0")
		void onS0(WorkCompletion wc) {
			one(s0, wc);
		}

		@RdmaCompletionListener(queue = "r0", batch = true)
		void onR0(CompletionBatch batch) {
			batch(r0, batch);
		}

		@RdmaCompletionListener(queue = "s1", batch = true)
		void onS1(CompletionBatch batch) {
			batch(s1, batch);
		}

		@RdmaCompletionListener(queue = "r1")
		void onR1(WorkCompletion wc) {
			one(r1, wc);
		}

	}

	// ------------------------------------------------------------------ the driver

	/**
	 * Posts {@code perQp} receives and sends (wr_id 0 .. perQp-1) on each QP from one
	 * thread per QP, keeping at most {@link #DEPTH} outstanding, and waits until all four
	 * listeners saw {@code perQp} completions.
	 * @return the time from the first post to the last delivery
	 */
	static Duration drive(ApplicationContext context, int perQp, Duration timeout) throws InterruptedException {
		return drive(context, 0, perQp, timeout, "qp0", "qp1");
	}

	/**
	 * Like {@link #drive(ApplicationContext, int, Duration)} for wr_ids first ..
	 * first+n-1, on the named QPs.
	 */
	static Duration drive(ApplicationContext context, int first, int n, Duration timeout, String... qps)
			throws InterruptedException {
		Recorder recorder = context.getBean(Recorder.class);
		AtomicReference<Throwable> failure = new AtomicReference<>();
		long start = System.nanoTime();
		long deadline = start + timeout.toNanos();
		List<Thread> threads = new ArrayList<>();
		List<Track> tracks = new ArrayList<>();
		for (String name : qps) {
			Loopback qp = context.getBean(name, Loopback.class);
			String i = name.substring(2);
			Track send = recorder.track("s" + i);
			Track recv = recorder.track("r" + i);
			tracks.add(send);
			tracks.add(recv);
			threads.add(poster(qp, send, recv, first, n, deadline, failure));
		}
		for (Thread t : threads) {
			t.join();
		}
		if (failure.get() != null) {
			throw new AssertionError("posting failed", failure.get());
		}
		DeviceTestSupport.await(Duration.ofNanos(Math.max(1, deadline - System.nanoTime())),
				() -> tracks.stream().allMatch(t -> t.delivered.get() >= first + n),
				(first + n) + " completions on each queue of " + String.join(", ", qps) + " (delivered: "
						+ delivered(recorder) + ")");
		return Duration.ofNanos(System.nanoTime() - start);
	}

	static String delivered(Recorder r) {
		return "s0=" + r.s0.delivered + " r0=" + r.r0.delivered + " s1=" + r.s1.delivered + " r1=" + r.r1.delivered;
	}

	static Thread poster(Loopback qp, Track send, Track recv, int first, int n, long deadline,
			AtomicReference<Throwable> failure) {
		Thread t = Thread.ofPlatform().name("reliability-poster").start(() -> {
			try {
				for (int i = first; i < first + n; i++) {
					while (i - Math.min(send.delivered.get(), recv.delivered.get()) >= DEPTH) {
						if (System.nanoTime() > deadline) {
							throw new AssertionError("window never opened at wr_id " + i + " (sends delivered "
									+ send.delivered + ", receives " + recv.delivered + ")");
						}
						LockSupport.parkNanos(20_000);
					}
					int slot = i % DEPTH;
					qp.postRecv(i, slot);
					qp.postSend(i, slot, 8, null);
				}
			}
			catch (Throwable ex) {
				failure.compareAndSet(null, ex);
			}
		});
		return t;
	}

}
