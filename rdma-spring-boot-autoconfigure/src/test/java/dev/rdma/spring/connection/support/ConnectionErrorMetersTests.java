package dev.rdma.spring.connection.support;

import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.List;

import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

import org.springframework.beans.factory.support.DefaultListableBeanFactory;
import org.springframework.boot.test.system.CapturedOutput;
import org.springframework.boot.test.system.OutputCaptureExtension;

import dev.rdma.spring.boot.autoconfigure.metrics.RdmaConnectionMetrics;
import dev.rdma.verbs.CompletionQueue;
import dev.rdma.verbs.cm.CmParameters;

import static org.assertj.core.api.Assertions.assertThat;
import static org.mockito.Mockito.mock;

/**
 * Every kind of connection error that {@link ConnectionCounters} counts has its
 * {@code rdma.connection.errors} meter: the fixed kinds from the start, any other kind
 * (EXCHANGE, IO_ERROR, STOPPED, a failed completion's status) once first counted, also
 * when it was counted before the meters were registered. Without a device: the queues are
 * mocks, the registry a {@link SimpleMeterRegistry}.
 */
@ExtendWith(OutputCaptureExtension.class)
class ConnectionErrorMetersTests {

	@Test
	void everyKindCountedHasAMeter(CapturedOutput output) {
		DefaultListableBeanFactory beans = new DefaultListableBeanFactory();
		CompletionQueue queue = mock(CompletionQueue.class);
		beans.registerSingleton("tx", queue);
		beans.registerSingleton("rx", queue);
		SimpleMeterRegistry meters = new SimpleMeterRegistry();
		beans.registerSingleton("meters", meters);
		ConnectionSettings settings = new ConnectionSettings("orders", false, new InetSocketAddress("10.0.0.2", 7471),
				null, 1, Duration.ofSeconds(5),
				new ConnectionSettings.Retry(Duration.ofMillis(100), 2, Duration.ofSeconds(5), 0), "tx", "rx", 2, 1, 1,
				64, Duration.ofSeconds(1), true, CmParameters.DEFAULTS, Duration.ofSeconds(5));
		RdmaConnectionRegistry registry = new RdmaConnectionRegistry(List.of(settings), Duration.ofSeconds(5));
		registry.setBeanFactory(beans);
		ConnectionCounters counters = registry.connection("orders").counters();
		counters.connectionError("EXCHANGE"); // before the meters exist

		new RdmaConnectionMetrics(beans.getBeanProvider(MeterRegistry.class), registry).afterSingletonsInstantiated();
		counters.connectionError("IO_ERROR");
		counters.connectionError("STOPPED");
		counters.connectionError("RETRY_EXC_ERR");
		counters.connectionError("RETRY_EXC_ERR");
		counters.connectionError("TIMEOUT");

		assertThat(errors(meters, "EXCHANGE")).isEqualTo(1);
		assertThat(errors(meters, "IO_ERROR")).isEqualTo(1);
		assertThat(errors(meters, "STOPPED")).isEqualTo(1);
		assertThat(errors(meters, "RETRY_EXC_ERR")).isEqualTo(2);
		assertThat(errors(meters, "TIMEOUT")).isEqualTo(1);
		assertThat(errors(meters, "DISCONNECTED")).as("a fixed kind, never counted").isZero();
		for (String kind : counters.connectionErrorKinds()) {
			assertThat(errors(meters, kind)).as(kind).isEqualTo(counters.connectionErrors(kind));
		}
		assertThat(output.getAll()).as("TIMEOUT, a fixed kind first counted after the registration")
			.doesNotContain("has been already registered");
	}

	private static double errors(MeterRegistry meters, String kind) {
		return meters.get("rdma.connection.errors")
			.tag("connection", "orders")
			.tag("kind", kind)
			.functionCounter()
			.count();
	}

}
