package dev.rdma.verbs.cm;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.net.Inet4Address;
import java.net.Inet6Address;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.UnknownHostException;
import java.nio.ByteOrder;
import java.time.Duration;
import java.util.Objects;

import org.jspecify.annotations.Nullable;

import dev.rdma.verbs.Errno;
import dev.rdma.verbs.Gid;
import dev.rdma.verbs.QueuePair;
import dev.rdma.verbs.VerbsException;
import dev.rdma.verbs.ffm.Layouts;
import dev.rdma.verbs.ffm.Native;
import dev.rdma.verbs.ffm.Rdmacm;
import dev.rdma.verbs.ffm.RdmacmLayouts;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_SHORT;

/**
 * Where a {@link ConnectionId} is and goes: {@code rdma_bind_addr},
 * {@code rdma_resolve_addr} (with the retried attempts of a blocking connect),
 * {@code rdma_resolve_route}, what the id resolved to (device, port, GIDs, addresses),
 * the guard that no call dereferencing {@code id->verbs} runs before the id has a device,
 * and the {@code sockaddr} conversions. Thread-safe.
 */
final class AddressResolution {

	private final ConnectionId id;

	/** See {@link #attemptsTimedOut()}; written by the connecting thread. */
	private volatile int attemptsTimedOut;

	AddressResolution(ConnectionId id) {
		this.id = id;
	}

	// ---------------------------------------------------- what the id resolved to

	/** {@code id->verbs->device->name}, or null before bind or address resolution. */
	@Nullable String deviceName() {
		id.acquire();
		try {
			MemorySegment verbs = id.handle.get(ADDRESS, RdmacmLayouts.ID_VERBS);
			if (Native.isNull(verbs)) {
				return null;
			}
			MemorySegment device = verbs.reinterpret(Layouts.IBV_CONTEXT.byteSize())
				.get(ADDRESS, Layouts.CONTEXT_DEVICE)
				.reinterpret(Layouts.IBV_DEVICE.byteSize());
			return device.getString(Layouts.off(Layouts.IBV_DEVICE, "name"));
		}
		finally {
			id.release();
		}
	}

	/** {@code id->port_num}. */
	int portNumber() {
		id.acquire();
		try {
			return Byte.toUnsignedInt(id.handle.get(JAVA_BYTE, RdmacmLayouts.ID_PORT_NUM));
		}
		finally {
			id.release();
		}
	}

	/** The 16-byte GID at {@code offset} of the id. */
	Gid gid(long offset) {
		id.acquire();
		try {
			return new Gid(id.handle.asSlice(offset, 16).toArray(JAVA_BYTE));
		}
		finally {
			id.release();
		}
	}

	/** The socket address at {@code offset} of the id, or null when unset. */
	@Nullable InetSocketAddress address(long offset) {
		id.acquire();
		try {
			return fromSockaddr(id.handle.asSlice(offset, RdmacmLayouts.SOCKADDR_STORAGE.byteSize()));
		}
		finally {
			id.release();
		}
	}

	// ------------------------------------------------------------------ single steps

	/** See {@link ConnectionId#bind}. */
	void bind(InetSocketAddress address) {
		Objects.requireNonNull(address, "address");
		id.call("rdma_bind_addr", address.toString(),
				(a, capture) -> (int) Rdmacm.BIND_ADDR.invokeExact(capture, id.handle, sockaddr(a, address)));
	}

	/** See {@link ConnectionId#resolveAddress}. */
	void resolveAddress(@Nullable InetSocketAddress source, InetSocketAddress destination, Duration timeout) {
		Objects.requireNonNull(destination, "destination");
		int ms = millis("timeout", timeout);
		id.call("rdma_resolve_addr", (source == null ? "" : source + " -> ") + destination, (a, capture) -> {
			MemorySegment src = source == null ? MemorySegment.NULL : sockaddr(a, source);
			MemorySegment dst = sockaddr(a, destination);
			return (int) Rdmacm.RESOLVE_ADDR.invokeExact(capture, id.handle, src, dst, ms);
		});
	}

	/** See {@link ConnectionId#resolveRoute}. */
	void resolveRoute(Duration timeout) {
		int ms = millis("timeout", timeout);
		requireDevice("rdma_resolve_route", "resolveAddress and its ADDR_RESOLVED");
		id.call("rdma_resolve_route", id.describe(),
				(a, capture) -> (int) Rdmacm.RESOLVE_ROUTE.invokeExact(capture, id.handle, ms));
	}

	// ------------------------------------------------------------------ blocking

	/**
	 * {@code rdma_resolve_addr} and its ADDR_RESOLVED before {@code deadline}, in
	 * attempts of at most {@link ConnectionId#RESOLVE_ATTEMPT} (the timeout rdma-core's
	 * examples pass), the next one after an ADDR_ERROR with ETIMEDOUT. The kernel
	 * resolves the neighbour's hardware address when a neighbour update arrives, and
	 * looks again when the attempt's timer fires. An update that arrives before the
	 * request is queued (an ARP reply over a veth pair does, on a first contact) is
	 * missed: with the whole connect timeout as the attempt's, the address then resolved
	 * only when that ran out, so the connect failed; now it resolves after one attempt's
	 * time. A neighbour still unresolved then ends the attempt in ETIMEDOUT, and the next
	 * attempt asks again while time remains. Every other ADDR_ERROR ends the connect at
	 * once.
	 */
	void resolveAddressWithin(@Nullable InetSocketAddress source, InetSocketAddress destination, long deadline,
			Duration timeout, String what) {
		CmEvent timedOut = null;
		while (true) {
			resolveAddress(source, destination, ConnectionId.resolveAttempt(remaining(deadline)));
			try {
				id.events.await("rdma_resolve_addr", what, deadline, timeout, CmEventType.ADDR_RESOLVED);
				return;
			}
			catch (ConnectionException e) {
				CmEvent event = e.event();
				boolean late = System.nanoTime() - deadline >= 0;
				if (event == null && late && timedOut != null) {
					// the last attempt's own ETIMEDOUT comes with the deadline: name the
					// earlier ones' (nobody answered for the address)
					throw new ConnectionException("rdma_resolve_addr",
							what + ": no ADDR_RESOLVED within " + timeout + "; " + attemptsTimedOut + " attempt(s) of "
									+ ConnectionId.RESOLVE_ATTEMPT + " before ended in " + timedOut.text() + ", "
									+ timedOut.statusText(),
							timedOut);
				}
				if (event == null || event.type() != CmEventType.ADDR_ERROR || event.status() != -Errno.ETIMEDOUT
						|| late) {
					throw e;
				}
				timedOut = event;
				attemptsTimedOut++;
			}
		}
	}

	/**
	 * Address resolution attempts of a blocking connect that ended in ADDR_ERROR with
	 * ETIMEDOUT and were repeated (for tests and diagnostics).
	 */
	int attemptsTimedOut() {
		return attemptsTimedOut;
	}

	// ------------------------------------------------------------------ guards

	/**
	 * librdmacm dereferences {@code id->verbs} (and the device behind it) in
	 * rdma_resolve_route, rdma_connect and rdma_accept without checking it: before the id
	 * is bound to a device such a call would crash the process, so it is refused here.
	 */
	void requireDevice(String verb, String needed) {
		id.acquire();
		try {
			if (Native.isNull(id.handle.get(ADDRESS, RdmacmLayouts.ID_VERBS))) {
				throw new VerbsException(verb, Errno.EINVAL,
						id.describe() + " is not bound to an RDMA device yet: " + verb + " needs " + needed + " first");
			}
		}
		finally {
			id.release();
		}
	}

	/** Refuses a QP on another device than the one the id resolved to. */
	void requireSameDevice(QueuePair qp) {
		String mine = deviceName();
		String its = qp.protectionDomain().context().deviceName();
		if (mine != null && !mine.equals(its)) {
			throw new IllegalArgumentException(qp + " is on device " + its + ", but " + id.describe()
					+ " resolved to device " + mine + ": create the QP on " + mine);
		}
	}

	// ------------------------------------------------------------------ helpers

	static int millis(String name, Duration d) {
		long ms = d.toMillis();
		if (ms < 1 || ms > Integer.MAX_VALUE) {
			throw new IllegalArgumentException(name + " must be 1 ms .. " + Integer.MAX_VALUE + " ms, got " + d);
		}
		return (int) ms;
	}

	/** The time left until {@code deadline}, at least 1 ms. */
	static Duration remaining(long deadline) {
		return Duration.ofNanos(Math.max(1_000_000, deadline - System.nanoTime()));
	}

	/**
	 * A {@code struct sockaddr_in} or {@code sockaddr_in6} of {@code address} (port and
	 * address in network byte order).
	 * @throws IllegalArgumentException for an unresolved host name
	 */
	static MemorySegment sockaddr(Arena a, InetSocketAddress address) {
		InetAddress ip = address.getAddress();
		if (address.isUnresolved() || ip == null) {
			throw new IllegalArgumentException("address " + address + " is unresolved: pass an IP address");
		}
		MemorySegment s = a.allocate(RdmacmLayouts.SOCKADDR_STORAGE);
		short port = Short.reverseBytes((short) address.getPort());
		if (ip instanceof Inet4Address) {
			var l = RdmacmLayouts.SOCKADDR_IN;
			s.set(JAVA_SHORT, Layouts.off(l, "sin_family"), (short) RdmacmLayouts.AF_INET);
			s.set(JAVA_SHORT, Layouts.off(l, "sin_port"), port);
			MemorySegment.copy(MemorySegment.ofArray(ip.getAddress()), 0, s, Layouts.off(l, "sin_addr"), 4);
		}
		else {
			var l = RdmacmLayouts.SOCKADDR_IN6;
			s.set(JAVA_SHORT, Layouts.off(l, "sin6_family"), (short) RdmacmLayouts.AF_INET6);
			s.set(JAVA_SHORT, Layouts.off(l, "sin6_port"), port);
			MemorySegment.copy(MemorySegment.ofArray(ip.getAddress()), 0, s, Layouts.off(l, "sin6_addr"), 16);
			s.set(JAVA_INT, Layouts.off(l, "sin6_scope_id"), ((Inet6Address) ip).getScopeId());
		}
		return s;
	}

	/**
	 * The address in a {@code struct sockaddr_storage}, or null for AF_UNSPEC (unbound).
	 */
	static @Nullable InetSocketAddress fromSockaddr(MemorySegment s) {
		int family = Short.toUnsignedInt(s.get(JAVA_SHORT, 0));
		try {
			if (family == RdmacmLayouts.AF_INET) {
				var l = RdmacmLayouts.SOCKADDR_IN;
				int port = Short.toUnsignedInt(Short.reverseBytes(s.get(JAVA_SHORT, Layouts.off(l, "sin_port"))));
				byte[] ip = s.asSlice(Layouts.off(l, "sin_addr"), 4).toArray(JAVA_BYTE);
				return new InetSocketAddress(InetAddress.getByAddress(ip), port);
			}
			if (family == RdmacmLayouts.AF_INET6) {
				var l = RdmacmLayouts.SOCKADDR_IN6;
				int port = Short.toUnsignedInt(Short.reverseBytes(s.get(JAVA_SHORT, Layouts.off(l, "sin6_port"))));
				byte[] ip = s.asSlice(Layouts.off(l, "sin6_addr"), 16).toArray(JAVA_BYTE);
				return new InetSocketAddress(InetAddress.getByAddress(ip), port);
			}
		}
		catch (UnknownHostException e) {
			throw new IllegalStateException(e);
		}
		return null;
	}

	static {
		// sockaddr ports are big-endian; this binding runs on little-endian x86_64 only
		if (ByteOrder.nativeOrder() != ByteOrder.LITTLE_ENDIAN) {
			throw new ExceptionInInitializerError("rdma-bindings supports x86_64 (little-endian) only");
		}
	}

}
