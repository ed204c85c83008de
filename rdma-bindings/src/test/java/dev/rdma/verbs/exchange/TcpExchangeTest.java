package dev.rdma.verbs.exchange;

import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.HexFormat;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import dev.rdma.verbs.Gid;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.catchThrowable;

/**
 * The TCP exchange of endpoint records on the loopback interface, without a device (the
 * datagram records need no queue pair): both roles, and each way a peer can fail -
 * absent, silent, closing early, sending garbage, closed from another thread - ending in
 * an {@link ExchangeException} within its bound.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class TcpExchangeTest {

	static final InetSocketAddress ANY_LOOPBACK = new InetSocketAddress(InetAddress.getLoopbackAddress(), 0);

	static final ExchangeOptions FAST = ExchangeOptions.defaults()
		.withConnectTimeout(Duration.ofSeconds(5))
		.withIoTimeout(Duration.ofMillis(500));

	static final DatagramEndpoint A = new DatagramEndpoint(0, 0x123, 0x11111111,
			new Gid(HexFormat.of().parseHex("00000000000000000000ffff0a000001")));

	static final DatagramEndpoint B = new DatagramEndpoint(0, 0x456, 0x22222222,
			new Gid(HexFormat.of().parseHex("00000000000000000000ffff0a000002")));

	@Test
	void bothRolesGetThePeersRecord() throws Exception {
		try (ExchangeListener listener = ExchangeListener.bind(ANY_LOOPBACK)) {
			CompletableFuture<DatagramEndpoint> server = CompletableFuture
				.supplyAsync(() -> OutOfBand.accept(listener, B, FAST));
			assertThat(OutOfBand.exchange(A, listener.address(), FAST)).isEqualTo(B);
			assertThat(server.get(10, TimeUnit.SECONDS)).isEqualTo(A);
		}
	}

	@Test
	void theClientWritesItsRecordThenDoneAsIbvRcPingpongsServerExpects() throws Exception {
		try (ServerSocket fake = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
			CompletableFuture<byte[]> seen = CompletableFuture.supplyAsync(() -> {
				try (Socket s = fake.accept()) {
					InputStream in = s.getInputStream();
					byte[] theirs = in.readNBytes(PingpongWire.DATAGRAM_MESSAGE_BYTES);
					s.getOutputStream().write(PingpongWire.encode(B));
					byte[] rest = in.readAllBytes(); // "done\0" then EOF: the client
														// closed
					return concat(theirs, rest);
				}
				catch (Exception e) {
					throw new RuntimeException(e);
				}
			});
			assertThat(OutOfBand.exchange(A, (InetSocketAddress) fake.getLocalSocketAddress(), FAST)).isEqualTo(B);
			assertThat(seen.get(10, TimeUnit.SECONDS)).isEqualTo(concat(PingpongWire.encode(A), PingpongWire.done()));
		}
	}

	@Test
	void aRefusedConnectionIsAClearException() throws Exception {
		InetSocketAddress closed;
		try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
			closed = (InetSocketAddress) s.getLocalSocketAddress();
		}
		assertThatThrownBy(() -> OutOfBand.exchange(A, closed, FAST)).isInstanceOf(ExchangeException.class)
			.hasMessageContaining("cannot connect to the exchange server " + closed);
	}

	@Test
	void aSilentServerTimesOut() throws Exception {
		try (ServerSocket silent = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
			long t0 = System.nanoTime();
			assertThatThrownBy(() -> OutOfBand.exchange(A, (InetSocketAddress) silent.getLocalSocketAddress(), FAST))
				.isInstanceOf(ExchangeException.class)
				.hasMessageContaining("did not send its 54-byte endpoint record within PT0.5S (got 0 bytes)");
			assertThat(Duration.ofNanos(System.nanoTime() - t0)).isLessThan(Duration.ofSeconds(5));
		}
	}

	/**
	 * A timeout under 1 ms is rounded up to 1 ms, not truncated to the socket's 0 ("no
	 * timeout"): with the truncation the read against a silent server never ended.
	 */
	@Test
	void aSubMillisecondIoTimeoutIsStillABound() throws Exception {
		ExchangeOptions halfAMillisecond = FAST.withIoTimeout(Duration.ofNanos(500_000));
		try (ServerSocket silent = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
			long t0 = System.nanoTime();
			CompletableFuture<Throwable> exchange = CompletableFuture.supplyAsync(() -> catchThrowable(
					() -> OutOfBand.exchange(A, (InetSocketAddress) silent.getLocalSocketAddress(), halfAMillisecond)),
					TcpExchangeTest::ownThread);
			Throwable t = exchange.get(5, TimeUnit.SECONDS);
			assertThat(t).isInstanceOf(ExchangeException.class)
				.hasMessageContaining("did not send its 54-byte endpoint record within PT0.0005S (got 0 bytes)");
			assertThat(Duration.ofNanos(System.nanoTime() - t0)).isLessThan(Duration.ofSeconds(5));
		}
		assertThat(ExchangeOptions.socketMillis(500_000)).isEqualTo(1);
		assertThat(ExchangeOptions.socketMillis(1)).isEqualTo(1);
		assertThat(ExchangeOptions.socketMillis(0)).isEqualTo(1);
		assertThat(ExchangeOptions.socketMillis(1_000_000)).isEqualTo(1);
		assertThat(ExchangeOptions.socketMillis(1_000_001)).isEqualTo(2);
		assertThat(ExchangeOptions.socketMillis(Long.MAX_VALUE)).isEqualTo(Integer.MAX_VALUE);
	}

	/**
	 * The io timeout bounds the whole record, not each read: a server that sends its
	 * record one byte every 400 ms against a 500 ms timeout ends after about 500 ms,
	 * naming the timeout and the bytes that arrived (with the timeout per read it took 21
	 * s and ended in a content error).
	 */
	@Test
	void aServerTricklingItsRecordEndsAtTheRecordsBound() throws Exception {
		try (ServerSocket fake = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
			// own threads: the common pool may have a single worker on a small host
			CompletableFuture<Void> server = CompletableFuture.runAsync(() -> {
				try (Socket s = fake.accept()) {
					s.getInputStream().readNBytes(PingpongWire.DATAGRAM_MESSAGE_BYTES);
					OutputStream out = s.getOutputStream();
					for (int i = 0; i < PingpongWire.DATAGRAM_MESSAGE_BYTES; i++) {
						out.write('0');
						out.flush();
						Thread.sleep(400);
					}
				}
				catch (Exception e) {
					// the client gave up and closed: the end of this server
				}
			}, TcpExchangeTest::ownThread);
			long t0 = System.nanoTime();
			CompletableFuture<Throwable> exchange = CompletableFuture.supplyAsync(
					() -> catchThrowable(
							() -> OutOfBand.exchange(A, (InetSocketAddress) fake.getLocalSocketAddress(), FAST)),
					TcpExchangeTest::ownThread);
			Throwable t = exchange.get(30, TimeUnit.SECONDS);
			Duration took = Duration.ofNanos(System.nanoTime() - t0);
			assertThat(t).isInstanceOf(ExchangeException.class)
				.hasMessageContaining("did not send its 54-byte endpoint record within PT0.5S (got ")
				.hasMessageNotContaining("(got 0 bytes)");
			assertThat(took).isLessThan(Duration.ofSeconds(2));
			server.get(30, TimeUnit.SECONDS);
		}
	}

	@Test
	void aServerClosingEarlyOrSendingGarbageIsAClearException() throws Exception {
		assertThatThrownBy(() -> againstFakeServer(out -> out.write(new byte[10])))
			.isInstanceOf(ExchangeException.class)
			.hasMessageContaining("closed the connection after 10 of the 54 bytes");
		assertThatThrownBy(() -> againstFakeServer(
				out -> out.write(java.util.Arrays.copyOf("HTTP/1.1 400".getBytes(StandardCharsets.US_ASCII), 54))))
			.isInstanceOf(ExchangeException.class)
			.hasMessageContaining("not an endpoint record")
			.hasMessageContaining("HTTP/1.1 400");
	}

	/**
	 * A client that refuses the server's record closes without {@code "done"}: an
	 * {@code ibv_rc_pingpong} server then ends ("Couldn't send/recv local address")
	 * instead of waiting in RTS for a client that will not come.
	 */
	@Test
	void aClientThatRefusesTheServersRecordSendsNoDone() throws Exception {
		try (ServerSocket fake = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
			CompletableFuture<byte[]> afterRecord = CompletableFuture.supplyAsync(() -> {
				try (Socket s = fake.accept()) {
					s.setSoTimeout(10_000);
					InputStream in = s.getInputStream();
					in.readNBytes(PingpongWire.DATAGRAM_MESSAGE_BYTES);
					s.getOutputStream()
						.write(java.util.Arrays.copyOf("HTTP/1.1 400".getBytes(StandardCharsets.US_ASCII), 54));
					return in.readAllBytes();
				}
				catch (Exception e) {
					throw new RuntimeException(e);
				}
			}, TcpExchangeTest::ownThread);
			assertThatThrownBy(() -> OutOfBand.exchange(A, (InetSocketAddress) fake.getLocalSocketAddress(), FAST))
				.isInstanceOf(ExchangeException.class)
				.hasMessageContaining("not an endpoint record");
			assertThat(afterRecord.get(10, TimeUnit.SECONDS)).as("what the client sent after the records").isEmpty();
		}
	}

	@Test
	void theServerRefusesAClientThatSendsGarbageOrNoDone() throws Exception {
		try (ExchangeListener listener = ExchangeListener.bind(ANY_LOOPBACK)) {
			CompletableFuture<DatagramEndpoint> server = CompletableFuture
				.supplyAsync(() -> OutOfBand.accept(listener, B, FAST));
			try (Socket s = new Socket(listener.address().getAddress(), listener.port())) {
				s.getOutputStream().write(new byte[PingpongWire.DATAGRAM_MESSAGE_BYTES]);
				assertThatThrownBy(() -> server.get(10, TimeUnit.SECONDS)).hasCauseInstanceOf(ExchangeException.class)
					.hasMessageContaining("not an endpoint record");
			}
			CompletableFuture<DatagramEndpoint> second = CompletableFuture
				.supplyAsync(() -> OutOfBand.accept(listener, B, FAST));
			try (Socket s = new Socket(listener.address().getAddress(), listener.port())) {
				s.getOutputStream().write(PingpongWire.encode(A));
				s.getInputStream().readNBytes(PingpongWire.DATAGRAM_MESSAGE_BYTES);
				s.getOutputStream().write("nope!".getBytes(StandardCharsets.US_ASCII));
				assertThatThrownBy(() -> second.get(10, TimeUnit.SECONDS)).hasCauseInstanceOf(ExchangeException.class)
					.hasMessageContaining("something else than \"done\"");
			}
		}
	}

	@Test
	void acceptIsBoundedAndEndsWhenTheListenerIsClosed() throws Exception {
		ExchangeListener listener = ExchangeListener.bind(ANY_LOOPBACK);
		try {
			long t0 = System.nanoTime();
			assertThatThrownBy(() -> OutOfBand.accept(listener, B, FAST.withConnectTimeout(Duration.ofMillis(300))))
				.isInstanceOf(ExchangeException.class)
				.hasMessageContaining("no peer connected to " + listener.address() + " within PT0.3S");
			assertThat(Duration.ofNanos(System.nanoTime() - t0)).isLessThan(Duration.ofSeconds(5));

			CompletableFuture<DatagramEndpoint> waiting = CompletableFuture
				.supplyAsync(() -> OutOfBand.accept(listener, B, FAST.withConnectTimeout(Duration.ofSeconds(30))));
			Thread.sleep(200);
			listener.close();
			listener.close(); // idempotent
			assertThatThrownBy(() -> waiting.get(10, TimeUnit.SECONDS)).hasCauseInstanceOf(ExchangeException.class)
				.hasMessageContaining("was closed");
		}
		finally {
			listener.close();
		}
	}

	@Test
	void optionsRequireBounds() {
		assertThatThrownBy(() -> FAST.withIoTimeout(Duration.ZERO)).hasMessageContaining("ioTimeout must be positive");
		assertThatThrownBy(() -> FAST.withIoTimeout(Duration.ofMillis(Integer.MAX_VALUE + 1L)))
			.isInstanceOf(IllegalArgumentException.class)
			.hasMessageContaining("ioTimeout must be positive and at most 2147483647 ms");
		assertThatThrownBy(() -> FAST.withConnectTimeout(Duration.ofSeconds(Long.MAX_VALUE)))
			.isInstanceOf(IllegalArgumentException.class)
			.hasMessageContaining("connectTimeout must be positive and at most 2147483647 ms");
		assertThat(FAST.withIoTimeout(Duration.ofMillis(Integer.MAX_VALUE)).ioTimeout())
			.isEqualTo(Duration.ofMillis(Integer.MAX_VALUE));
		assertThatThrownBy(() -> FAST.withGidIndex(-3)).hasMessageContaining("gidIndex");
		assertThatThrownBy(() -> FAST.withPort(0)).hasMessageContaining("port must be 1..255");
		assertThat(ExchangeOptions.defaults().parameters().pathMtu()).isEqualTo(1024);
		assertThat(ExchangeOptions.defaults().parameters().minRnrTimer()).isEqualTo(12);
		assertThat(ExchangeOptions.defaults().parameters().timeout()).isEqualTo(14);
		assertThat(ExchangeOptions.defaults().gidIndex()).isEqualTo(ExchangeOptions.FIND_GID);
	}

	interface ServerScript {

		void run(OutputStream out) throws Exception;

	}

	private static void againstFakeServer(ServerScript script) throws Exception {
		try (ServerSocket fake = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
			CompletableFuture<Void> server = CompletableFuture.runAsync(() -> {
				try (Socket s = fake.accept()) {
					s.getInputStream().readNBytes(PingpongWire.DATAGRAM_MESSAGE_BYTES);
					script.run(s.getOutputStream());
				}
				catch (Exception e) {
					throw new RuntimeException(e);
				}
			});
			try {
				OutOfBand.exchange(A, (InetSocketAddress) fake.getLocalSocketAddress(), FAST);
			}
			finally {
				server.get(10, TimeUnit.SECONDS);
			}
		}
	}

	private static void ownThread(Runnable task) {
		Thread t = new Thread(task, "TcpExchangeTest");
		t.setDaemon(true);
		t.start();
	}

	private static byte[] concat(byte[] a, byte[] b) {
		byte[] out = java.util.Arrays.copyOf(a, a.length + b.length);
		System.arraycopy(b, 0, out, a.length, b.length);
		return out;
	}

}
