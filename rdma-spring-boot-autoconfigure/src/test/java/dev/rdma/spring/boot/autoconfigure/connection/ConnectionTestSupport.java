package dev.rdma.spring.boot.autoconfigure.connection;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import java.util.stream.Collectors;

import io.micrometer.core.instrument.MeterRegistry;

import dev.rdma.spring.connection.RdmaConnection;
import dev.rdma.verbs.NativeObjects;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * What the connection device tests share: a port for their applications, the check that
 * every native object they opened is closed again, the echo exchange of
 * {@link ConnectionApps} with its checks, the connection's error count, waiting for a
 * condition, and the names of the live threads.
 */
final class ConnectionTestSupport {

	private static final Duration TIMEOUT = Duration.ofSeconds(60);

	private ConnectionTestSupport() {
	}

	/** A random port for the applications of one test (20000 to 39999). */
	static int randomPort() {
		return 20000 + ThreadLocalRandom.current().nextInt(20000);
	}

	/**
	 * Asserts that as many native objects are open as at {@code baseline} (taken before
	 * the test opened any), {@code when} naming the moment.
	 */
	static void assertNativeObjectsClosed(long baseline, String when) {
		assertThat(NativeObjects.open()).as("native objects after " + when + ": " + NativeObjects.openByType())
			.isEqualTo(baseline);
	}

	/**
	 * Sends messages {@code first .. first+count-1} of {@code length} bytes, at most 16
	 * unanswered, and checks that every echo came back once, intact.
	 */
	static void exchange(RdmaConnection link, ConnectionApps.Collector collector, long first, int count, int length)
			throws InterruptedException {
		collector.echoes.clear();
		collector.length = length;
		byte[] message = new byte[length];
		for (long seq = first; seq < first + count; seq++) {
			assertThat(collector.window.tryAcquire(30, TimeUnit.SECONDS)).as("echo window, message " + seq).isTrue();
			ConnectionApps.fill(message, seq, length);
			link.send(message);
		}
		assertThat(collector.window.tryAcquire(16, 30, TimeUnit.SECONDS)).as("the last echoes").isTrue();
		collector.window.release(16);
		assertThat(collector.problems).isEmpty();
		List<Long> echoes = new ArrayList<>(collector.echoes);
		assertThat(echoes).hasSize(count);
		Set<Long> distinct = new HashSet<>(echoes);
		assertThat(distinct).hasSize(count);
		List<Long> expected = new ArrayList<>();
		for (long seq = first; seq < first + count; seq++) {
			expected.add(seq);
		}
		// one connection, completions in order: the echoes come back in sending order
		assertThat(echoes).isEqualTo(expected);
	}

	static double errors(MeterRegistry meters) {
		return meters.find("rdma.connection.errors")
			.tag("connection", "link")
			.functionCounters()
			.stream()
			.mapToDouble(c -> c.count())
			.sum();
	}

	static void await(String what, BooleanSupplier condition) throws InterruptedException {
		long deadline = System.nanoTime() + TIMEOUT.toNanos();
		while (!condition.getAsBoolean()) {
			if (System.nanoTime() - deadline > 0) {
				throw new AssertionError("not within " + TIMEOUT + ": " + what);
			}
			Thread.sleep(20);
		}
	}

	static Set<String> threads() {
		return Thread.getAllStackTraces()
			.keySet()
			.stream()
			.filter(Thread::isAlive)
			.map(Thread::getName)
			.collect(Collectors.toSet());
	}

}
