package dev.rdma.spring.boot.autoconfigure;

import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

import org.springframework.boot.test.context.runner.ApplicationContextRunner;

import dev.rdma.spring.RdmaConfigurationException;
import dev.rdma.verbs.Context;
import dev.rdma.verbs.DeviceAttributes;
import dev.rdma.verbs.NativeObjects;
import dev.rdma.verbs.exchange.OutOfBand;
import dev.rdma.verbs.testing.DeviceTestSupport;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * The connections' device limits on a real device (rxe in the test VM): a connection
 * whose depth, out-of-band port or GID index the device cannot have fails startup, naming
 * the full property, the device's limit and where it comes from, and leaves no native
 * object open. Before {@link RdmaConnectionLimits} these applications started, and a
 * client then failed every attempt ({@code ibv_create_qp} / {@code ibv_modify_qp}
 * EINVAL), a server at its first peer.
 */
@Tag(DeviceTestSupport.TAG)
class ConnectionLimitsDeviceTest {

	private static final String C = "rdma.connections.link.";

	private static String device;

	private static DeviceAttributes attributes;

	@BeforeAll
	static void device() {
		device = DeviceTestSupport.deviceName();
		try (Context context = Context.open(device)) {
			attributes = context.queryDevice();
		}
	}

	/** A device, a channel, two queues of {@code entries} and connection 'link'. */
	private ApplicationContextRunner runner(int entries) {
		return new ApplicationContextRunner().withConfiguration(RdmaAutoConfigurations.all())
			.withPropertyValues("rdma.required=true", "rdma.devices.nic0.name=" + device,
					"rdma.channels.ev.device=nic0", "rdma.completion-queues.tx.channel=ev",
					"rdma.completion-queues.tx.entries=" + entries, "rdma.completion-queues.rx.channel=ev",
					"rdma.completion-queues.rx.entries=" + entries, C + "send-queue=tx", C + "receive-queue=rx");
	}

	/**
	 * rxe's max_qp_wr (1048576) is the largest depth the properties accept, so no
	 * configuration reaches the device's limit there: the check is run directly, on
	 * properties beyond it, against the device as the starter sees it when it opens it.
	 */
	@Test
	void depthsAboveTheDevicesMaxQpWrAreRefusedNamingTheLimit() {
		RdmaProperties properties = new RdmaProperties();
		CompletionQueueProperties queue = new CompletionQueueProperties();
		properties.getCompletionQueues().put("tx", queue);
		ConnectionProperties link = new ConnectionProperties();
		link.setConnect("10.0.0.2:7471");
		link.setSendQueue("tx");
		link.setReceiveQueue("tx");
		properties.getConnections().put("link", link);
		properties.getDevices().put("nic0", new DeviceProperties());
		long open = NativeObjects.open();
		try (Context context = Context.open(device)) {
			RdmaConnectionLimits.DeviceView view = RdmaResources.deviceView(context);
			// the send queue holds send-depth + 1 work requests (the close's marker)
			link.setSendDepth(attributes.maxQpWr() - 1);
			link.setReceiveDepth(attributes.maxQpWr());
			RdmaConnectionLimits.check(properties, "nic0", view);
			link.setSendDepth(attributes.maxQpWr());
			assertThatThrownBy(() -> RdmaConnectionLimits.check(properties, "nic0", view))
				.isInstanceOf(RdmaConfigurationException.class)
				.hasMessage(C + "send-depth=" + attributes.maxQpWr() + " exceeds max_qp_wr " + attributes.maxQpWr()
						+ " of device " + device
						+ " less the send queue's slot for the close marker (ibv_query_device)");
			link.setSendDepth(1);
			link.setReceiveDepth(attributes.maxQpWr() + 1);
			assertThatThrownBy(() -> RdmaConnectionLimits.check(properties, "nic0", view))
				.hasMessageStartingWith(C + "receive-depth=" + (attributes.maxQpWr() + 1) + " exceeds max_qp_wr");
		}
		assertThat(NativeObjects.open()).isEqualTo(open);
	}

	/**
	 * rdma_cm's responder_resources above the device's max_qp_rd_atom (128 on rxe):
	 * before, the client's every rdma_connect failed with EINVAL.
	 */
	@Test
	void aClientsResponderResourcesAboveMaxQpRdAtomFailsStartup() {
		int value = attributes.maxQpRdAtom() + 1;
		assertThat(value).as("a value the properties accept").isLessThan(255);
		long open = NativeObjects.open();
		runner(256).withPropertyValues(C + "connect=10.0.0.2:7471", C + "cm.responder-resources=" + value)
			.run(context -> {
				assertThat(context).hasFailed();
				assertThat(StartupFailures.messages(context.getStartupFailure()))
					.contains(C + "cm.responder-resources=" + value + " exceeds max_qp_rd_atom "
							+ attributes.maxQpRdAtom() + " of device " + device + " (ibv_query_device)");
			});
		assertThat(NativeObjects.open()).isEqualTo(open);
	}

	@Test
	void anOutOfBandPortBeyondTheDevicesPortsFailsStartup() {
		int port = attributes.physPortCount() + 1;
		long open = NativeObjects.open();
		runner(256)
			.withPropertyValues(C + "connect=10.0.0.2:7471", C + "exchange=out-of-band", C + "out-of-band.port=" + port)
			.run(context -> {
				assertThat(context).hasFailed();
				assertThat(StartupFailures.messages(context.getStartupFailure()))
					.contains(C + "out-of-band.port=" + port + " exceeds the " + attributes.physPortCount()
							+ " port(s) of device " + device + " (phys_port_cnt, ibv_query_device)");
			});
		assertThat(NativeObjects.open()).isEqualTo(open);
	}

	/**
	 * GID index 255 (the largest sgid_index): past rxe's first entries, which hold the
	 * GIDs of its netdev's addresses; empty, or beyond a smaller table.
	 */
	@Test
	void anOutOfBandGidIndexWithoutAGidFailsStartup() {
		long open = NativeObjects.open();
		runner(256)
			.withPropertyValues(C + "listen=10.0.0.2:7471", C + "exchange=out-of-band", C + "out-of-band.gid-index=255")
			.run(context -> {
				assertThat(context).hasFailed();
				assertThat(StartupFailures.messages(context.getStartupFailure())).containsPattern(C.replace(".", "\\.")
						+ "out-of-band\\.gid-index=255 (names an empty entry of the GID table|is beyond the GID table)"
						+ " of port 1 of device " + device + " \\((ibv_query_gid|gid_tbl_len \\d+, ibv_query_port)\\)");
			});
		assertThat(NativeObjects.open()).isEqualTo(open);
	}

	/**
	 * The index of a GID the port has (the IPv4 RoCE v2 one the exchange would find, else
	 * entry 0) passes: the check refuses only entries without a GID.
	 */
	@Test
	void anOutOfBandGidIndexWithAGidStarts() {
		int gidIndex;
		try (Context context = Context.open(device)) {
			gidIndex = Math.max(0, OutOfBand.findGidIndex(context, 1));
		}
		long open = NativeObjects.open();
		runner(256)
			.withPropertyValues(C + "connect=10.0.0.2:7471", C + "exchange=out-of-band",
					C + "out-of-band.gid-index=" + gidIndex, C + "retry.initial-interval=1s")
			.run(context -> assertThat(context).hasNotFailed());
		assertThat(NativeObjects.open()).isEqualTo(open);
	}

}
