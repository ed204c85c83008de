package dev.rdma.verbs.testing;

import java.time.Duration;
import java.util.function.BooleanSupplier;

import dev.rdma.verbs.Context;
import dev.rdma.verbs.Device;
import dev.rdma.verbs.DeviceList;

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

}
