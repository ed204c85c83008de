package dev.rdma.spring.boot.autoconfigure.reliability;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

import dev.rdma.spring.boot.autoconfigure.RdmaAsyncEventMonitor;
import dev.rdma.spring.config.RdmaListenerEndpointRegistry;
import dev.rdma.spring.listener.CompletionQueueListenerContainer;
import dev.rdma.spring.listener.PollingMode;
import dev.rdma.verbs.NativeObjects;
import dev.rdma.verbs.testing.DeviceTestSupport;
import dev.rdma.verbs.testing.ThrowAwayDevice;

import static dev.rdma.verbs.testing.NoNativeLeaks.assertNativeObjectsClosed;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * Issue 7, fault "the device is removed" ({@code rdma link delete <device>}): on rxe the
 * deletion blocks, with no async event, until every process closed its context. The
 * application runs with traffic on its four queues, the deletion starts in the background
 * and stays blocked; the Spring context closes; the deletion must then complete within
 * seconds.
 *
 * <p>
 * The device removed is one of the test's own ({@link ThrowAwayDevice}: rxe on a veth
 * pair, created here), so rxe0, rxeA and rxeB stay and the test runs among the other
 * device tests, in their JVM. It runs only inside the Soft-RoCE VM (tag
 * {@code device-admin}, see {@link DeviceAdmin}).
 */
@Tag(DeviceTestSupport.TAG)
@Tag("device-admin")
class DeviceRemovalReliabilityDeviceTest {

	private static final Duration TIMEOUT = Duration.ofSeconds(120);

	/** How long the deletion must stay blocked while the application is open. */
	private static final long BLOCKED_MS = 3000;

	/** The deletion must complete this soon after the context closed. */
	private static final long AFTER_CLOSE_MS = 5000;

	@Test
	void deviceRemovalCompletesOnceTheApplicationClosed() throws Exception {
		try (ThrowAwayDevice gone = ThrowAwayDevice.create("rxeGone", "vethGone", "10.0.9.5")) {
			removeWhileOpen(gone.name());
		}
	}

	private void removeWhileOpen(String device) throws Exception {
		long open = NativeObjects.open();
		long[] figures = new long[5];
		AtomicLong exitedAt = new AtomicLong();
		RdmaListenerEndpointRegistry[] registry = new RdmaListenerEndpointRegistry[1];
		Process[] delete = new Process[1];
		Path log = Files.createTempFile("rdma-link-delete", ".log");
		String[] blockedNote = new String[1];
		try {
			LoadApp.runner(device, PollingMode.EVENT, 4096).run(context -> {
				assertThat(context).hasNotFailed();
				registry[0] = context.getBean(RdmaListenerEndpointRegistry.class);
				RdmaAsyncEventMonitor.DeviceEvents events = context.getBean(RdmaAsyncEventMonitor.class).events("nic0");
				LoadApp.drive(context, 0, 2048, TIMEOUT, "qp0", "qp1");
				long eventsBefore = events.total();

				delete[0] = new ProcessBuilder("rdma", "link", "delete", device).redirectErrorStream(true)
					.redirectOutput(log.toFile())
					.start();
				delete[0].onExit().thenRun(() -> exitedAt.set(System.nanoTime()));
				boolean exitedEarly = delete[0].waitFor(BLOCKED_MS, TimeUnit.MILLISECONDS);
				assertThat(exitedEarly)
					.as("rdma link delete " + device + " returned while the application had the " + "device open (exit "
							+ (exitedEarly ? delete[0].exitValue() : -1) + ": " + read(log) + ")")
					.isFalse();
				// still open and working while the deletion waits: traffic on both QPs
				String traffic;
				try {
					LoadApp.drive(context, 2048, 1024, Duration.ofSeconds(30), "qp0", "qp1");
					traffic = "ok";
				}
				catch (AssertionError ex) {
					traffic = "failed";
				}
				blockedNote[0] = traffic;
				figures[3] = events.total() - eventsBefore;
				assertThat(delete[0].isAlive()).as("rdma link delete still blocked before close").isTrue();

				long start = System.nanoTime();
				context.getSourceApplicationContext().close();
				long closed = System.nanoTime();
				figures[0] = (closed - start) / 1_000_000;
				boolean done = delete[0].waitFor(AFTER_CLOSE_MS, TimeUnit.MILLISECONDS);
				figures[1] = (System.nanoTime() - closed) / 1_000_000;
				assertThat(done)
					.as("rdma link delete " + device + " completed within " + AFTER_CLOSE_MS
							+ " ms after the context closed (output: " + read(log) + ")")
					.isTrue();
				figures[2] = delete[0].exitValue();
				DeviceTestSupport.await(Duration.ofSeconds(5), () -> exitedAt.get() != 0, "the deletion's exit seen");
				figures[4] = (exitedAt.get() - start) / 1_000_000;
			});
		}
		finally {
			if (delete[0] != null && delete[0].isAlive()) {
				delete[0].destroy();
			}
		}
		Reliability.report("device-removal", "device", device, "deleteBlockedMs", ">=" + BLOCKED_MS,
				"asyncEventsWhileBlocked", figures[3], "trafficWhileDeletePending", blockedNote[0], "closeMs",
				figures[0], "deleteExitedAfterCloseStartMs", figures[4], "deleteDoneAfterCloseMs", figures[1],
				"deleteExit", figures[2], "deviceGone", !Files.exists(Path.of("/sys/class/infiniband", device)));
		assertThat(figures[2]).as("rdma link delete exit status (" + read(log) + ")").isZero();
		assertThat(figures[3]).as("async events while the deletion was pending").isZero();
		assertThat(Path.of("/sys/class/infiniband", device)).doesNotExist();
		for (CompletionQueueListenerContainer poller : registry[0].getListenerContainers()) {
			assertThat(poller.isRunning()).as("poller of " + poller.queue() + " after close").isFalse();
		}
		assertThat(figures[0]).as("shutdown ms").isLessThan(5000);
		assertNativeObjectsClosed(open, "the application closed");
	}

	private static String read(Path log) {
		try {
			return Files.readString(log, StandardCharsets.UTF_8).trim();
		}
		catch (IOException ex) {
			return "(" + ex + ")";
		}
	}

}
