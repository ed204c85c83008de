package dev.rdma.verbs.testing;

import java.time.Duration;

import dev.rdma.verbs.NativeObjects;
import org.junit.jupiter.api.extension.AfterEachCallback;
import org.junit.jupiter.api.extension.BeforeEachCallback;
import org.junit.jupiter.api.extension.ExtensionContext;

/**
 * The frame of a test on the two-device tier
 * ({@code @RegisterExtension final TwoDeviceTest tier = new TwoDeviceTest();}): before
 * each test, the two devices ({@link TwoDevices#require()}), a random TCP port and the
 * count of open native objects; after it, every native object the test opened must be
 * closed again ({@link NoNativeLeaks#assertNativeObjectsClosed}), whether the test passed
 * or not.
 */
public final class TwoDeviceTest implements BeforeEachCallback, AfterEachCallback {

	private final Duration closeWait;

	private TwoDevices two;

	private int port;

	private long baseline;

	/** Every native object the test opened must be closed when it returns. */
	public TwoDeviceTest() {
		this(Duration.ZERO);
	}

	/**
	 * Every native object the test opened must be closed within {@code closeWait} after
	 * it returns (the last closes may run on another thread).
	 */
	public TwoDeviceTest(Duration closeWait) {
		this.closeWait = closeWait;
	}

	@Override
	public void beforeEach(ExtensionContext extension) {
		two = TwoDevices.require();
		port = DeviceTestSupport.randomPort();
		baseline = NativeObjects.open();
	}

	@Override
	public void afterEach(ExtensionContext extension) throws InterruptedException {
		NoNativeLeaks.awaitNativeObjectsClosed(baseline, closeWait,
				extension.getDisplayName() + " (what it started closed)");
	}

	/**
	 * Waits (up to the close wait) until every native object the test opened so far is
	 * closed, for a test that asserts on what those closes did (their log) before it
	 * returns; afterEach checks again.
	 */
	public void awaitNativeObjectsClosed(String what) throws InterruptedException {
		NoNativeLeaks.awaitNativeObjectsClosed(baseline, closeWait, what);
	}

	/** The two devices of the tier. */
	public TwoDevices two() {
		return two;
	}

	/** A random TCP port for this test. */
	public int port() {
		return port;
	}

}
