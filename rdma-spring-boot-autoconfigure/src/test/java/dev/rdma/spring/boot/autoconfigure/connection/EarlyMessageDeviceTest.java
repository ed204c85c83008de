package dev.rdma.spring.boot.autoconfigure.connection;

import dev.rdma.verbs.SendWorkRequest;
import dev.rdma.verbs.ReceiveWorkRequest;
import java.lang.foreign.ValueLayout;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.EnumSet;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import dev.rdma.spring.connection.ConnectionState;
import dev.rdma.verbs.CompletionQueue;
import dev.rdma.verbs.Context;
import dev.rdma.verbs.MemoryRegion;
import dev.rdma.verbs.ProtectionDomain;
import dev.rdma.verbs.QueuePair;
import dev.rdma.verbs.WorkCompletion;
import dev.rdma.verbs.WorkCompletionBuffer;
import dev.rdma.verbs.cm.CmEventType;
import dev.rdma.verbs.cm.CmParameters;
import dev.rdma.verbs.cm.ConnectionId;
import dev.rdma.verbs.cm.EventChannel;
import dev.rdma.verbs.testing.DeviceTestSupport;
import dev.rdma.verbs.testing.TwoDevices;

import static dev.rdma.spring.boot.autoconfigure.connection.ConnectionTestSupport.expect;
import static dev.rdma.verbs.testing.DeviceTestSupport.within;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * The race that made {@code rdma_client} hang against the starter's server (CI on
 * 94d1dbf): a client's first SEND can reach the server's listener before the server's
 * accepting thread has read ESTABLISHED, and the listener's reply must still go out.
 *
 * <p>
 * Here the race is not left to timing: the client is the binding itself, driven step by
 * step, and sends its message after CONNECT_RESPONSE but <em>before</em>
 * {@code rdma_establish}, so no RTU has been sent and the server cannot have seen
 * ESTABLISHED when the message arrives (its QP is in RTS since before
 * {@code rdma_accept}). The echo must come back while the server still waits for
 * ESTABLISHED; then the client establishes, the server lists the peer, and the client
 * disconnects.
 */
@Tag(DeviceTestSupport.TAG)
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class EarlyMessageDeviceTest {

	private static final Duration STEP = Duration.ofSeconds(30);

	@Test
	void aMessageThatArrivesBeforeTheServerReadEstablishedIsAnswered() throws Exception {
		TwoDevices two = TwoDevices.require();
		try (EchoServerApp server = EchoServerApp.start(two)) {
			TwoDevices.Marks m0 = two.mark();
			try (Context ctx = Context.open(two.a().device());
					EventChannel channel = EventChannel.create();
					WorkCompletionBuffer completions = new WorkCompletionBuffer(4)) {
				CompletionQueue cq = ctx.createCompletionQueue(16, null, 0);
				ProtectionDomain pd = ctx.allocateProtectionDomain();
				MemoryRegion mr = pd.registerMemory(2048, EnumSet.of(MemoryRegion.Access.LOCAL_WRITE));
				QueuePair qp = pd.createQueuePair(new QueuePair.Attributes(cq, cq, 4, 4, true));
				ConnectionId id = channel.createId();
				id.resolveAddress(new InetSocketAddress(InetAddress.getByName(two.a().ipv4()), 0),
						new InetSocketAddress(InetAddress.getByName(two.b().ipv4()), server.port), STEP);
				expect(id, CmEventType.ADDR_RESOLVED, STEP);
				id.resolveRoute(STEP);
				expect(id, CmEventType.ROUTE_RESOLVED, STEP);
				id.moveQueuePair(qp, QueuePair.State.INIT);
				qp.postRecv(new ReceiveWorkRequest().wrId(1).buffer(mr, 1024, 1024));
				id.connect(qp, CmParameters.DEFAULTS, new byte[0]);
				expect(id, CmEventType.CONNECT_RESPONSE, STEP);
				id.moveQueuePair(qp, QueuePair.State.INIT);
				id.moveQueuePair(qp, QueuePair.State.RTR);
				id.moveQueuePair(qp, QueuePair.State.RTS);

				// the first message, before rdma_establish: no RTU yet
				byte[] message = new byte[64];
				ConnectionApps.fill(message, 42, message.length);
				mr.buffer().copyFrom(java.lang.foreign.MemorySegment.ofArray(message));
				qp.postSend(new SendWorkRequest().wrId(2).buffer(mr, 0, message.length));
				boolean sent = false;
				boolean echoed = false;
				long deadline = System.nanoTime() + Duration.ofSeconds(8).toNanos();
				while (!(sent && echoed) && System.nanoTime() - deadline < 0) {
					int n = cq.poll(completions);
					for (int i = 0; i < n; i++) {
						WorkCompletion wc = completions.get(i);
						assertThat(wc.statusCode()).as("status of wr %d", wc.wrId()).isZero();
						if (wc.wrId() == 2) {
							sent = true;
						}
						else {
							assertThat(wc.byteLen()).isEqualTo(message.length);
							echoed = true;
						}
					}
					if (n == 0) {
						Thread.sleep(1);
					}
				}
				assertThat(sent).as("the client's SEND completed").isTrue();
				assertThat(server.link.statistics().messagesReceived()).as("the server received it").isEqualTo(1);
				assertThat(echoed).as("the echo of a message the server got before it read ESTABLISHED").isTrue();
				// the listener counts its echo after the send returned: the client may
				// have the echo first
				within(STEP, "the server's listener replied without an exception", () -> server.echo.echoed.get() == 1);
				assertThat(server.echo.echoed.get()).isEqualTo(1);
				assertThat(mr.buffer().get(ValueLayout.JAVA_LONG_UNALIGNED, 1024))
					.isEqualTo(mr.buffer().get(ValueLayout.JAVA_LONG_UNALIGNED, 0));
				assertThat(server.link.peers()).as("no ESTABLISHED on the server without the RTU").isEmpty();

				// now the RTU: the server reads ESTABLISHED and lists the peer
				id.establish();
				within(STEP, "the server lists the peer", () -> server.link.peers().size() == 1);
				assertThat(server.link.peers().get(0).state()).isEqualTo(ConnectionState.ESTABLISHED);
				assertThat(server.link.statistics().messagesSent()).isEqualTo(1);
				m0.assertCrossed(1);

				id.disconnect(STEP);
				within(STEP, "the server saw the disconnect", () -> server.link.peers().isEmpty());
				id.close();
			}
		}
	}

}
