package dev.rdma.verbs;

import org.jspecify.annotations.Nullable;

import dev.rdma.verbs.ffm.Native;
import dev.rdma.verbs.ffm.Ibverbs;
import dev.rdma.verbs.ffm.Layouts;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Objects;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_SHORT;

/**
 * An address handle ({@code struct ibv_ah *}, {@code ibv_create_ah} /
 * {@code ibv_destroy_ah}): the path to a remote port that a UD send names in
 * {@code wr.ud.ah} (see {@link QueuePair#postSend(SendWorkRequest)} with
 * {@link SendWorkRequest#datagram(AddressHandle, int, int)}). A dependant of its
 * {@link ProtectionDomain}, closed before it; usable only by QPs of that PD. Closing it
 * while a send that names it is still outstanding is the caller's mistake, as in C.
 * Thread-safe.
 */
public final class AddressHandle extends NativeObject {

	/**
	 * {@code struct ibv_ah_attr}. On RoCE every address is global ({@link #global});
	 * {@link #local} is for an InfiniBand destination in the same subnet.
	 *
	 * @param port {@code port_num}, the local port, 1..255
	 * @param global {@code is_global}: a GRH is sent, with the fields below
	 * @param destGid {@code grh.dgid}; null when not global
	 * @param sgidIndex {@code grh.sgid_index}: the local GID that is the source, 0..255
	 * @param hopLimit {@code grh.hop_limit}, 0..255
	 * @param flowLabel {@code grh.flow_label}, 20 bits
	 * @param trafficClass {@code grh.traffic_class}, 0..255
	 * @param dlid {@code dlid}: the destination LID (InfiniBand; 0 on RoCE), 16 bits
	 * @param serviceLevel {@code sl}, 0..15
	 */
	public record Attributes(int port, boolean global, @Nullable Gid destGid, int sgidIndex, int hopLimit,
			int flowLabel, int trafficClass, int dlid, int serviceLevel) {

		public Attributes {
			Arguments.requireRange("port (port_num)", port, 1, 255);
			if (global) {
				Objects.requireNonNull(destGid, "destGid (grh.dgid) of a global address");
			}
			Arguments.requireRange("sgidIndex (grh.sgid_index)", sgidIndex, 0, 255);
			Arguments.requireRange("hopLimit (grh.hop_limit)", hopLimit, 0, 255);
			Arguments.requireRange("flowLabel (grh.flow_label)", flowLabel, 0, (1 << 20) - 1);
			Arguments.requireRange("trafficClass (grh.traffic_class)", trafficClass, 0, 255);
			Arguments.requireRange("dlid", dlid, 0, 0xffff);
			Arguments.requireRange("serviceLevel (sl)", serviceLevel, 0, 15);
		}

		/**
		 * A global address (RoCE): {@code destGid} from the local GID at
		 * {@code sgidIndex}, hop limit 1, {@code dlid} 0, SL 0. On InfiniBand the
		 * destination's LID is needed as well ({@link #withDlid}); rdma-core's
		 * {@code ibv_ud_pingpong} uses hop limit 64 (see
		 * {@link dev.rdma.verbs.exchange.DatagramEndpoint#addressFrom}).
		 */
		public static Attributes global(int port, Gid destGid, int sgidIndex) {
			return new Attributes(port, true, destGid, sgidIndex, 1, 0, 0, 0, 0);
		}

		/** A local InfiniBand address without GRH: {@code dlid} in the same subnet. */
		public static Attributes local(int port, int dlid) {
			return new Attributes(port, false, null, 0, 0, 0, 0, dlid, 0);
		}

		public Attributes withHopLimit(int hopLimit) {
			return new Attributes(port, global, destGid, sgidIndex, hopLimit, flowLabel, trafficClass, dlid,
					serviceLevel);
		}

		public Attributes withFlowLabel(int flowLabel) {
			return new Attributes(port, global, destGid, sgidIndex, hopLimit, flowLabel, trafficClass, dlid,
					serviceLevel);
		}

		public Attributes withTrafficClass(int trafficClass) {
			return new Attributes(port, global, destGid, sgidIndex, hopLimit, flowLabel, trafficClass, dlid,
					serviceLevel);
		}

		public Attributes withDlid(int dlid) {
			return new Attributes(port, global, destGid, sgidIndex, hopLimit, flowLabel, trafficClass, dlid,
					serviceLevel);
		}

		public Attributes withServiceLevel(int serviceLevel) {
			return new Attributes(port, global, destGid, sgidIndex, hopLimit, flowLabel, trafficClass, dlid,
					serviceLevel);
		}

		/** Writes this address into a zeroed {@code struct ibv_ah_attr}. */
		void writeTo(MemorySegment attr) {
			var l = Layouts.IBV_AH_ATTR;
			if (global) {
				MemorySegment.copy(MemorySegment.ofArray(destGid.raw()), 0, attr, Layouts.off(l, "grh", "dgid"), 16);
				attr.set(JAVA_INT, Layouts.off(l, "grh", "flow_label"), flowLabel);
				attr.set(JAVA_BYTE, Layouts.off(l, "grh", "sgid_index"), (byte) sgidIndex);
				attr.set(JAVA_BYTE, Layouts.off(l, "grh", "hop_limit"), (byte) hopLimit);
				attr.set(JAVA_BYTE, Layouts.off(l, "grh", "traffic_class"), (byte) trafficClass);
			}
			attr.set(JAVA_SHORT, Layouts.off(l, "dlid"), (short) dlid);
			attr.set(JAVA_BYTE, Layouts.off(l, "sl"), (byte) serviceLevel);
			attr.set(JAVA_BYTE, Layouts.off(l, "is_global"), (byte) (global ? 1 : 0));
			attr.set(JAVA_BYTE, Layouts.off(l, "port_num"), (byte) port);
		}
	}

	private final ProtectionDomain pd;

	private final Attributes attributes;

	private AddressHandle(ProtectionDomain pd, MemorySegment ah, Attributes attributes) {
		super(ah, pd);
		this.pd = pd;
		this.attributes = attributes;
	}

	static AddressHandle create(ProtectionDomain pd, Attributes attributes) {
		Objects.requireNonNull(attributes, "attributes");
		pd.acquire();
		try (Arena a = Arena.ofConfined()) {
			MemorySegment attr = a.allocate(Layouts.IBV_AH_ATTR);
			attributes.writeTo(attr);
			MemorySegment capture = Native.allocateCapture(a);
			MemorySegment ah = (MemorySegment) Ibverbs.CREATE_AH.invokeExact(capture, pd.handle, attr);
			if (Native.isNull(ah)) {
				throw new VerbsException("ibv_create_ah", Native.errno(capture), attributes.toString());
			}
			return adopt(() -> new AddressHandle(pd, ah, attributes), () -> Native.callIntVerb(Ibverbs.DESTROY_AH, ah));
		}
		catch (Throwable t) {
			throw Native.unchecked(t);
		}
		finally {
			pd.release();
		}
	}

	public Attributes attributes() {
		return attributes;
	}

	public ProtectionDomain protectionDomain() {
		return pd;
	}

	@Override
	String describe() {
		return "AddressHandle[" + (attributes.global() ? attributes.destGid() : "dlid " + attributes.dlid()) + " port "
				+ attributes.port() + "]";
	}

	@Override
	void destroy() {
		destroyVerb(Ibverbs.DESTROY_AH, handle, "ibv_destroy_ah", describe());
	}

}
