package dev.rdma.verbs.testing;

import java.time.Duration;

import org.junit.jupiter.api.extension.AfterEachCallback;
import org.junit.jupiter.api.extension.BeforeEachCallback;
import org.junit.jupiter.api.extension.ExtensionContext;

import dev.rdma.verbs.NativeObjects;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * {@code @ExtendWith(NoNativeLeaks.class)}: each test ends with as many native objects
 * open ({@link NativeObjects#open()}) as before it, whatever it created or how it failed.
 * The baseline is taken before the class's own {@code @BeforeEach} methods, the check
 * made after its {@code @AfterEach} methods. A test that checks at a moment of its own
 * takes {@code long baseline = NativeObjects.open()} and calls
 * {@link #assertNativeObjectsClosed} or {@link #awaitNativeObjectsClosed}.
 */
public final class NoNativeLeaks implements BeforeEachCallback, AfterEachCallback {

	private static final ExtensionContext.Namespace NAMESPACE = ExtensionContext.Namespace.create(NoNativeLeaks.class);

	@Override
	public void beforeEach(ExtensionContext context) {
		context.getStore(NAMESPACE).put("open", NativeObjects.open());
	}

	@Override
	public void afterEach(ExtensionContext context) {
		long before = context.getStore(NAMESPACE).get("open", Long.class);
		assertThat(NativeObjects.open()).as("native objects left open: " + NativeObjects.openByType())
			.isEqualTo(before);
	}

	/**
	 * Asserts that as many native objects are open as at {@code baseline} (taken before
	 * the test opened any), {@code when} naming the moment.
	 */
	public static void assertNativeObjectsClosed(long baseline, String when) {
		assertThat(NativeObjects.open()).as("native objects after " + when + ": " + NativeObjects.openByType())
			.isEqualTo(baseline);
	}

	/**
	 * Waits up to {@code timeout} (every 20 ms) until as many native objects are open as
	 * at {@code baseline} (their last closes may run on another thread), then
	 * {@link #assertNativeObjectsClosed asserts it}.
	 */
	public static void awaitNativeObjectsClosed(long baseline, Duration timeout, String when)
			throws InterruptedException {
		long deadline = System.nanoTime() + timeout.toNanos();
		while (NativeObjects.open() != baseline && System.nanoTime() - deadline < 0) {
			Thread.sleep(20);
		}
		assertNativeObjectsClosed(baseline, when);
	}

}
