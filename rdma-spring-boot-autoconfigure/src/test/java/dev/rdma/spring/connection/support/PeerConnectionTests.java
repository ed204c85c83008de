package dev.rdma.spring.connection.support;

import java.lang.foreign.MemorySegment;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.List;

import org.junit.jupiter.api.Test;

import dev.rdma.verbs.CompletionQueue;
import dev.rdma.verbs.MemoryRegion;
import dev.rdma.verbs.ProtectionDomain;
import dev.rdma.verbs.QueuePair;
import dev.rdma.verbs.cm.CmParameters;
import dev.rdma.verbs.cm.ConnectionId;

import static org.assertj.core.api.Assertions.assertThatIllegalStateException;
import static org.mockito.ArgumentMatchers.any;
import static org.mockito.ArgumentMatchers.anyLong;
import static org.mockito.BDDMockito.given;
import static org.mockito.Mockito.mock;
import static org.mockito.Mockito.verify;

/**
 * A {@link PeerConnection} whose construction fails after its queue pair and memory
 * regions exist destroys them: a failed connection attempt, repeated by the client's
 * retries, leaks nothing. Without a device: the verbs objects are mocks.
 */
class PeerConnectionTests {

	@Test
	void failedConstructionClosesTheQueuePairAndTheRegions() {
		// send buffers too large for a ByteBuffer view: 2^30 bytes times 2
		ConnectionSettings settings = new ConnectionSettings("orders", false, new InetSocketAddress("10.0.0.2", 7471),
				null, 1, Duration.ofSeconds(5),
				new ConnectionSettings.Retry(Duration.ofMillis(100), 2, Duration.ofSeconds(5), 0), "tx", "rx", 2, 1, 1,
				1 << 30, Duration.ofSeconds(1), false, CmParameters.DEFAULTS, Duration.ofSeconds(5), 4096, null);
		ProtectionDomain pd = mock(ProtectionDomain.class);
		QueuePair qp = mock(QueuePair.class);
		MemoryRegion send = mock(MemoryRegion.class);
		MemoryRegion receive = mock(MemoryRegion.class);
		MemoryRegion access = mock(MemoryRegion.class);
		given(pd.createQueuePair(any())).willReturn(qp);
		given(pd.registerMemory(anyLong(), any())).willReturn(send, receive, access);
		// never read: the view fails on the size alone
		given(send.buffer()).willReturn(MemorySegment.NULL.reinterpret(2L << 30));
		given(receive.buffer()).willReturn(MemorySegment.NULL.reinterpret(1L << 30));
		assertThatIllegalStateException()
			.isThrownBy(() -> new PeerConnection(settings, new ConnectionCounters(),
					new PeerLink.Cm(mock(ConnectionId.class)), pd, mock(CompletionQueue.class),
					mock(CompletionQueue.class), null, List.of(new CompletionRouter("tx"))))
			.withMessageContaining("too large");
		verify(qp).close();
		verify(send).close();
		verify(receive).close();
		verify(access).close();
	}

}
