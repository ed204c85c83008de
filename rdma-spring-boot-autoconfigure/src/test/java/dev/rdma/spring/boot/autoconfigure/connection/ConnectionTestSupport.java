package dev.rdma.spring.boot.autoconfigure.connection;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import java.util.function.Function;
import java.util.stream.Collectors;

import io.micrometer.core.instrument.MeterRegistry;

import org.springframework.context.ConfigurableApplicationContext;

import dev.rdma.spring.connection.RdmaConnection;
import dev.rdma.verbs.cm.CmEvent;
import dev.rdma.verbs.cm.CmEventType;
import dev.rdma.verbs.cm.ConnectionId;
import dev.rdma.verbs.testing.DeviceTestSupport;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * What the connection device tests share: the echo exchange of {@link ConnectionApps}
 * with its checks, the connection's error count, waiting for a condition, and the names
 * of the live threads.
 */
final class ConnectionTestSupport {

	private static final Duration TIMEOUT = Duration.ofSeconds(60);

	private ConnectionTestSupport() {
	}

	/**
	 * {@code wrapper} applied to the started application {@code app} (a fixture reading
	 * its beans); closes {@code app} when that fails, so that nothing the application
	 * opened outlives the failure.
	 */
	static <T> T wrapOrClose(ConfigurableApplicationContext app, Function<ConfigurableApplicationContext, T> wrapper) {
		try {
			return wrapper.apply(app);
		}
		catch (RuntimeException | Error ex) {
			app.close();
			throw ex;
		}
	}

	/**
	 * Sends messages {@code first .. first+count-1} of {@code length} bytes, at most 16
	 * unanswered, and checks that every echo came back once, intact. Call it with no echo
	 * of an earlier send still to come.
	 */
	static void exchange(RdmaConnection link, ConnectionApps.Collector collector, long first, int count, int length)
			throws InterruptedException {
		collector.echoes.clear();
		collector.length = length;
		// the window starts with its 16 places: echoes of a test's own sends before this
		// call (FailedCompletionDeviceTest's, made without the window) freed places of
		// their own, and the last wait below would end before the last echoes
		collector.window.drainPermits();
		collector.window.release(16);
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

	/** Waits up to 60 s for {@code condition} ({@link DeviceTestSupport#within}). */
	static void await(String what, BooleanSupplier condition) throws InterruptedException {
		DeviceTestSupport.within(TIMEOUT, what, condition);
	}

	/**
	 * Reads {@code id}'s next event, waiting up to {@code step}, and asserts that it came
	 * and is a {@code type}.
	 */
	static void expect(ConnectionId id, CmEventType type, Duration step) {
		CmEvent e = id.getEvent(step);
		assertThat(e).as("an event within %s (expected %s)", step, type).isNotNull();
		assertThat(e.type()).as(e.toString()).isEqualTo(type);
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
