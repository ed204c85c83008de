package dev.rdma.verbs.exchange;

import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowable;

/**
 * Concurrent accepts on one {@link ExchangeListener}: each is bounded by its own timeout.
 * With a {@code ServerSocket} whose {@code SO_TIMEOUT} was set per call and read by the
 * JDK when its accept started, a 20 ms accept could inherit the 1 h timeout another
 * thread had just set (and wait behind its accept lock), and a 1 h accept could end after
 * 20 ms.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class ExchangeListenerConcurrencyTest {

	static final InetSocketAddress ANY_LOOPBACK = new InetSocketAddress(InetAddress.getLoopbackAddress(), 0);

	static final Duration LONG = Duration.ofHours(1);

	static final Duration SHORT = Duration.ofMillis(20);

	/** Far above 20 ms, far below an hour: room for a loaded host. */
	static final Duration BOUND = Duration.ofSeconds(3);

	static final int ROUNDS = 60;

	static final int LONG_PER_ROUND = 3;

	/**
	 * Each round starts {@value #LONG_PER_ROUND} one-hour accepts and one 20 ms accept at
	 * the same instant (a barrier); the long ones stay pending, so later rounds run
	 * against a growing crowd of them. Every short accept must end with its own timeout
	 * within the bound, and no long accept may end before the listener is closed.
	 */
	@Test
	void aShortAcceptAlwaysEndsWithinItsOwnBoundAmongLongOnes() throws Exception {
		List<CompletableFuture<Throwable>> longOnes = new ArrayList<>();
		try (ExchangeListener listener = ExchangeListener.bind(ANY_LOOPBACK)) {
			for (int round = 0; round < ROUNDS; round++) {
				CyclicBarrier start = new CyclicBarrier(LONG_PER_ROUND + 1);
				for (int i = 0; i < LONG_PER_ROUND; i++) {
					longOnes.add(acceptOnOwnThread(listener, LONG, start));
				}
				long t0 = System.nanoTime();
				CompletableFuture<Throwable> shortOne = acceptOnOwnThread(listener, SHORT, start);
				Throwable t;
				try {
					t = shortOne.get(BOUND.toMillis(), TimeUnit.MILLISECONDS);
				}
				catch (TimeoutException e) {
					throw new AssertionError("round " + round + ": the 20 ms accept among " + longOnes.size()
							+ " pending one-hour accepts did not end within " + BOUND, e);
				}
				Duration took = Duration.ofNanos(System.nanoTime() - t0);
				assertThat(t)
					.as("round %d: the 20 ms accept among %d pending one-hour accepts, after %s", round,
							longOnes.size(), took)
					.isInstanceOf(ExchangeException.class)
					.hasMessageContaining("within PT0.02S");
				assertThat(took).as("round %d", round).isLessThan(BOUND);
				assertThat(longOnes).as("round %d: one-hour accepts that already ended", round)
					.noneMatch(CompletableFuture::isDone);
			}
		}
		for (CompletableFuture<Throwable> f : longOnes) {
			assertThat(f.get(30, TimeUnit.SECONDS)).isInstanceOf(ExchangeException.class)
				.hasMessageContaining("was closed");
		}
	}

	/** A connection among concurrent accepts goes to exactly one of them. */
	@Test
	void eachConnectionGoesToOneOfTheConcurrentAccepts() throws Exception {
		try (ExchangeListener listener = ExchangeListener.bind(ANY_LOOPBACK)) {
			CyclicBarrier start = new CyclicBarrier(4);
			List<CompletableFuture<Socket>> accepts = new ArrayList<>();
			for (int i = 0; i < 4; i++) {
				accepts.add(CompletableFuture.supplyAsync(() -> {
					await(start);
					return listener.accept(Duration.ofSeconds(5));
				}, ExchangeListenerConcurrencyTest::ownThread));
			}
			List<Socket> clients = new ArrayList<>();
			try {
				for (int i = 0; i < 2; i++) {
					clients.add(new Socket(listener.address().getAddress(), listener.port()));
				}
				CompletableFuture.allOf(accepts.toArray(CompletableFuture[]::new))
					.exceptionally(t -> null)
					.get(30, TimeUnit.SECONDS);
				List<Socket> accepted = new ArrayList<>();
				int timedOut = 0;
				for (CompletableFuture<Socket> f : accepts) {
					Throwable t = catchThrowable(f::join);
					if (t == null) {
						accepted.add(f.join());
					}
					else {
						assertThat(t).hasCauseInstanceOf(ExchangeException.class).hasMessageContaining("within PT5S");
						timedOut++;
					}
				}
				assertThat(accepted).hasSize(2);
				assertThat(timedOut).isEqualTo(2);
				assertThat(accepted).extracting(Socket::getPort)
					.containsExactlyInAnyOrderElementsOf(clients.stream().map(Socket::getLocalPort).toList());
				for (Socket s : accepted) {
					s.close();
				}
			}
			finally {
				for (Socket c : clients) {
					c.close();
				}
			}
		}
	}

	private static CompletableFuture<Throwable> acceptOnOwnThread(ExchangeListener listener, Duration timeout,
			CyclicBarrier start) {
		return CompletableFuture.supplyAsync(() -> {
			await(start);
			return catchThrowable(() -> listener.accept(timeout).close());
		}, ExchangeListenerConcurrencyTest::ownThread);
	}

	private static void await(CyclicBarrier barrier) {
		try {
			barrier.await(30, TimeUnit.SECONDS);
		}
		catch (Exception e) {
			throw new IllegalStateException(e);
		}
	}

	private static void ownThread(Runnable task) {
		Thread t = new Thread(task, "ExchangeListenerConcurrencyTest");
		t.setDaemon(true);
		t.start();
	}

}
