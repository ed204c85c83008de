package dev.rdma.spring.boot.autoconfigure;

import java.time.Duration;
import java.util.List;

import org.junit.jupiter.api.Test;

import dev.rdma.spring.config.RdmaListenerEndpointRegistry;
import dev.rdma.spring.listener.CompletionQueueListenerContainer;
import dev.rdma.spring.listener.PollerGroup;
import dev.rdma.spring.listener.PollerGroupSettings;
import dev.rdma.spring.listener.PollerSettings;
import dev.rdma.spring.listener.PollingMode;

import static org.assertj.core.api.Assertions.assertThat;
import static org.mockito.Mockito.mock;
import static org.mockito.Mockito.when;

/**
 * The startup report: one line per device, channel and queue, a queue's with its type,
 * size, polling mode and its cost, listener and thread.
 */
class RdmaStartupReportTests {

	private static CompletionQueueListenerContainer container(PollingMode mode, String listener) {
		CompletionQueueListenerContainer container = mock(CompletionQueueListenerContainer.class);
		PollerSettings settings = PollerSettings.DEFAULTS.withBatchSize(16).withSpin(Duration.ofNanos(50_000));
		when(container.mode()).thenReturn(mode);
		when(container.getSettings()).thenReturn(settings);
		when(container.getListenerId()).thenReturn(listener);
		Thread thread = Thread.ofPlatform().name("rdma-poller-rx").unstarted(() -> {
		});
		when(container.thread()).thenReturn(thread);
		return container;
	}

	@Test
	void queueLineSaysTypeSizePollingCostListenerAndThread() {
		CompletionQueueProperties rx = new CompletionQueueProperties();
		rx.setType(QueueType.EXTENDED);
		rx.setEntries(1000);
		rx.setChannel("events0");
		String line = RdmaStartupReport.queueLine("rx", rx, 1023, "nic0 (rxe0)",
				container(PollingMode.EVENT, "@RdmaCompletionListener L.on(WorkCompletion) of bean 'l'"));
		assertThat(line).isEqualTo("RDMA completion queue 'rx': type extended, 1023 entries (asked 1000), device "
				+ "nic0 (rxe0), channel 'events0'; polling event (waits on the channel when idle), batch 16; listener "
				+ "@RdmaCompletionListener L.on(WorkCompletion) of bean 'l' on thread rdma-poller-rx");
	}

	@Test
	void busyPollingSaysItBurnsACore() {
		CompletionQueueProperties tx = new CompletionQueueProperties();
		String line = RdmaStartupReport.queueLine("tx", tx, 1024, "nic0 (rxe0)", container(PollingMode.BUSY, "x"));
		assertThat(line).contains("type legacy, 1024 entries, device nic0 (rxe0), channel none; polling busy "
				+ "(spins: one core busy, also when idle)");
		assertThat(RdmaStartupReport.queueLine("tx", tx, 1024, "nic0", container(PollingMode.BACKOFF, "x")))
			.contains("polling backoff (sleeps up to 1000us between polls when idle)");
	}

	@Test
	void queueWithoutListenerSaysItIsNotPolled() {
		CompletionQueueProperties tx = new CompletionQueueProperties();
		assertThat(RdmaStartupReport.queueLine("tx", tx, -1, "nic0 (rxe0)", null))
			.isEqualTo("RDMA completion queue 'tx': type legacy, 1024 entries, device nic0 (rxe0), channel none; "
					+ "no listener: not polled by the starter");
	}

	@Test
	void deviceAndChannelLinesNameTheirThreadAndQueues() {
		assertThat(RdmaStartupReport.deviceLine("nic0", "rxe0", 1))
			.isEqualTo("RDMA device 'nic0': rxe0, port 1; asynchronous events read by thread rdma-async-rxe0");
		assertThat(RdmaStartupReport.channelLine("events0", "nic0", List.of("rx", "tx")))
			.isEqualTo("RDMA completion channel 'events0' on device 'nic0': events of queue(s) [rx, tx]");
	}

	@Test
	void reportStartsRightAfterThePollers() {
		RdmaStartupReport report = new RdmaStartupReport(mock(RdmaResources.class), null);
		assertThat(report.getPhase()).isGreaterThan(new RdmaListenerEndpointRegistry().getPhase());
	}

	@Test
	void adaptiveQueueOfAGroupReportsTheGroupsSpin() {
		CompletionQueueListenerContainer container = container(PollingMode.ADAPTIVE, "x");
		PollerGroupSettings group = PollerGroupSettings.DEFAULTS.withMode(PollingMode.ADAPTIVE)
			.withSpin(Duration.ofNanos(200_000));
		when(container.getPollerGroup())
			.thenReturn(new PollerGroup("conns", group, new dev.rdma.spring.listener.CompletionEventRouter()));
		CompletionQueueProperties rx = new CompletionQueueProperties();
		rx.setChannel("events0");
		assertThat(RdmaStartupReport.queueLine("rx", rx, 1024, "nic0", container))
			.contains("polling adaptive (spins 200us after a completion, then waits on the channel)");
	}

}
