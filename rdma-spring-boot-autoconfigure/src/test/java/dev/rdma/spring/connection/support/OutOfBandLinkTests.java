package dev.rdma.spring.connection.support;

import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.StandardSocketOptions;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import dev.rdma.verbs.QueuePair.ConnectionParameters;
import dev.rdma.verbs.cm.CmParameters;
import dev.rdma.verbs.exchange.ExchangeOptions;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * The liveness channel of an out-of-band connection, over loopback TCP (no device): a
 * link is alive until its peer closes or resets the connection; the orderly disconnect
 * ends when the peer answers with its own close, and is bounded when it does not; an
 * absent server is UNREACHABLE.
 */
class OutOfBandLinkTests {

	private ServerSocketChannel server;

	@BeforeEach
	void listen() throws Exception {
		server = ServerSocketChannel.open();
		server.bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0));
	}

	@AfterEach
	void close() throws Exception {
		server.close();
	}

	private InetSocketAddress address() throws Exception {
		return (InetSocketAddress) server.getLocalAddress();
	}

	private OutOfBandLink[] pair() throws Exception {
		OutOfBandLink client = OutOfBandLink.connect(address(), Duration.ofSeconds(5));
		OutOfBandLink accepted = OutOfBandLink.accepted(server.accept());
		client.live();
		accepted.live();
		return new OutOfBandLink[] { client, accepted };
	}

	private static ConnectionSettings outOfBand(ConnectionSettings.OutOfBandOptions options) {
		return new ConnectionSettings("link", false, new InetSocketAddress("10.0.0.2", 7471), null, 1,
				Duration.ofSeconds(5),
				new ConnectionSettings.Retry(Duration.ofMillis(100), 2, Duration.ofSeconds(5), 0), "tx", "rx", 16, 16,
				16, 1024, Duration.ofSeconds(1), false, CmParameters.DEFAULTS, Duration.ofSeconds(5), 0, options);
	}

	@Test
	void thePathMtuIsTheConfiguredOneOrByDefaultTheActiveOneCappedAt1024() {
		ExchangeOptions configured = OutOfBandLink
			.options(outOfBand(new ConnectionSettings.OutOfBandOptions(1, -1, 512)), Duration.ofSeconds(5));
		assertThat(configured.parameters().pathMtu()).isEqualTo(512);
		ExchangeOptions byDefault = OutOfBandLink.options(outOfBand(new ConnectionSettings.OutOfBandOptions(1, -1)),
				Duration.ofSeconds(5));
		// the active MTU, capped at ibv_rc_pingpong's 1024 when the QP is connected
		assertThat(byDefault.parameters().pathMtu()).isEqualTo(ConnectionParameters.ACTIVE_MTU);
		assertThat(OutOfBandLink.DEFAULT_PATH_MTU).isEqualTo(1024);
		assertThat(byDefault.gidIndex()).isEqualTo(ExchangeOptions.FIND_GID);
	}

	/**
	 * Liveness {@code none}: the retry count is at most 6 (Soft-RoCE retries for ever at
	 * 7), so that a send to a vanished peer fails; {@code tcp} keeps
	 * {@code cm.retry-count}.
	 */
	@Test
	void withLivenessNoneTheRetryCountIsAtMostSix() {
		ExchangeOptions none = OutOfBandLink.options(
				outOfBand(new ConnectionSettings.OutOfBandOptions(1, -1, 0, ConnectionSettings.Liveness.NONE)),
				Duration.ofSeconds(5));
		assertThat(CmParameters.DEFAULTS.retryCount()).isEqualTo(7);
		assertThat(none.parameters().retryCount()).isEqualTo(OutOfBandLink.NONE_MAX_RETRY_COUNT).isEqualTo(6);
		assertThat(none.parameters().timeout()).as("ibv_rc_pingpong's 14: 67 ms").isEqualTo(14);
		ExchangeOptions tcp = OutOfBandLink.options(outOfBand(new ConnectionSettings.OutOfBandOptions(1, -1)),
				Duration.ofSeconds(5));
		assertThat(tcp.parameters().retryCount()).isEqualTo(7);
	}

	/** What a test does with a client link and the raw socket of its peer. */
	private interface WithRawPeer {

		void run(OutOfBandLink client, SocketChannel raw) throws Exception;

	}

	/**
	 * Connects a client link to the test's server socket (then {@code live()} when
	 * {@code live}), runs {@code test} with it and the accepted raw socket, and closes
	 * both.
	 */
	private void withRawPeer(boolean live, WithRawPeer test) throws Exception {
		OutOfBandLink client = OutOfBandLink.connect(address(), Duration.ofSeconds(5));
		if (live) {
			client.live();
		}
		SocketChannel raw = server.accept();
		try {
			test.run(client, raw);
		}
		finally {
			client.close();
			raw.close();
		}
	}

	/**
	 * Liveness {@code none}: after the exchange the socket is closed (the peer reads its
	 * end, as {@code ibv_rc_pingpong} expects), the link stays alive with its addresses,
	 * and its disconnect returns at once.
	 */
	@Test
	void aDetachedLinkClosesItsSocketAndLivesOnWithItsAddresses() throws Exception {
		withRawPeer(false, (client, raw) -> {
			InetSocketAddress peer = client.peerAddress();
			client.detach();
			raw.configureBlocking(true);
			raw.socket().setSoTimeout(5_000);
			assertThat(raw.socket().getInputStream().read()).as("the peer reads the end of stream").isEqualTo(-1);
			assertThat(client.alive()).isTrue();
			assertThat(client.peerAddress()).isEqualTo(peer);
			assertThat(client.localAddress()).isNotNull();
			long t0 = System.nanoTime();
			client.disconnect(Duration.ofSeconds(10));
			assertThat((System.nanoTime() - t0) / 1_000_000).as("disconnect, ms").isLessThan(1_000);
			assertThat(client.describePeer()).isEqualTo(peer.getAddress().getHostAddress() + ":" + peer.getPort())
				.doesNotContain("/");
			assertThat(client.toString()).contains("socket closed after the exchange");
			client.close();
			assertThat(client.alive()).isFalse();
			assertThat(client.peerAddress()).as("closed").isNull();
			assertThat(client.describePeer()).as("still named once closed").contains(":" + peer.getPort());
		});
	}

	@Test
	void addressesAreNamedIpColonPort() {
		assertThat(OutOfBandLink.format(new InetSocketAddress("10.0.0.1", 18515))).isEqualTo("10.0.0.1:18515");
		assertThat(OutOfBandLink.format(new InetSocketAddress("::1", 7))).isEqualTo("[0:0:0:0:0:0:0:1]:7");
		assertThat(OutOfBandLink.format(InetSocketAddress.createUnresolved("host", 7))).isEqualTo("host:7");
	}

	@Test
	void absentServerIsUnreachable() throws Exception {
		InetSocketAddress absent = address();
		server.close();
		assertThatThrownBy(() -> OutOfBandLink.connect(absent, Duration.ofSeconds(5)))
			.isInstanceOfSatisfying(AttemptFailedException.class, ex -> assertThat(ex.kind()).isEqualTo("UNREACHABLE"))
			.hasMessageContaining(absent.toString());
	}

	@Test
	void orderlyDisconnectIsSeenByThePeerAndEndsWithItsClose() throws Exception {
		OutOfBandLink[] links = pair();
		OutOfBandLink client = links[0];
		OutOfBandLink peer = links[1];
		try {
			assertThat(client.alive()).isTrue();
			assertThat(peer.alive()).isTrue();
			assertThat(client.peerAddress()).isEqualTo(address());
			assertThat(peer.localAddress()).isEqualTo(address());
			long t0 = System.nanoTime();
			CompletableFuture<Void> disconnect = CompletableFuture
				.runAsync(() -> client.disconnect(Duration.ofSeconds(10)));
			long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
			while (peer.alive()) {
				assertThat(System.nanoTime()).as("the peer sees the FIN").isLessThan(deadline);
				Thread.sleep(5);
			}
			peer.close();
			disconnect.get(5, TimeUnit.SECONDS);
			assertThat((System.nanoTime() - t0) / 1_000_000).as("disconnect, ms: ended by the peer's close")
				.isLessThan(5_000);
			assertThat(peer.peerAddress()).as("closed").isNull();
		}
		finally {
			client.close();
			peer.close();
		}
	}

	@Test
	void exchangeReadsAreBoundedByTheAttemptsDeadline() throws Exception {
		withRawPeer(false, (client, raw) -> {
			long t0 = System.nanoTime();
			assertThatThrownBy(() -> client.read(52, "endpoint record", t0 + 300_000_000L))
				.isInstanceOfSatisfying(AttemptFailedException.class, ex -> assertThat(ex.kind()).isEqualTo("TIMEOUT"))
				.hasMessageContaining("did not send its 52-byte endpoint record");
			assertThat((System.nanoTime() - t0) / 1_000_000).isBetween(250L, 3_000L);
			raw.write(java.nio.ByteBuffer.wrap(new byte[10]));
			raw.close();
			assertThatThrownBy(() -> client.read(52, "endpoint record", System.nanoTime() + 5_000_000_000L))
				.isInstanceOfSatisfying(AttemptFailedException.class, ex -> assertThat(ex.kind()).isEqualTo("EXCHANGE"))
				.hasMessageContaining("after 10 of the 52 bytes");
		});
	}

	@Test
	void resetEndsTheLink() throws Exception {
		withRawPeer(true, (client, raw) -> {
			assertThat(client.alive()).isTrue();
			raw.setOption(StandardSocketOptions.SO_LINGER, 0);
			raw.close(); // RST: as a process that ended
			long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
			while (client.alive()) {
				assertThat(System.nanoTime()).as("the client sees the reset").isLessThan(deadline);
				Thread.sleep(5);
			}
		});
	}

	@Test
	void disconnectIsBoundedWhenThePeerNeverCloses() throws Exception {
		OutOfBandLink[] links = pair();
		try {
			long t0 = System.nanoTime();
			links[0].disconnect(Duration.ofMillis(300));
			long ms = (System.nanoTime() - t0) / 1_000_000;
			assertThat(ms).isBetween(250L, 3_000L);
			assertThat(links[1].alive()).as("the peer saw the FIN").isFalse();
		}
		finally {
			links[0].close();
			links[1].close();
		}
	}

}
