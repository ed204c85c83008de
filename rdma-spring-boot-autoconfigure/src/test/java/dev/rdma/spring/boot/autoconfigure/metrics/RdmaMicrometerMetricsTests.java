package dev.rdma.spring.boot.autoconfigure.metrics;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashSet;
import java.util.Map;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import io.micrometer.core.instrument.Meter;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import org.junit.jupiter.api.Test;

import dev.rdma.spring.boot.autoconfigure.RdmaResources;
import dev.rdma.verbs.CompletionQueue;
import dev.rdma.verbs.Context;

import static org.assertj.core.api.Assertions.assertThat;
import static org.mockito.Mockito.mock;
import static org.mockito.Mockito.when;

/**
 * Every meter docs/running.md lists exists at startup, at zero, before anything happened:
 * {@code rdma.listener.failures} included.
 */
class RdmaMicrometerMetricsTests {

	@Test
	void everyDocumentedMeterIsRegisteredAtStartupWithZero() throws Exception {
		SimpleMeterRegistry registry = new SimpleMeterRegistry();
		RdmaResources resources = mock(RdmaResources.class);
		CompletionQueue rx = mock(CompletionQueue.class);
		Context context = mock(Context.class);
		when(rx.context()).thenReturn(context);
		when(context.deviceName()).thenReturn("rxe0");
		when(resources.queues()).thenReturn(Map.of("rx", rx));
		RdmaMicrometerMetrics metrics = new RdmaMicrometerMetrics(registry, resources);
		// what the container factory and the context do at startup
		metrics.forQueue("rx");
		metrics.afterSingletonsInstantiated();

		Set<String> documented = documentedMeters();
		assertThat(documented).contains("rdma.listener.failures", "rdma.completions", "rdma.cq.errors");
		for (String name : documented) {
			assertThat(registry.find(name).tag("queue", "rx").meters()).as(name + " registered at startup")
				.isNotEmpty();
			for (Meter meter : registry.find(name).tag("queue", "rx").meters()) {
				meter.measure()
					.forEach(m -> assertThat(m.getValue()).as(name + " " + m.getStatistic() + " at startup").isZero());
			}
		}
		assertThat(registry.get("rdma.listener.failures").tag("queue", "rx").counter().count()).isZero();
	}

	/** The meter names docs/running.md lists under "Metrics and health". */
	private static Set<String> documentedMeters() throws Exception {
		String readme = Files.readString(Path.of("..", "docs", "running.md"));
		String section = readme.substring(readme.indexOf("## Metrics"));
		int end = section.indexOf("\n#", 5);
		section = (end < 0) ? section : section.substring(0, end);
		Set<String> names = new LinkedHashSet<>();
		Matcher m = Pattern.compile("`(rdma\\.[a-z.]+)`").matcher(section);
		while (m.find()) {
			names.add(m.group(1));
		}
		return names;
	}

}
