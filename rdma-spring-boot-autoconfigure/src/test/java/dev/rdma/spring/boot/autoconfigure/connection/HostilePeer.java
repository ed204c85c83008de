package dev.rdma.spring.boot.autoconfigure.connection;

import java.lang.foreign.ValueLayout;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.UnknownHostException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;

import dev.rdma.verbs.CompletionQueue;
import dev.rdma.verbs.Context;
import dev.rdma.verbs.MemoryRegion;
import dev.rdma.verbs.ProtectionDomain;
import dev.rdma.verbs.QueuePair;
import dev.rdma.verbs.ReceiveWorkRequest;
import dev.rdma.verbs.SendWorkRequest;
import dev.rdma.verbs.WcStatus;
import dev.rdma.verbs.WorkCompletionBuffer;
import dev.rdma.verbs.cm.CmEvent;
import dev.rdma.verbs.cm.CmEventType;
import dev.rdma.verbs.cm.CmParameters;
import dev.rdma.verbs.cm.ConnectionException;
import dev.rdma.verbs.cm.ConnectionId;
import dev.rdma.verbs.cm.EventChannel;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * A peer this project does not control, on the bindings only: it connects to a starter's
 * rdma_cm server from a device and address of its choice with the private data of its
 * choice, and then sends what it likes (a message larger than the server's buffers, an
 * RDMA WRITE with an rkey of its choice). Each {@link #attempt} uses a QP and id of its
 * own, closed by the next attempt or {@link #close}.
 */
final class HostilePeer implements AutoCloseable {

	static final Duration STEP = Duration.ofSeconds(10);

	private final Context context;

	private final EventChannel channel;

	private final CompletionQueue cq;

	private final ProtectionDomain pd;

	private final MemoryRegion mr;

	private final WorkCompletionBuffer completions = new WorkCompletionBuffer(8);

	private final InetSocketAddress source;

	private QueuePair qp;

	private ConnectionId id;

	HostilePeer(String device, String sourceIp) throws UnknownHostException {
		this.context = Context.open(device);
		this.channel = EventChannel.create();
		this.cq = context.createCompletionQueue(64, null, 0);
		this.pd = context.allocateProtectionDomain();
		this.mr = pd.registerMemory(8192, EnumSet.of(MemoryRegion.Access.LOCAL_WRITE));
		this.source = new InetSocketAddress(InetAddress.getByName(sourceIp), 0);
	}

	/**
	 * Connects to {@code server} with {@code privateData}: the server's answer (its
	 * accept's private data) once established, or the {@link ConnectionException} of a
	 * reject (its private data the server's reason).
	 */
	Object attempt(InetSocketAddress server, byte[] privateData) {
		closeAttempt();
		qp = pd.createQueuePair(new QueuePair.Attributes(cq, cq, 16, 16, true));
		id = channel.createId();
		try {
			CmEvent answer = id.connect(server, source, qp, privateData, STEP);
			for (int i = 0; i < 4; i++) {
				qp.postRecv(new ReceiveWorkRequest().wrId(100 + i).buffer(mr, 4096 + i * 1024L, 1024));
			}
			return answer;
		}
		catch (ConnectionException ex) {
			return ex;
		}
	}

	/**
	 * Connects up to the server's rdma_accept and stops there: CONNECT_RESPONSE read,
	 * never RTU ({@code rdma_establish}), so the server waits for an ESTABLISHED that
	 * never comes.
	 */
	CmEvent halfOpen(InetSocketAddress server) {
		closeAttempt();
		qp = pd.createQueuePair(new QueuePair.Attributes(cq, cq, 16, 16, true));
		id = channel.createId();
		id.resolveAddress(source, server, ConnectionId.RESOLVE_ATTEMPT);
		ConnectionTestSupport.expect(id, CmEventType.ADDR_RESOLVED, STEP);
		id.resolveRoute(STEP);
		ConnectionTestSupport.expect(id, CmEventType.ROUTE_RESOLVED, STEP);
		id.moveQueuePair(qp, QueuePair.State.INIT);
		id.connect(qp, CmParameters.DEFAULTS, new byte[0]);
		CmEvent e = id.getEvent(STEP);
		assertThat(e).as("the server's answer to a half-open connect").isNotNull();
		return e;
	}

	/**
	 * {@code n} ids resolved to {@code server} (address and route, all at once), ready
	 * for a {@link Flood}, each with a QP of its own moved to INIT (the CM rejects a
	 * request that names the QP of another as a stale connection, before the server sees
	 * it).
	 */
	Flood prepareFlood(InetSocketAddress server, int n) {
		Flood flood = new Flood();
		try {
			for (int i = 0; i < n; i++) {
				ConnectionId request = channel.createId();
				flood.ids.add(request);
				flood.qps.add(pd.createQueuePair(new QueuePair.Attributes(cq, cq, 1, 1, true)));
				request.resolveAddress(source, server, ConnectionId.RESOLVE_ATTEMPT);
			}
			for (ConnectionId request : flood.ids) {
				ConnectionTestSupport.expect(request, CmEventType.ADDR_RESOLVED, STEP);
				request.resolveRoute(STEP);
			}
			for (ConnectionId request : flood.ids) {
				ConnectionTestSupport.expect(request, CmEventType.ROUTE_RESOLVED, STEP);
			}
			for (int i = 0; i < n; i++) {
				flood.ids.get(i).moveQueuePair(flood.qps.get(i), QueuePair.State.INIT);
			}
			return flood;
		}
		catch (RuntimeException | AssertionError ex) {
			flood.close();
			throw ex;
		}
	}

	/**
	 * Connect requests from ids resolved in advance, sent back to back ({@link #fire});
	 * none is ever established (RTU): each the server accepts stays half-open until the
	 * server drops it.
	 */
	static final class Flood implements AutoCloseable {

		final List<ConnectionId> ids = new ArrayList<>();

		private final List<QueuePair> qps = new ArrayList<>();

		/**
		 * Sends the connect requests of ids {@code from} (inclusive) to {@code to}
		 * (exclusive) with {@code privateData}, back to back; returns the nanoseconds it
		 * took.
		 */
		long fire(int from, int to, byte[] privateData) {
			long start = System.nanoTime();
			for (int i = from; i < to; i++) {
				ids.get(i).connect(qps.get(i), CmParameters.DEFAULTS, privateData);
			}
			return System.nanoTime() - start;
		}

		/**
		 * The server's answer to the request of id {@code i}: CONNECT_RESPONSE or
		 * REJECTED.
		 */
		CmEvent answer(int i) {
			CmEvent e = ids.get(i).getEvent(STEP);
			assertThat(e).as("the server's answer to connect request %d of the flood", i).isNotNull();
			return e;
		}

		/** The next event of id {@code i} within {@code timeout}, or null. */
		CmEvent next(int i, Duration timeout) {
			return ids.get(i).getEvent(timeout);
		}

		@Override
		public void close() {
			for (ConnectionId request : ids) {
				request.close();
			}
			for (QueuePair qp : qps) {
				qp.close();
			}
		}

	}

	/** The id of the current attempt (its events: DISCONNECTED, REJECTED, ...). */
	ConnectionId id() {
		return id;
	}

	/**
	 * Posts one signaled operation of {@code length} bytes from its buffer and returns
	 * the status of its completion: a SEND, or an RDMA WRITE to
	 * {@code address}/{@code rkey} when {@code rkey} is not null.
	 */
	WcStatus post(int length, Long address, Integer rkey) {
		for (int i = 0; i < length; i++) {
			mr.buffer().set(ValueLayout.JAVA_BYTE, i, (byte) (0xA5 ^ i));
		}
		SendWorkRequest wr = new SendWorkRequest().wrId(7).buffer(mr, 0, length).flags(SendWorkRequest.Flag.SIGNALED);
		if (rkey != null) {
			wr.opcode(QueuePair.SendOpcode.RDMA_WRITE).remote(address, rkey);
		}
		qp.postSend(wr);
		long deadline = System.nanoTime() + STEP.toNanos();
		while (System.nanoTime() - deadline < 0) {
			int n = cq.poll(completions);
			for (int i = 0; i < n; i++) {
				if (completions.get(i).wrId() == 7) {
					return completions.get(i).status();
				}
			}
			Thread.onSpinWait();
		}
		throw new AssertionError("no completion of the hostile operation within " + STEP);
	}

	/**
	 * Ends the current attempt: its id destroyed (a connected one sends the server a
	 * DREQ) and its QP closed.
	 */
	void closeAttempt() {
		if (id != null) {
			id.close();
			id = null;
		}
		if (qp != null) {
			qp.close();
			qp = null;
		}
	}

	@Override
	public void close() {
		closeAttempt();
		completions.close();
		mr.close();
		pd.close();
		cq.close();
		channel.close();
		context.close();
	}

}
