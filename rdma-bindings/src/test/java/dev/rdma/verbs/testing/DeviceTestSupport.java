package dev.rdma.verbs.testing;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;

import dev.rdma.verbs.CompletionQueue;
import dev.rdma.verbs.Context;
import dev.rdma.verbs.Device;
import dev.rdma.verbs.DeviceList;
import dev.rdma.verbs.Rdma;
import dev.rdma.verbs.WorkCompletionBuffer;
import dev.rdma.verbs.WorkCompletionSnapshot;

/**
 * Helpers of the device tier (tests tagged {@code device}): they fail, never skip, when
 * no device is present.
 */
public final class DeviceTestSupport {

	/** The tag of tests that need a real RDMA device. */
	public static final String TAG = "device";

	private DeviceTestSupport() {
	}

	/**
	 * The name of the device the tests use: {@code $RDMA_TEST_DEVICE}, else the first
	 * listed. Fails if none.
	 */
	public static String deviceName() {
		String wanted = System.getenv("RDMA_TEST_DEVICE");
		try (DeviceList list = DeviceList.open()) {
			if (list.devices().isEmpty()) {
				throw new AssertionError("device tests need an RDMA device and none was found "
						+ "(run them through scripts/test, which boots a Soft-RoCE VM when the host has none)");
			}
			if (wanted != null && !wanted.isBlank()) {
				return list.byName(wanted)
					.map(Device::name)
					.orElseThrow(() -> new AssertionError("RDMA_TEST_DEVICE=" + wanted + " not found"));
			}
			return list.devices().getFirst().name();
		}
	}

	/**
	 * Whether this machine has an RDMA device (the host tests that need none assume it
	 * has none).
	 */
	public static boolean hostHasDevice() {
		if (!Rdma.isAvailable()) {
			return false;
		}
		try (DeviceList list = DeviceList.open()) {
			return !list.devices().isEmpty();
		}
	}

	public static Context openContext() {
		return Context.open(deviceName());
	}

	/** Waits until {@code condition} holds, failing after {@code timeout}. */
	public static void await(Duration timeout, BooleanSupplier condition, String what) {
		long deadline = System.nanoTime() + timeout.toNanos();
		while (!condition.getAsBoolean()) {
			if (System.nanoTime() > deadline) {
				throw new AssertionError("timed out after " + timeout + " waiting for " + what);
			}
			Thread.onSpinWait();
			try {
				Thread.sleep(1);
			}
			catch (InterruptedException e) {
				Thread.currentThread().interrupt();
				throw new AssertionError(e);
			}
		}
	}

	/**
	 * Polls {@code cq} into {@code buffer} until {@code n} completions arrived (copied,
	 * in the order they came), failing after {@code timeout}.
	 */
	public static List<WorkCompletionSnapshot> completions(CompletionQueue cq, WorkCompletionBuffer buffer, int n,
			Duration timeout, String what) {
		List<WorkCompletionSnapshot> out = new ArrayList<>();
		await(timeout, () -> {
			cq.poll(buffer, wc -> out.add(wc.copy()));
			return out.size() >= n;
		}, what);
		return out;
	}

	/**
	 * Checks {@code condition} every 20 ms until it holds; fails ("not within
	 * {@code timeout}: {@code what}") once {@code timeout} has passed.
	 */
	public static void within(Duration timeout, String what, BooleanSupplier condition) throws InterruptedException {
		long deadline = System.nanoTime() + timeout.toNanos();
		while (!condition.getAsBoolean()) {
			if (System.nanoTime() - deadline > 0) {
				throw new AssertionError("not within " + timeout + ": " + what);
			}
			Thread.sleep(20);
		}
	}

	/**
	 * What {@code call} threw, when it is a {@code type}; fails when it returned normally
	 * (another exception propagates).
	 */
	public static <T extends RuntimeException> T thrown(Class<T> type, Runnable call) {
		try {
			call.run();
		}
		catch (RuntimeException e) {
			if (type.isInstance(e)) {
				return type.cast(e);
			}
			throw e;
		}
		throw new AssertionError("expected a " + type.getSimpleName());
	}

	/** A random port for the listeners of one test (20000 to 39999). */
	public static int randomPort() {
		return 20000 + ThreadLocalRandom.current().nextInt(20000);
	}

	/**
	 * Runs {@code command} (an administration step such as {@code ip neigh flush}),
	 * failing unless it exits 0 within {@code seconds}; returns its output.
	 */
	public static String run(long seconds, String... command) throws IOException, InterruptedException {
		Process p = new ProcessBuilder(List.of(command)).redirectErrorStream(true).start();
		if (!p.waitFor(seconds, TimeUnit.SECONDS)) {
			p.destroyForcibly();
			throw new AssertionError(String.join(" ", command) + " did not finish within " + seconds + " s");
		}
		String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
		if (p.exitValue() != 0) {
			throw new AssertionError(String.join(" ", command) + " exited " + p.exitValue() + ": " + out);
		}
		return out;
	}

}
