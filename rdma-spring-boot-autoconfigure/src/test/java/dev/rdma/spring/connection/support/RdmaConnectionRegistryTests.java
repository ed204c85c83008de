package dev.rdma.spring.connection.support;

import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The registry's list of connections is read without its lock once made: a {@code stop()}
 * holds the lock while the connections close (up to {@code rdma.shutdown-timeout}), and
 * the health indicator, which Boot still serves during that stop (the web server stops
 * after the registry), read the list through the lock: each health request waited for the
 * stop.
 */
class RdmaConnectionRegistryTests {

	@Test
	void theConnectionsAreReadWhileAnotherThreadHoldsTheRegistry() throws Exception {
		RdmaConnectionRegistry registry = new RdmaConnectionRegistry(List.of(), Duration.ofSeconds(5));
		assertThat(registry.connections()).isEmpty();
		CountDownLatch holding = new CountDownLatch(1);
		CountDownLatch release = new CountDownLatch(1);
		Thread stopping = Thread.ofPlatform().name("holds-the-registry").start(() -> {
			synchronized (registry) { // as stop() does while the connections close
				holding.countDown();
				try {
					release.await(30, TimeUnit.SECONDS);
				}
				catch (InterruptedException ex) {
					Thread.currentThread().interrupt();
				}
			}
		});
		try {
			assertThat(holding.await(10, TimeUnit.SECONDS)).isTrue();
			CompletableFuture<List<ConfiguredConnection>> read = CompletableFuture.supplyAsync(registry::connections);
			assertThat(read.get(10, TimeUnit.SECONDS)).as("read while the registry is held").isEmpty();
		}
		finally {
			release.countDown();
			stopping.join(Duration.ofSeconds(10));
		}
	}

}
