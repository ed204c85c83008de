package dev.rdma.verbs.cm;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;

import dev.rdma.verbs.NativeObjects;
import dev.rdma.verbs.VerbsException;
import dev.rdma.verbs.ffm.Layouts;
import dev.rdma.verbs.ffm.Rdmacm;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * The connection manager without a device: argument checks, private data limits, socket
 * address encoding, event names, and the binding's behaviour without librdmacm.
 */
class ConnectionManagerHostTest {

	@Test
	void cmParametersAreRangeChecked() {
		assertThat(CmParameters.DEFAULTS.responderResources()).isEqualTo(0xFF);
		assertThat(CmParameters.DEFAULTS.retryCount()).isEqualTo(7);
		assertThatThrownBy(() -> new CmParameters(256, 1, 7, 7)).isInstanceOf(IllegalArgumentException.class)
			.hasMessageContaining("responderResources (responder_resources)");
		assertThatThrownBy(() -> new CmParameters(1, -1, 7, 7)).hasMessageContaining("initiatorDepth");
		assertThatThrownBy(() -> new CmParameters(1, 1, 8, 7)).hasMessageContaining("retryCount (retry_count)");
		assertThatThrownBy(() -> new CmParameters(1, 1, 7, 8)).hasMessageContaining("rnrRetryCount");
	}

	@Test
	void privateDataLimitsAreThoseOfRdmaPsTcp() {
		assertThat(ConnectionId.MAX_CONNECT_PRIVATE_DATA).isEqualTo(56);
		assertThat(ConnectionId.MAX_ACCEPT_PRIVATE_DATA).isEqualTo(196);
		assertThat(ConnectionId.MAX_REJECT_PRIVATE_DATA).isEqualTo(148);
		Handshake.checkPrivateData("rdma_connect", new byte[56], 56);
		assertThatThrownBy(() -> Handshake.checkPrivateData("rdma_connect", new byte[57], 56))
			.isInstanceOf(IllegalArgumentException.class)
			.hasMessageContaining("rdma_connect")
			.hasMessageContaining("56 bytes")
			.hasMessageContaining("57");
		assertThatThrownBy(() -> Handshake.checkPrivateData("rdma_accept", new byte[197], 196))
			.hasMessageContaining("rdma_accept");
		assertThatThrownBy(() -> Handshake.checkPrivateData("rdma_reject", new byte[149], 148))
			.hasMessageContaining("rdma_reject");
		assertThatThrownBy(() -> Handshake.checkPrivateData("rdma_reject", null, 148))
			.isInstanceOf(NullPointerException.class);
	}

	@Test
	void socketAddressesRoundTripInNetworkByteOrder() throws Exception {
		try (Arena a = Arena.ofConfined()) {
			InetSocketAddress v4 = new InetSocketAddress(InetAddress.getByName("10.0.0.2"), 7471);
			MemorySegment s = AddressResolution.sockaddr(a, v4);
			assertThat(s.get(java.lang.foreign.ValueLayout.JAVA_SHORT, 0)).isEqualTo((short) 2); // AF_INET
			assertThat(Byte.toUnsignedInt(s.get(java.lang.foreign.ValueLayout.JAVA_BYTE, 2))).isEqualTo(7471 >> 8);
			assertThat(Byte.toUnsignedInt(s.get(java.lang.foreign.ValueLayout.JAVA_BYTE, 3))).isEqualTo(7471 & 0xff);
			assertThat(s.get(java.lang.foreign.ValueLayout.JAVA_BYTE, 4)).isEqualTo((byte) 10);
			assertThat(AddressResolution.fromSockaddr(s)).isEqualTo(v4);
			InetSocketAddress v6 = new InetSocketAddress(InetAddress.getByName("fe80::1"), 65535);
			assertThat(AddressResolution.fromSockaddr(AddressResolution.sockaddr(a, v6))).isEqualTo(v6);
			assertThat(AddressResolution.fromSockaddr(a.allocate(128))).isNull();
			assertThatThrownBy(() -> AddressResolution.sockaddr(a, InetSocketAddress.createUnresolved("peer", 1)))
				.isInstanceOf(IllegalArgumentException.class)
				.hasMessageContaining("unresolved");
		}
	}

	/**
	 * librdmacm may give a new id the address of one just destroyed, and the destroyed id
	 * is unregistered after its rdma_destroy_id: that late removal must leave the new id
	 * registered, or the new id's events are dropped as those of an unknown id.
	 */
	@Test
	void forgettingADestroyedIdKeepsTheNewIdAtItsReusedAddress() {
		IdRegistry<String> ids = new IdRegistry<>();
		long address = 0x5555_0000_1000L;
		ids.add(address, "destroyed id");
		ids.add(0x5555_0000_2000L, "other id");
		ids.add(address, "new id at the reused address");
		ids.remove(address, "destroyed id");
		assertThat(ids.get(address)).isEqualTo("new id at the reused address");
		assertThat(ids.snapshot()).containsExactly("other id", "new id at the reused address");
		ids.remove(address, "new id at the reused address");
		assertThat(ids.get(address)).isNull();
		assertThat(ids.addresses()).containsExactly(0x5555_0000_2000L);
	}

	/**
	 * The passive side's RTR: the CM's {@code max_dest_rd_atomic} (the client's initiator
	 * depth, unclamped) is lowered to the device's {@code max_qp_rd_atom}, as librdmacm's
	 * rdma_accept does; a smaller value, and an attribute the mask leaves out, stay.
	 */
	@Test
	void thePassiveRtrLowersTheResponderResourcesToTheDevicesMaximum() {
		try (Arena a = Arena.ofConfined()) {
			MemorySegment attr = a.allocate(Layouts.IBV_QP_ATTR);
			long offset = Layouts.off(Layouts.IBV_QP_ATTR, "max_dest_rd_atomic");
			int mask = Handshake.QP_MAX_DEST_RD_ATOMIC | 1; // and IBV_QP_STATE
			assertThat(Handshake.QP_MAX_DEST_RD_ATOMIC).isEqualTo(0x20000);
			attr.set(JAVA_BYTE, offset, (byte) 128);
			Handshake.clampResponderResources(attr, mask, 16);
			assertThat(Byte.toUnsignedInt(attr.get(JAVA_BYTE, offset))).as("128 from the client, device 16")
				.isEqualTo(16);
			attr.set(JAVA_BYTE, offset, (byte) 200);
			Handshake.clampResponderResources(attr, mask, 128);
			assertThat(Byte.toUnsignedInt(attr.get(JAVA_BYTE, offset))).as("200 from the client, device 128")
				.isEqualTo(128);
			attr.set(JAVA_BYTE, offset, (byte) 8);
			Handshake.clampResponderResources(attr, mask, 16);
			assertThat(Byte.toUnsignedInt(attr.get(JAVA_BYTE, offset))).as("8 from the client, device 16").isEqualTo(8);
			attr.set(JAVA_BYTE, offset, (byte) 250);
			Handshake.clampResponderResources(attr, mask, 1024);
			assertThat(Byte.toUnsignedInt(attr.get(JAVA_BYTE, offset))).as("250 from the client, device 1024")
				.isEqualTo(250);
			attr.set(JAVA_BYTE, offset, (byte) 128);
			Handshake.clampResponderResources(attr, 1, 16);
			assertThat(Byte.toUnsignedInt(attr.get(JAVA_BYTE, offset))).as("not in the mask").isEqualTo(128);
		}
	}

	@Test
	void eventTypesAndTheirText() {
		assertThat(CmEventType.of(8)).isEqualTo(CmEventType.REJECTED);
		assertThat(CmEventType.of(99)).isEqualTo(CmEventType.UNKNOWN);
		assertThat(CmEventType.of(-1)).isEqualTo(CmEventType.UNKNOWN);
		assertThat(CmEventType.REJECTED.isError()).isTrue();
		assertThat(CmEventType.ESTABLISHED.isError()).isFalse();
		assertThat(EventChannel.isAvailable()).as("librdmacm1 is installed on the build host").isTrue();
		for (CmEventType t : CmEventType.values()) {
			if (t != CmEventType.UNKNOWN) {
				// rdma_event_str of librdmacm itself
				assertThat(CmEventType.text(t.code())).isEqualTo("RDMA_CM_EVENT_" + t.name());
			}
		}
	}

	@Test
	void withoutAnRdmaCmDeviceCreatingAChannelFailsClearlyAndLeaksNothing() {
		long before = NativeObjects.open();
		if (Files.exists(Path.of("/dev/infiniband/rdma_cm"))) {
			try (EventChannel c = EventChannel.create()) {
				assertThat(c.fd()).isGreaterThanOrEqualTo(0);
			}
		}
		else {
			assertThatThrownBy(EventChannel::create).isInstanceOf(VerbsException.class)
				.hasMessageContaining("rdma_create_event_channel");
		}
		assertThat(NativeObjects.open()).isEqualTo(before);
	}

	@Test
	void withoutLibrdmacmTheCmSaysWhichPackageToInstallAndTheVerbsKeepWorking() throws Exception {
		Path java = Path.of(System.getProperty("java.home"), "bin", "java");
		Process p = new ProcessBuilder(java.toString(), "--enable-native-access=ALL-UNNAMED",
				"-Ddev.rdma.verbs.rdmacm.library=/nonexistent/librdmacm.so.1", "-cp",
				System.getProperty("java.class.path"), MissingLibrdmacmProbe.class.getName())
			.redirectErrorStream(true)
			.start();
		String out = read(p);
		assertThat(p.waitFor(60, TimeUnit.SECONDS)).isTrue();
		assertThat(p.exitValue()).as(out).isZero();
		assertThat(out).contains("cm.available=false")
			.contains("cm.create=RdmaUnavailableException: cannot load /nonexistent/librdmacm.so.1")
			.contains("install the package " + Rdmacm.PACKAGE)
			.contains("verbs.available=true");
		// libibverbs lists devices (none on a build host, some in the VM) without
		// librdmacm
		assertThat(out).containsPattern("verbs\\.devices=\\d+");
	}

	private static String read(Process p) throws IOException {
		return new String(p.getInputStream().readAllBytes());
	}

}
