package dev.rdma.spring.connection.support;

import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.function.Supplier;

import org.jspecify.annotations.Nullable;

import dev.rdma.spring.connection.RdmaConnectionFilter;
import dev.rdma.spring.connection.event.RdmaPeerRefusedEvent.Reason;

/**
 * Who a server connection accepts: its {@code allowed-peers} (empty: every address), then
 * its application's {@link RdmaConnectionFilter} beans in order, and for rdma_cm a
 * connect request whose private data is well-formed ({@link RemoteRegion#problem}).
 * Checked on the accepting thread before anything is made for the peer. Immutable but for
 * the filters, which are looked up once, when the server starts.
 */
public final class PeerAdmission {

	/** The prefix of every reject's private data, as the peer reads it. */
	static final String REJECT_PREFIX = "rdma-spring-boot: refused: ";

	/** The most bytes of a reject's private data (IB CM's REJ carries 148). */
	static final int MAX_REJECT_BYTES = 148;

	private final String property;

	private final List<AddressRange> allowed;

	private final Supplier<List<RdmaConnectionFilter>> filterLookup;

	private volatile @Nullable List<RdmaConnectionFilter> filters;

	/**
	 * @param property the {@code rdma.connections.<name>.allowed-peers} property, as the
	 * log names it
	 * @param allowed the ranges a peer's address must be in (empty: any)
	 * @param filters the filter beans in order, looked up when the server starts
	 */
	public PeerAdmission(String property, List<AddressRange> allowed, Supplier<List<RdmaConnectionFilter>> filters) {
		this.property = property;
		this.allowed = List.copyOf(allowed);
		this.filterLookup = filters;
	}

	/** Admits every peer (no allowed-peers, no filters). */
	static PeerAdmission open(String name) {
		return new PeerAdmission("rdma.connections." + name + ".allowed-peers", List.of(), List::of);
	}

	/** Looks the filters up (the server starting). */
	void resolve() {
		filters = List.copyOf(filterLookup.get());
	}

	/** The allowed ranges (empty: any address). */
	List<AddressRange> allowed() {
		return allowed;
	}

	/**
	 * Null when the peer may connect, else why not.
	 * @param name the connection's name
	 * @param peer the peer's address, null when unknown (refused when allowed-peers is
	 * set)
	 * @param privateData its connect request's private data (empty out of band)
	 * @param outOfBand whether the exchange is out of band
	 */
	@Nullable Refusal check(String name, @Nullable InetSocketAddress peer, byte[] privateData, boolean outOfBand) {
		if (!allowed.isEmpty()) {
			InetAddress ip = (peer == null) ? null : peer.getAddress();
			if (ip == null || allowed.stream().noneMatch((r) -> r.contains(ip))) {
				return new Refusal(Reason.NOT_ALLOWED,
						"its address is not in " + property + " " + allowed.stream().map(Object::toString).toList(),
						"address not allowed");
			}
		}
		if (!outOfBand) {
			String problem = RemoteRegion.problem(privateData);
			if (problem != null) {
				return new Refusal(Reason.MALFORMED, "its connect request's private data is malformed: " + problem,
						"malformed private data: " + problem);
			}
		}
		List<RdmaConnectionFilter> now = filters;
		if (now == null || now.isEmpty() || peer == null) {
			return null;
		}
		RdmaConnectionFilter.Request request = new RdmaConnectionFilter.Request(name, peer, privateData.clone(),
				outOfBand);
		for (RdmaConnectionFilter filter : now) {
			String reason;
			try {
				reason = filter.refuse(request);
			}
			catch (RuntimeException ex) {
				reason = "the filter " + filter.getClass().getName() + " threw " + ex;
			}
			if (reason != null) {
				return new Refusal(Reason.FILTERED, "refused by " + filter.getClass().getName() + ": " + reason,
						reason);
			}
		}
		return null;
	}

	/**
	 * {@code reason} as a reject's private data: {@value #REJECT_PREFIX} and the reason,
	 * printable ASCII only, at most {@value #MAX_REJECT_BYTES} bytes.
	 */
	static byte[] rejectData(String reason) {
		String text = REJECT_PREFIX + reason;
		byte[] out = new byte[Math.min(text.length(), MAX_REJECT_BYTES)];
		for (int i = 0; i < out.length; i++) {
			char c = text.charAt(i);
			out[i] = (byte) ((c >= 0x20 && c < 0x7f) ? c : '?');
		}
		return out;
	}

	/** The reason in a reject's private data (for tests and clients), or null. */
	static @Nullable String reasonOf(byte[] rejectData) {
		String text = new String(rejectData, StandardCharsets.US_ASCII);
		int nul = text.indexOf('\0');
		if (nul >= 0) {
			text = text.substring(0, nul);
		}
		return text.startsWith(REJECT_PREFIX) ? text.substring(REJECT_PREFIX.length()) : null;
	}

	/**
	 * Why a peer was refused.
	 *
	 * @param reason the event's reason and the {@code rdma.connection.rejected} tag
	 * @param detail what the log and the event say
	 * @param toPeer what the reject's private data says
	 */
	record Refusal(Reason reason, String detail, String toPeer) {

	}

}
