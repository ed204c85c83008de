package dev.rdma.spring.boot.autoconfigure.reliability;

import java.time.Duration;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.LockSupport;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.MeterRegistry;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

import org.springframework.boot.health.contributor.Status;

import dev.rdma.spring.boot.autoconfigure.RdmaAsyncEventMonitor;
import dev.rdma.spring.boot.autoconfigure.health.RdmaHealthIndicator;
import dev.rdma.spring.config.RdmaListenerEndpointRegistry;
import dev.rdma.spring.listener.CompletionQueueListenerContainer;
import dev.rdma.spring.listener.PollingMode;
import dev.rdma.verbs.AsyncEventType;
import dev.rdma.verbs.CompletionQueue;
import dev.rdma.verbs.Context;
import dev.rdma.verbs.NativeObjects;
import dev.rdma.verbs.WcStatus;
import dev.rdma.verbs.testing.DeviceTestSupport;
import dev.rdma.verbs.testing.Loopback;

import static dev.rdma.verbs.testing.NoNativeLeaks.assertNativeObjectsClosed;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * Issue 7, fault "the link goes down under load": while the four listeners of
 * {@link LoadApp} receive completions of the two self-connected RC QPs, the device's
 * netdev goes down ({@code ip link set <netdev> down}) and, a few seconds later, up
 * again. The async-event thread sees {@code IBV_EVENT_PORT_ERR} then
 * {@code IBV_EVENT_PORT_ACTIVE}, health goes DOWN and back UP, every posted work request
 * reaches its listener exactly once (successful, or failed/flushed with an error status),
 * nothing hangs, new QPs on the same queues work after the link is back, shutdown is
 * clean. Runs only inside the Soft-RoCE VM (see {@link DeviceAdmin}).
 */
@Tag(DeviceTestSupport.TAG)
@Tag("device-admin") // changes the link state: only on a throw-away device (scripts/test
						// decides)
class LinkDownReliabilityDeviceTest {

	private static final Duration TIMEOUT = Duration.ofSeconds(60);

	/** wr_ids each queue can record; posting stops well before. */
	private static final int CAPACITY = 1_000_000;

	/** Completions per queue on fresh QPs after the link is back. */
	private static final int AFTER = 512;

	private static String device;

	@BeforeAll
	static void device() {
		device = DeviceTestSupport.deviceName();
	}

	/**
	 * Posts receive i then send i on one QP, at most DEPTH outstanding, until stopped or
	 * the QP fails.
	 */
	static final class Poster {

		final Loopback qp;

		final LoadApp.Track send;

		final LoadApp.Track recv;

		final int first;

		final int limit;

		final AtomicInteger sendPosted = new AtomicInteger();

		final AtomicInteger recvPosted = new AtomicInteger();

		volatile boolean stop;

		volatile Throwable postFailure;

		final Thread thread;

		Poster(Loopback qp, LoadApp.Track send, LoadApp.Track recv, int first, int limit) {
			this.qp = qp;
			this.send = send;
			this.recv = recv;
			this.first = first;
			this.limit = limit;
			this.thread = Thread.ofPlatform().name("reliability-link-poster").start(this::run);
		}

		private void run() {
			for (int i = first; i < limit && !stop; i++) {
				while (i - Math.min(send.delivered.get(), recv.delivered.get()) >= LoadApp.DEPTH && !stop) {
					LockSupport.parkNanos(20_000);
				}
				// a failed completion means the QP is in the error state: anything posted
				// now would only flush
				if (stop || send.failedStatus.get() + recv.failedStatus.get() > 0) {
					break;
				}
				try {
					qp.postRecv(i, i % LoadApp.DEPTH);
					recvPosted.incrementAndGet();
					qp.postSend(i, i % LoadApp.DEPTH, 8, null);
					sendPosted.incrementAndGet();
				}
				catch (RuntimeException ex) {
					postFailure = ex;
					break;
				}
			}
		}

		void stopAndJoin() throws InterruptedException {
			stop = true;
			thread.join(10_000);
			assertThat(thread.isAlive()).as("poster still running").isFalse();
		}

	}

	private static String statuses(LoadApp.Track t) {
		Map<String, Long> byName = new TreeMap<>();
		t.failedByStatus.forEach((code, n) -> byName.put(WcStatus.of(code).name(), n.get()));
		return byName.toString().replace(" ", "");
	}

	/**
	 * wr_ids first .. first+n-1 each seen exactly once, none of first+n .. first+n+DEPTH
	 * seen.
	 */
	private static void assertExactlyOnce(LoadApp.Track t, int first, int n) {
		for (int id = first; id < first + n; id++) {
			assertThat(t.seen[id]).as(t.queue + " wr_id " + id + " sightings").isEqualTo((byte) 1);
		}
		for (int id = first + n; id < Math.min(t.seen.length, first + n + LoadApp.DEPTH); id++) {
			assertThat(t.seen[id]).as(t.queue + " wr_id " + id + " (never posted) sightings").isZero();
		}
	}

	@Test
	void linkDownUnderLoad() throws Exception {
		DeviceAdmin.requireThrowAwayDevice("taking the device's netdev down");
		String netdev = DeviceAdmin.netdev(device);
		long open = NativeObjects.open();
		long[] closeMs = new long[1];
		RdmaListenerEndpointRegistry[] registry = new RdmaListenerEndpointRegistry[1];
		boolean[] linkDown = new boolean[1];
		try {
			LoadApp.runner(device, PollingMode.EVENT, CAPACITY).run(context -> {
				assertThat(context).hasNotFailed();
				LoadApp.Recorder recorder = context.getBean(LoadApp.Recorder.class);
				RdmaHealthIndicator health = context.getBean(RdmaHealthIndicator.class);
				RdmaAsyncEventMonitor.DeviceEvents events = context.getBean(RdmaAsyncEventMonitor.class).events("nic0");
				registry[0] = context.getBean(RdmaListenerEndpointRegistry.class);
				assertThat(health.health().getStatus()).isEqualTo(Status.UP);
				Loopback qp0 = context.getBean("qp0", Loopback.class);
				Loopback qp1 = context.getBean("qp1", Loopback.class);
				int limit = CAPACITY - AFTER - 2 * LoadApp.DEPTH;
				Poster p0 = new Poster(qp0, recorder.s0, recorder.r0, 0, limit);
				Poster p1 = new Poster(qp1, recorder.s1, recorder.r1, 0, limit);
				DeviceTestSupport.await(TIMEOUT,
						() -> recorder.r0.delivered.get() >= 1000 && recorder.r1.delivered.get() >= 1000,
						"1000 completions per queue before the link goes down");
				long deliveredBefore = total(recorder);

				long t0 = System.nanoTime();
				DeviceTestSupport.run(30, "ip", "link", "set", netdev, "down");
				linkDown[0] = true;
				long tDownCmd = System.nanoTime();
				DeviceTestSupport.await(TIMEOUT, () -> events.portErrors() > 0, "IBV_EVENT_PORT_ERR after link down");
				long tPortErr = System.nanoTime();
				DeviceTestSupport.await(TIMEOUT, () -> health.health().getStatus().equals(Status.DOWN),
						"health DOWN after link down");
				long tHealthDown = System.nanoTime();
				var downHealth = health.health();
				// keep it down well past the RC retry budget (timeout 14 = 67 ms,
				// retry_cnt 7)
				Thread.sleep(3000);
				long deliveredWhileDown = total(recorder) - deliveredBefore;

				long t1 = System.nanoTime();
				DeviceTestSupport.run(30, "ip", "link", "set", netdev, "up");
				linkDown[0] = false;
				DeviceTestSupport.await(TIMEOUT,
						() -> events.portActive() > 0 && events.lastPortEvent() == AsyncEventType.PORT_ACTIVE,
						"IBV_EVENT_PORT_ACTIVE after link up");
				long tPortActive = System.nanoTime();
				DeviceTestSupport.await(TIMEOUT, () -> health.health().getStatus().equals(Status.UP),
						"health UP after link up");
				long tHealthUp = System.nanoTime();

				// stop posting; every posted work request must reach its listener,
				// successful or not
				p0.stopAndJoin();
				p1.stopAndJoin();
				long tStopped = System.nanoTime();
				Poster[] posters = { p0, p1 };
				// rxe: a receive posted after the QP silently entered the error state
				// (the poster cannot know before
				// it sees the failed completion) is never flushed by itself: rxe's
				// post_recv writes the queue in user
				// space and never enters the kernel, so nothing runs the responder that
				// flushes. What an application
				// does with an RC QP that reported an error, ibv_modify_qp(ERR), flushes
				// it. It does the same with a
				// QP whose work is still outstanding long after the link came back: rxe
				// (kernel 6.1) now and then
				// leaves a QP's sends neither completed nor failed after a link flap
				// (once in ~10 runs: 64 sends and
				// 63 receives of one QP, no completion at all, after the 5 s below and 60
				// s more). Completions the
				// provider did produce cannot be what is outstanding after 5 s: the
				// poller drains at least every
				// 500 ms (its wait timeout) even if an event were missed, so this does
				// not hide a lost completion.
				boolean drained = drained(posters, Duration.ofSeconds(5));
				long naturalDrainMs = (System.nanoTime() - tStopped) / 1_000_000;
				String pendingBeforeModify = pending(posters);
				int movedToError = 0;
				int movedWhileStuck = 0;
				for (Poster p : posters) {
					boolean reportedError = p.send.failedStatus.get() + p.recv.failedStatus.get() > 0;
					boolean outstanding = !drained(new Poster[] { p }, Duration.ZERO);
					if (reportedError || outstanding) {
						p.qp.qp().moveToError();
						movedToError++;
						movedWhileStuck += reportedError ? 0 : 1;
					}
				}
				assertThat(drained(posters, TIMEOUT))
					.as("every posted work request delivered to its listener (" + pending(posters) + ")")
					.isTrue();
				long drainMs = (System.nanoTime() - tStopped) / 1_000_000;
				for (Poster p : posters) {
					assertExactlyOnce(p.send, 0, p.sendPosted.get());
					assertExactlyOnce(p.recv, 0, p.recvPosted.get());
				}
				for (LoadApp.Track t : recorder.tracks()) {
					assertThat(t.outOfRange).as(t.queue + " unknown wr_ids").isZero();
					assertThat(t.duplicates).as(t.queue + " duplicates").isZero();
					assertThat(t.outOfOrder).as(t.queue + " out of order").isZero();
				}
				String qpStates = "qp0:" + qp0.qp().state() + ",qp1:" + qp1.qp().state();
				// the poller's meters: every failed completion under its status, every
				// other one as success
				MeterRegistry meters = context.getBean(MeterRegistry.class);
				for (LoadApp.Track t : recorder.tracks()) {
					DeviceTestSupport.await(TIMEOUT, () -> meteredAsSeen(meters, t),
							t.queue + ": rdma.completions by status equal to what the listener saw "
									+ metered(meters, t) + " vs delivered " + t.delivered.get() + ", failed "
									+ t.failedByStatus);
				}
				assertThat(java.util.Arrays.stream(recorder.tracks()).mapToLong(t -> t.failedStatus.get()).sum())
					.as("failed completions while the link was down")
					.isPositive();

				// the application survives: fresh QPs on the same four queues carry
				// completions again
				Context nic0 = context.getBean("nic0", Context.class);
				long failedBefore = failed(recorder);
				int[] after = new int[2];
				for (int q = 0; q < 2; q++) {
					Poster old = posters[q];
					int first = Math.max(old.sendPosted.get(), old.recvPosted.get());
					after[q] = first;
					try (Loopback fresh = freshLoopback(nic0, context.getBean("s" + q, CompletionQueue.class),
							context.getBean("r" + q, CompletionQueue.class))) {
						for (int i = first; i < first + AFTER; i++) {
							fresh.postRecv(i, i % LoadApp.DEPTH);
							fresh.postSend(i, i % LoadApp.DEPTH, 8, null);
							int k = i;
							DeviceTestSupport.await(TIMEOUT, () -> old.send.seen[k] == 1 && old.recv.seen[k] == 1,
									"wr_id " + k + " on the fresh QP after the link came back");
						}
					}
					assertExactlyOnce(old.send, first, AFTER);
					assertExactlyOnce(old.recv, first, AFTER);
				}
				assertThat(failed(recorder)).as("failed completions on the fresh QPs").isEqualTo(failedBefore);
				assertThat(p0.postFailure == null ? null : p0.postFailure.toString()).as("qp0 post failure").isNull();
				assertThat(p1.postFailure == null ? null : p1.postFailure.toString()).as("qp1 post failure").isNull();

				long start = System.nanoTime();
				context.getSourceApplicationContext().close();
				closeMs[0] = (System.nanoTime() - start) / 1_000_000;
				Reliability.report("link-down", "netdev", netdev, "mode", "event", "deliveredBeforeDown",
						deliveredBefore, "deliveredWhileDown", deliveredWhileDown, "ipLinkDownMs", ms(t0, tDownCmd),
						"portErrMs", ms(t0, tPortErr), "healthDownMs", ms(t0, tHealthDown), "downDetails",
						String.valueOf(downHealth.getDetails().get("devices")).replace(" ", ""), "portActiveMs",
						ms(t1, tPortActive), "healthUpMs", ms(t1, tHealthUp), "portErrEvents", events.portErrors(),
						"portActiveEvents", events.portActive(), "asyncEvents", events.total(), "posted.qp0",
						p0.sendPosted + "/" + p0.recvPosted, "posted.qp1", p1.sendPosted + "/" + p1.recvPosted,
						"failed.s0", statuses(recorder.s0), "failed.r0", statuses(recorder.r0), "failed.s1",
						statuses(recorder.s1), "failed.r1", statuses(recorder.r1), "qpStates", qpStates, "drainMs",
						drainMs, "drainedWithoutModify", drained, "naturalDrainMs", naturalDrainMs,
						"pendingBeforeModify", pendingBeforeModify, "qpsMovedToError", movedToError,
						"qpsMovedWithoutAnError", movedWhileStuck, "freshQpCompletions", 4 * AFTER, "freshFrom",
						after[0] + "/" + after[1], "closeMs", closeMs[0]);
			});
		}
		finally {
			if (linkDown[0]) {
				DeviceTestSupport.run(30, "ip", "link", "set", netdev, "up");
			}
		}
		for (CompletionQueueListenerContainer poller : registry[0].getListenerContainers()) {
			assertThat(poller.isRunning()).as("poller of " + poller.queue() + " after close").isFalse();
		}
		assertThat(closeMs[0]).as("shutdown ms").isLessThan(5000);
		assertNativeObjectsClosed(open, "the application closed");
	}

	/**
	 * A new self-connected QP once the port is ACTIVE again; its IPv4 GID may take a
	 * moment to come back.
	 */
	private static Loopback freshLoopback(Context nic0, CompletionQueue send, CompletionQueue recv)
			throws InterruptedException {
		long deadline = System.nanoTime() + TIMEOUT.toNanos();
		while (true) {
			try {
				return new Loopback(nic0, send, recv, LoadApp.DEPTH, 64);
			}
			catch (IllegalStateException ex) {
				if (System.nanoTime() > deadline) {
					throw ex;
				}
				Thread.sleep(100);
			}
		}
	}

	/**
	 * Waits until every work request posted by {@code posters} was delivered; false after
	 * {@code timeout}.
	 */
	private static boolean drained(Poster[] posters, Duration timeout) throws InterruptedException {
		long deadline = System.nanoTime() + timeout.toNanos();
		while (true) {
			boolean all = true;
			for (Poster p : posters) {
				all &= p.send.delivered.get() == p.sendPosted.get() && p.recv.delivered.get() == p.recvPosted.get();
			}
			if (all) {
				return true;
			}
			if (System.nanoTime() > deadline) {
				return false;
			}
			Thread.sleep(5);
		}
	}

	/** Posted minus delivered per queue, e.g. {@code s0=0,r0=21,s1=0,r1=0}. */
	private static String pending(Poster[] posters) {
		StringBuilder b = new StringBuilder();
		for (Poster p : posters) {
			b.append(b.isEmpty() ? "" : ",")
				.append(p.send.queue)
				.append('=')
				.append(p.sendPosted.get() - p.send.delivered.get())
				.append(',')
				.append(p.recv.queue)
				.append('=')
				.append(p.recvPosted.get() - p.recv.delivered.get());
		}
		return b.toString();
	}

	private static long total(LoadApp.Recorder r) {
		long n = 0;
		for (LoadApp.Track t : r.tracks()) {
			n += t.delivered.get();
		}
		return n;
	}

	/**
	 * The queue's rdma.completions counters equal the listener's own counts, per status.
	 */
	private static boolean meteredAsSeen(MeterRegistry meters, LoadApp.Track t) {
		Map<String, Double> metered = metered(meters, t);
		Map<String, Double> seen = new TreeMap<>();
		long failed = 0;
		for (Map.Entry<Integer, java.util.concurrent.atomic.AtomicLong> e : t.failedByStatus.entrySet()) {
			seen.put(WcStatus.of(e.getKey()).name().toLowerCase(java.util.Locale.ROOT), (double) e.getValue().get());
			failed += e.getValue().get();
		}
		seen.put("success", (double) (t.delivered.get() - failed));
		return metered.equals(seen);
	}

	private static Map<String, Double> metered(MeterRegistry meters, LoadApp.Track t) {
		Map<String, Double> metered = new TreeMap<>();
		for (Counter c : meters.find("rdma.completions").tag("queue", t.queue).counters()) {
			if (c.count() > 0) {
				metered.put(c.getId().getTag("status"), c.count());
			}
		}
		return metered;
	}

	private static long failed(LoadApp.Recorder r) {
		long n = 0;
		for (LoadApp.Track t : r.tracks()) {
			n += t.failedStatus.get();
		}
		return n;
	}

	private static long ms(long from, long to) {
		return (to - from) / 1_000_000;
	}

}
