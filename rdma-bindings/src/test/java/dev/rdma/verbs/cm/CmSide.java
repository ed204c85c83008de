package dev.rdma.verbs.cm;

import java.time.Duration;
import java.util.ArrayDeque;

import dev.rdma.verbs.CompletionQueue;
import dev.rdma.verbs.QueuePair;
import dev.rdma.verbs.WorkCompletionSnapshot;
import dev.rdma.verbs.testing.TwoDevices;
import dev.rdma.verbs.testing.VerbsStack;

/**
 * One end of a device test connection: the application's own context, completion channel,
 * CQ, PD, memory region and RC QP on one device; completions are waited for through
 * completion events.
 */
final class CmSide extends VerbsStack {

	/** One endpoint of the tier: an RDMA device and the IPv4 address of its netdev. */
	record Endpoint(String device, String ipv4) {

		/**
		 * The two endpoints: {@code RDMA_DEVICE_A/B} and {@code RDMA_IP_A/B} of the
		 * two-device tier, or else the one device of the VM at its own (non-loopback)
		 * address for both ends. Fails, never skips, without them.
		 */
		static Endpoint[] pair() {
			String a = System.getenv("RDMA_DEVICE_A");
			if (a != null && !a.isBlank()) {
				// the two-device tier: the server on B, the client on A (TwoDevices'
				// convention)
				TwoDevices two = TwoDevices.require();
				return new Endpoint[] { new Endpoint(two.b().device(), two.b().ipv4()),
						new Endpoint(two.a().device(), two.a().ipv4()) };
			}
			String device = dev.rdma.verbs.testing.DeviceTestSupport.deviceName();
			String ip = System.getenv("RXE_VM_IPV4");
			if (ip == null || ip.isBlank() || ip.startsWith("127.")) {
				throw new AssertionError("rdma_cm device tests need RDMA devices on a real netdev: the two-device tier "
						+ "(RDMA_DEVICE_A/RDMA_IP_A, RDMA_DEVICE_B/RDMA_IP_B), or the VM with --netdev nic "
						+ "(RDMA_TEST_VM_NETDEV=nic); rdma_cm refuses loopback addresses on RoCE (RXE_VM_IPV4=" + ip
						+ ")");
			}
			Endpoint one = new Endpoint(device, ip);
			return new Endpoint[] { one, one };
		}

		/** A hardware counter of port 1 ({@code hw_counters/<name>}). */
		long counter(String name) {
			return dev.rdma.verbs.testing.TwoDevices.hwCounter(device, name);
		}

	}

	static final int SIZE = 4096;

	private final ArrayDeque<WorkCompletionSnapshot> pending = new ArrayDeque<>();

	long events;

	CmSide(String device) {
		super(device, 128, SIZE, cq -> new QueuePair.Attributes(cq, cq, 64, 64, true));
	}

	/**
	 * The next completion, waiting for it through completion events (arm, poll again,
	 * wait for an event, ack it); fails after {@code timeout}.
	 */
	WorkCompletionSnapshot take(String what, Duration timeout) {
		long deadline = System.nanoTime() + timeout.toNanos();
		while (true) {
			WorkCompletionSnapshot wc = pending.poll();
			if (wc != null) {
				return wc;
			}
			cq.poll(buffer, c -> pending.add(c.copy()));
			if (!pending.isEmpty()) {
				continue;
			}
			cq.requestNotify(false);
			cq.poll(buffer, c -> pending.add(c.copy()));
			if (!pending.isEmpty()) {
				continue;
			}
			long left = deadline - System.nanoTime();
			if (left <= 0) {
				throw new AssertionError("no completion within " + timeout + " waiting for " + what);
			}
			CompletionQueue fired = channel.getEvent(Duration.ofNanos(left), null);
			if (fired != null) {
				fired.ackEvents();
				events++;
			}
		}
	}

	/**
	 * Waits for the completion event of this side's armed CQ (the caller armed it before
	 * the work that completes) and acks it; fails when none comes.
	 */
	void expectEvent(String what) {
		CompletionQueue fired = channel.getEvent(Duration.ofSeconds(30), null);
		if (fired == null) {
			throw new AssertionError("no completion event within 30 s for " + what);
		}
		fired.ackEvents();
		events++;
	}

	WorkCompletionSnapshot take(String what) {
		return take(what, Duration.ofSeconds(30));
	}

}
