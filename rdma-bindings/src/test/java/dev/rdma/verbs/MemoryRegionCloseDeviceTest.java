package dev.rdma.verbs;

import java.nio.ByteBuffer;
import java.nio.channels.Pipe;
import java.util.EnumSet;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

import dev.rdma.verbs.testing.DeviceContext;
import dev.rdma.verbs.testing.DeviceTestSupport;
import dev.rdma.verbs.testing.NoNativeLeaks;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.extension.RegisterExtension;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * {@code MemoryRegion.close()} while another thread's channel read holds the MR's memory
 * (NIO keeps the shared arena acquired for the whole read): {@code ibv_dereg_mr} has
 * succeeded, so the close must not fail and reopen the object - its next close would
 * deregister the freed MR a second time. The memory is freed by a later MR close, once
 * the read has ended.
 */
@Tag(DeviceTestSupport.TAG)
@Timeout(value = 60, unit = TimeUnit.SECONDS)
@ExtendWith(NoNativeLeaks.class)
class MemoryRegionCloseDeviceTest {

	@RegisterExtension
	static final DeviceContext device = new DeviceContext();

	@Test
	void aRegionClosedWhileAChannelReadUsesItsMemoryIsClosedOnceAndFreedLater() throws Exception {
		Pipe pipe = Pipe.open();
		try (ProtectionDomain pd = device.context().allocateProtectionDomain();
				Pipe.SourceChannel source = pipe.source();
				Pipe.SinkChannel sink = pipe.sink()) {
			int deferredBefore = MemoryRegion.deferredArenas();
			MemoryRegion mr = pd.registerMemory(4096, EnumSet.of(MemoryRegion.Access.LOCAL_WRITE));
			ByteBuffer target = mr.buffer().asByteBuffer();
			CountDownLatch reading = new CountDownLatch(1);
			AtomicReference<Object> read = new AtomicReference<>();
			Thread reader = Thread.ofPlatform().name("channel-reader").start(() -> {
				reading.countDown();
				try {
					read.set(source.read(target));
				}
				catch (Throwable t) {
					read.set(t);
				}
			});
			assertThat(reading.await(10, TimeUnit.SECONDS)).isTrue();
			DeviceTestSupport.await(java.time.Duration.ofSeconds(10),
					() -> reader.getState() == Thread.State.RUNNABLE && read.get() == null,
					"the reader blocked in its read");
			Thread.sleep(200);

			mr.close(); // ibv_dereg_mr succeeds; the arena is still held by the read
			assertThat(mr.isClosed()).as("closed although the read holds its memory").isTrue();
			assertThat(MemoryRegion.deferredArenas()).as("its memory waits for the read").isEqualTo(deferredBefore + 1);
			mr.close(); // a no-op: no second ibv_dereg_mr

			sink.write(ByteBuffer.wrap(new byte[] { 1, 2, 3 }));
			reader.join(10_000);
			assertThat(read.get()).as("the read ended normally").isEqualTo(3);

			// the next MR close frees the memory the read held
			pd.registerMemory(4096, EnumSet.of(MemoryRegion.Access.LOCAL_WRITE)).close();
			assertThat(MemoryRegion.deferredArenas()).isEqualTo(deferredBefore);
		}
	}

}
