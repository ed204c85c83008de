package dev.rdma.verbs.testing;

import dev.rdma.verbs.Context;
import dev.rdma.verbs.Gid;
import dev.rdma.verbs.LoopbackQueuePair;
import dev.rdma.verbs.NativeObjects;
import org.junit.jupiter.api.extension.AfterAllCallback;
import org.junit.jupiter.api.extension.BeforeAllCallback;
import org.junit.jupiter.api.extension.ExtensionContext;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The device context of a test class
 * ({@code @RegisterExtension static final DeviceContext device = new DeviceContext();}):
 * opened before the class's {@code @BeforeAll} methods, closed (twice: close() is
 * idempotent) after its {@code @AfterAll} methods, and then every native object the class
 * created must be closed ({@link NativeObjects} back to its count before).
 */
public final class DeviceContext implements BeforeAllCallback, AfterAllCallback {

	private long openBefore;

	private Context context;

	private int gidIndex = -1;

	private Gid gid;

	@Override
	public void beforeAll(ExtensionContext extension) {
		openBefore = NativeObjects.open();
		context = DeviceTestSupport.openContext();
	}

	@Override
	public void afterAll(ExtensionContext extension) {
		context.close();
		context.close();
		assertThat(NativeObjects.open()).as("native objects left open: " + NativeObjects.openByType())
			.isEqualTo(openBefore);
	}

	/** Closes the context and opens a new one (a test that cannot trust its state). */
	public void reopen() {
		context.close();
		gidIndex = -1;
		context = DeviceTestSupport.openContext();
	}

	/**
	 * The index of the context's IPv4-mapped GID on {@link LoopbackQueuePair#PORT} (the
	 * GID through which a device test's queue pairs reach the device itself); fails when
	 * there is none.
	 */
	public int gidIndex() {
		if (gidIndex < 0) {
			int index = context.findIpv4GidIndex(LoopbackQueuePair.PORT);
			assertThat(index).as("an IPv4-mapped GID on %s port %d", context.deviceName(), LoopbackQueuePair.PORT)
				.isNotNegative();
			gid = context.queryGid(LoopbackQueuePair.PORT, index);
			gidIndex = index;
		}
		return gidIndex;
	}

	/** The GID of {@link #gidIndex()}. */
	public Gid gid() {
		gidIndex();
		return gid;
	}

	/** The open context (between beforeAll and afterAll). */
	public Context context() {
		return context;
	}

}
