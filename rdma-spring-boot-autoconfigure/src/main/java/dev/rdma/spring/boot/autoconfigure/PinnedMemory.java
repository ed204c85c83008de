package dev.rdma.spring.boot.autoconfigure;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;

import org.jspecify.annotations.Nullable;

import dev.rdma.spring.RdmaConfigurationException;
import dev.rdma.verbs.LockedMemory;

/**
 * What the {@code rdma.*} configuration pins (locks) in memory when every connection
 * holds its peers: the kernel counts it against {@code RLIMIT_MEMLOCK} unless the process
 * has {@code CAP_IPC_LOCK}, and a registration past the limit fails with {@code ENOMEM}.
 * Computed from the properties alone (nothing native), whole pages, as the sum of
 * {@link Part parts}:
 * <ul>
 * <li>each connection: its send buffers ({@code send-depth × message-size}), receive
 * buffers ({@code receive-buffers × message-size}), remote-access region
 * ({@code remote-access-size}) and queue-pair rings (an estimate, see below), times
 * {@code max-peers} for a server;</li>
 * <li>each completion queue: its ring, an estimate ({@code entries + 1} rounded up to a
 * power of two, times 64-byte CQEs).</li>
 * </ul>
 * The rings are an upper estimate of what hardware providers (mlx5) pin in user memory;
 * Soft-RoCE (rxe) keeps them in kernel memory and pins only the memory regions. A server
 * with {@code shared-receive-queue.enabled} has no receive buffers per peer: its shared
 * receive queue is a part of its own (kind {@code shared-receive-queue}, counted once,
 * not per peer: {@code depth × message-size} and its ring, {@code depth} receive WQEs).
 * <p>
 * {@link #check} compares the total with a {@link LockedMemory.Limit}: it fails startup
 * ({@link RdmaConfigurationException}, both numbers, the property that drives the total
 * and the fixes) when the total does not fit and returns a warning when it fits with less
 * than {@link #MARGIN_PERCENT} percent of the limit to spare. Not thread-safe while
 * built; read-only afterwards.
 */
public final class PinnedMemory {

	/** Less headroom than this share of the limit is warned about. */
	public static final int MARGIN_PERCENT = 20;

	/** Bytes of a CQE as the estimate counts it (mlx5's). */
	static final int CQE_BYTES = 64;

	/** Bytes of a send WQE (one 64-byte basic block) as the estimate counts it. */
	static final int SEND_WQE_BYTES = 64;

	/** Bytes of a receive WQE (one scatter entry) as the estimate counts it. */
	static final int RECEIVE_WQE_BYTES = 16;

	/**
	 * One part of the total.
	 *
	 * @param kind {@code connection}, {@code completion queue} or
	 * {@code shared-receive-queue}
	 * @param name the key under {@code rdma.*}
	 * @param property the property whose value drives the part most (what to lower)
	 * @param each bytes of one instance (one peer of a connection), whole pages
	 * @param count instances at most ({@code max-peers} of a server, else 1)
	 * @param detail what {@code each} is made of, in words
	 */
	public record Part(String kind, String name, String property, long each, int count, String detail) {

		/** {@code each × count}. */
		public long bytes() {
			return each * count;
		}

		/** One line of the startup report. */
		public String describe() {
			String line = kind + " '" + name + "': " + detail;
			return count == 1 ? line + " = " + LockedMemory.bytes(each) : line + " = " + LockedMemory.bytes(each)
					+ " per peer, " + LockedMemory.bytes(bytes()) + " for " + count + " peers (max-peers)";
		}

	}

	private final List<Part> parts = new ArrayList<>();

	/** The parts of {@code properties}: its connections, then its completion queues. */
	public static PinnedMemory of(RdmaProperties properties) {
		PinnedMemory memory = new PinnedMemory();
		properties.getConnections().forEach((key, c) -> {
			memory.add(connection(key, c));
			if (sharedReceiveQueue(c)) {
				memory.add(sharedReceiveQueue(key, c));
			}
		});
		properties.getCompletionQueues().forEach((key, q) -> memory.add(queue(key, q)));
		return memory;
	}

	/**
	 * Adds a part (a later kind of registered memory, such as a shared receive queue).
	 */
	public PinnedMemory add(Part part) {
		parts.add(part);
		return this;
	}

	static Part connection(String key, ConnectionProperties c) {
		String path = RdmaConnectionProperties.CONNECTIONS + key;
		long message = Math.max(0, c.getMessageSize());
		boolean shared = sharedReceiveQueue(c);
		// on a shared receive queue a peer has no receive buffers (nor receive ring)
		int receiveBuffers = shared ? 0 : (c.getReceiveBuffers() != null ? c.getReceiveBuffers() : c.getReceiveDepth());
		long send = LockedMemory.pages(message * Math.max(0, c.getSendDepth()));
		long receive = LockedMemory.pages(message * Math.max(0, receiveBuffers));
		long access = LockedMemory.pages(Math.max(0, c.getRemoteAccessSize().toBytes()));
		long rings = LockedMemory.pages((long) powerOfTwo(c.getSendDepth()) * SEND_WQE_BYTES
				+ (shared ? 0 : (long) powerOfTwo(c.getReceiveDepth()) * RECEIVE_WQE_BYTES));
		StringBuilder detail = new StringBuilder().append(c.getSendDepth())
			.append(" send and ")
			.append(receiveBuffers)
			.append(shared ? " receive buffers (shared receive queue) of " : " receive buffers of ")
			.append(LockedMemory.bytes(message))
			.append(" (")
			.append(LockedMemory.bytes(send))
			.append(" + ")
			.append(LockedMemory.bytes(receive))
			.append(')');
		if (access > 0) {
			detail.append(", remote-access region ").append(LockedMemory.bytes(access));
		}
		detail.append(", queue-pair rings ").append(LockedMemory.bytes(rings)).append(" (estimate)");
		String property = access > send + receive ? path + ".remote-access-size" : path + ".message-size";
		boolean server = c.getListen() != null;
		return new Part("connection", key, property, send + receive + access + rings,
				server ? Math.max(1, c.getMaxPeers()) : 1, detail.toString());
	}

	/** Whether {@code c} is a server whose peers share one receive queue. */
	private static boolean sharedReceiveQueue(ConnectionProperties c) {
		return c.getListen() != null && c.getSharedReceiveQueue().isEnabled();
	}

	/**
	 * The shared receive queue of server {@code key}: its buffers and its ring, once for
	 * all its peers.
	 */
	static Part sharedReceiveQueue(String key, ConnectionProperties c) {
		String path = RdmaConnectionProperties.CONNECTIONS + key + ".shared-receive-queue.depth";
		int depth = Math.max(0, c.getSharedReceiveQueue().getDepth());
		long message = Math.max(0, c.getMessageSize());
		long buffers = LockedMemory.pages(message * depth);
		long ring = LockedMemory.pages((long) powerOfTwo(depth) * RECEIVE_WQE_BYTES);
		return new Part("shared-receive-queue", key, path, buffers + ring, 1,
				depth + " receive buffers of " + LockedMemory.bytes(message) + " (" + LockedMemory.bytes(buffers)
						+ ") for all " + Math.max(1, c.getMaxPeers()) + " peers, ring " + LockedMemory.bytes(ring)
						+ " (estimate)");
	}

	static Part queue(String key, CompletionQueueProperties q) {
		long ring = LockedMemory.pages((long) powerOfTwo(q.getEntries() + 1) * CQE_BYTES);
		return new Part("completion queue", key, RdmaPropertiesValidator.QUEUES + key + ".entries", ring, 1,
				q.getEntries() + " entries, ring " + LockedMemory.bytes(ring) + " (estimate)");
	}

	private static int powerOfTwo(int n) {
		return n <= 1 ? 1 : Integer.highestOneBit(Math.min(n, 1 << 30) - 1) << 1;
	}

	/** The parts, in the order of the configuration. */
	public List<Part> parts() {
		return List.copyOf(parts);
	}

	/** Bytes of all parts. */
	public long total() {
		return parts.stream().mapToLong(Part::bytes).sum();
	}

	/** The largest part (what drives the total), null when there is none. */
	public @Nullable Part largest() {
		return parts.stream().max(Comparator.comparingLong(Part::bytes)).orElse(null);
	}

	/** Bytes of the parts of one kind, by name. */
	public Map<String, Long> bytesOf(String kind) {
		Map<String, Long> bytes = new java.util.LinkedHashMap<>();
		parts.stream().filter(p -> p.kind().equals(kind)).forEach(p -> bytes.put(p.name(), p.bytes()));
		return bytes;
	}

	/**
	 * Checks the total against {@code limit}.
	 * @return a warning when the total fits with less than {@link #MARGIN_PERCENT}
	 * percent of the limit to spare, else null
	 * @throws RdmaConfigurationException when the total exceeds the limit, naming both,
	 * the property of the largest part and the fixes
	 */
	public @Nullable String check(LockedMemory.Limit limit) {
		long total = total();
		Part largest = largest();
		if (limit.unlimited() || largest == null) {
			return null;
		}
		String numbers = LockedMemory.bytes(total) + " (" + total + " bytes)";
		if (total > limit.soft()) {
			throw new RdmaConfigurationException(largest.property(),
					"the RDMA configuration pins " + numbers + " of locked memory, more than the " + limit.describe()
							+ " this process may lock; the largest part is " + largest.describe() + " ("
							+ largest.property() + ")",
					"Raise the locked-memory limit to at least " + LockedMemory.bytes(LockedMemory.pages(total))
							+ " or lower " + largest.property() + ": " + LockedMemory.FIXES + ".");
		}
		if (total > limit.soft() / 100 * (100 - MARGIN_PERCENT)) {
			return "The RDMA configuration pins " + numbers + " of locked memory, close to the " + limit.describe()
					+ " this process may lock (less than " + MARGIN_PERCENT + "% to spare); other registrations of "
					+ "the process will fail with ENOMEM. Largest part: " + largest.describe() + " ("
					+ largest.property() + "). To raise the limit: " + LockedMemory.FIXES + ".";
		}
		return null;
	}

	/** The startup report's lines: one per part, then the total against {@code limit}. */
	public List<String> lines(LockedMemory.Limit limit) {
		List<String> lines = new ArrayList<>();
		for (Part part : parts) {
			lines.add("RDMA locked memory, " + part.describe());
		}
		lines
			.add("RDMA locked memory: " + LockedMemory.bytes(total()) + " in total at most, limit " + limit.describe());
		return lines;
	}

}
