package dev.rdma.spring.boot.autoconfigure.connection;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;

import io.micrometer.core.instrument.MeterRegistry;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.api.Timeout;

import dev.rdma.spring.connection.RdmaConnection;
import dev.rdma.spring.connection.ReadBatch;
import dev.rdma.spring.connection.ReadStream;
import dev.rdma.spring.connection.SendBuffer;
import dev.rdma.verbs.NativeObjects;
import dev.rdma.verbs.testing.DeviceTestSupport;
import dev.rdma.verbs.testing.TwoDeviceTest;
import dev.rdma.verbs.testing.TwoDevices;

import static dev.rdma.spring.boot.autoconfigure.connection.ConnectionTestSupport.await;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * One-sided operations of the starter's connections across the two devices: with
 * {@code remote-access-size} set, each side registers a region and advertises it in its
 * connect / accept private data; RDMA WRITE and READ then reach the peer's region (in
 * chunks of {@code message-size}, 1024 bytes here), "write, then send" notifies the peer,
 * and the bounds of the peer's region are enforced before anything is posted. The client
 * signals one WRITE in four ({@code signal-interval: 4}, issue 33): exactly one send
 * completion per four WRITEs, every WRITE counted as written; a borrowed
 * {@link SendBuffer} is written without a copy; a long read's chunks and a
 * {@link ReadBatch}'s READs go out as one chain (one {@code ibv_post_send}).
 */
@Tag(DeviceTestSupport.TAG)
@Timeout(value = 180, unit = TimeUnit.SECONDS)
class RemoteAccessDeviceTest {

	@RegisterExtension
	final TwoDeviceTest tier = new TwoDeviceTest();

	private static final int REGION = 64 * 1024;

	@Test
	void writesAndReadsReachThePeersRegionAcrossTheTwoDevices() throws Exception {
		TwoDevices two = tier.two();
		int port = tier.port();
		try (AppPair apps = AppPair.start(two, port, List.of("remote-access-size=64KB"),
				List.of("remote-access-size=64KB", "signal-interval=4")); Arena arena = Arena.ofConfined()) {
			RdmaConnection link = apps.link;
			RdmaConnection serverLink = apps.serverLink;
			ConnectionApps.Collector collector = apps.collector;
			MeterRegistry meters = apps.client.getBean(MeterRegistry.class);
			apps.awaitConnected();
			assertThat(link.deviceName()).isEqualTo(two.a().device());
			assertThat(serverLink.peers().get(0).deviceName()).isEqualTo(two.b().device());

			// each side learnt the other's region from the private data
			assertThat(link.remoteRegionSize()).isEqualTo(REGION);
			assertThat(serverLink.remoteRegionSize()).isEqualTo(REGION);
			assertThat(link.localRegion().byteSize()).isEqualTo(REGION);
			assertThat(serverLink.localRegion().byteSize()).isEqualTo(REGION);

			TwoDevices.Marks m0 = two.mark();

			// client -> server: 10000 bytes (10 WRITEs of up to 1024), then a message
			byte[] pattern = pattern(10_000, 3);
			link.write(4096, pattern);
			byte[] note = new byte[64];
			ConnectionApps.fill(note, 7, 64);
			link.send(note);
			await("the echo of the note that followed the write", () -> collector.echoes.contains(7L));
			assertThat(bytes(serverLink.localRegion(), 4096, pattern.length)).as("the server's region")
				.isEqualTo(pattern);
			assertThat(bytes(serverLink.localRegion(), 0, 4096)).as("before the written range").containsOnly((byte) 0);

			// server -> client: 9000 bytes from a segment, then a message
			byte[] pattern2 = pattern(9000, 11);
			MemorySegment source = arena.allocate(pattern2.length);
			MemorySegment.copy(pattern2, 0, source, ValueLayout.JAVA_BYTE, 0, pattern2.length);
			serverLink.write(100, source);
			ConnectionApps.fill(note, 1000, 64);
			serverLink.send(note);
			await("the server's note", () -> collector.echoes.contains(1000L));
			assertThat(bytes(link.localRegion(), 100, pattern2.length)).as("the client's region").isEqualTo(pattern2);

			// a READ on the poller thread of the send queue (here a listener: both queues
			// share the poller group's thread) would wait for itself: refused at once
			ConnectionApps.Echo echo = apps.server.getBean(ConnectionApps.Echo.class);
			await("the server's two sends completed (its send queue's poller is known)",
					() -> serverLink.statistics().messagesSent() >= 2);
			echo.readInListener = arena.allocate(16);
			ConnectionApps.fill(note, 8, 64);
			link.send(note);
			await("the echo of the note whose listener tried to read", () -> collector.echoes.contains(8L));
			assertThat(echo.readFailure.get()).isInstanceOf(IllegalStateException.class)
				.asString()
				.contains("the poller of its send queue 'tx'");

			// client reads the server's region back: what it wrote, and what the server
			// application put there itself
			MemorySegment target = arena.allocate(pattern.length);
			long posts0 = link.statistics().sendPosts();
			link.read(4096, target);
			assertThat(target.toArray(ValueLayout.JAVA_BYTE)).as("read back").isEqualTo(pattern);
			assertThat(link.statistics().sendPosts() - posts0).as("the 10 READs of 10000 bytes: one chain")
				.isEqualTo(1);
			byte[] local = pattern(3000, 29);
			MemorySegment.copy(local, 0, serverLink.localRegion(), ValueLayout.JAVA_BYTE, REGION - 3000, 3000);
			MemorySegment tail = arena.allocate(3000);
			link.read(REGION - 3000, tail);
			assertThat(tail.toArray(ValueLayout.JAVA_BYTE)).as("the server's own bytes, up to the region's end")
				.isEqualTo(local);
			// and the server reads the client's region
			MemorySegment target2 = arena.allocate(pattern2.length);
			serverLink.read(100, target2);
			assertThat(target2.toArray(ValueLayout.JAVA_BYTE)).isEqualTo(pattern2);

			// the client signals one WRITE in four (signal-interval 4; the last READ of
			// every chain of READs is signaled, and resets the count): 16 WRITEs give
			// exactly 4 send
			// completions, and the buffers of the 12 unsignaled ones come back with them
			double completions0 = stableSendCompletions(meters);
			long written0 = link.statistics().bytesWritten();
			for (int i = 0; i < 16; i++) {
				link.write(32 * 1024 + i * 1024L, pattern, i * 100, 1024);
			}
			await("the 16 WRITEs counted as written", () -> link.statistics().bytesWritten() == written0 + 16 * 1024);
			await("4 send completions", () -> sendCompletions(meters) == completions0 + 4);
			Thread.sleep(100);
			assertThat(sendCompletions(meters) - completions0).as("send completions of 16 WRITEs, one in 4 signaled")
				.isEqualTo(4);

			// a borrowed send buffer written into the peer's region without a copy;
			// refusals
			// leave it borrowed
			SendBuffer lent = link.borrowSendBuffer();
			MemorySegment.copy(pattern, 5000, lent.segment(), ValueLayout.JAVA_BYTE, 0, 1000);
			assertThatThrownBy(() -> lent.write(REGION - 999, 1000)).isInstanceOf(IllegalArgumentException.class)
				.hasMessageContaining("1000 bytes at offset " + (REGION - 999));
			lent.write(50 * 1024, 1000);
			assertThatThrownBy(() -> lent.write(0, 1)).isInstanceOf(IllegalStateException.class)
				.hasMessageContaining("sent or given back");
			MemorySegment zeroCopied = arena.allocate(1000);
			link.read(50 * 1024, zeroCopied); // after the WRITE: RC executes them in
												// order
			assertThat(zeroCopied.toArray(ValueLayout.JAVA_BYTE)).as("the borrowed buffer's bytes, written")
				.isEqualTo(Arrays.copyOfRange(pattern, 5000, 6000));
			// the READ's completion gave back the unsignaled WRITE before it
			assertThat(link.statistics().bytesWritten()).isEqualTo(written0 + 16 * 1024 + 1000);

			// a batch of 8 READs: one chain, each into its own target
			ReadBatch batch = link.newReadBatch();
			MemorySegment[] pieces = new MemorySegment[8];
			for (int i = 0; i < 8; i++) {
				pieces[i] = arena.allocate(512 + i);
				batch.add(32 * 1024 + i * 1024L + i, pieces[i]);
			}
			assertThat(batch.size()).isEqualTo(8);
			long posts1 = link.statistics().sendPosts();
			long posted1 = link.statistics().sendsPosted();
			long read1 = link.statistics().bytesRead();
			double completions1 = stableSendCompletions(meters);
			batch.read();
			assertThat(batch.size()).as("emptied").isZero();
			assertThat(link.statistics().sendPosts() - posts1).as("the batch's 8 READs: one doorbell").isEqualTo(1);
			assertThat(link.statistics().sendsPosted() - posted1).isEqualTo(8);
			// only the last READ is signaled: its completion completes the 7 before it
			assertThat(stableSendCompletions(meters) - completions1).as("send completions of the batch's 8 READs")
				.isEqualTo(1);
			for (int i = 0; i < 8; i++) {
				byte[] expected = new byte[512 + i];
				System.arraycopy(pattern, i * 100 + i, expected, 0, expected.length);
				assertThat(pieces[i].toArray(ValueLayout.JAVA_BYTE)).as("READ %d of the batch", i).isEqualTo(expected);
			}
			assertThat(link.statistics().bytesRead() - read1).isEqualTo(8 * 512 + 28);
			// an entry outside the peer's region: refused by read(), nothing posted
			batch.add(0, pieces[0]).add(REGION - 100, pieces[1]);
			assertThatThrownBy(batch::read).isInstanceOf(IllegalArgumentException.class)
				.hasMessageContaining("513 bytes at offset " + (REGION - 100));
			assertThat(batch.size()).isZero();
			assertThat(link.statistics().sendPosts() - posts1).isEqualTo(1);
			assertThatThrownBy(() -> batch.add(0, arena.allocate(1025))).isInstanceOf(IllegalArgumentException.class)
				.hasMessageContaining("message-size (1024)");

			// a stream of 40 READs with a window of 8: posted as submitted in groups of 2
			// (window / 4; the first at once), reaped (and copied) in groups of 2 once 8
			// are in flight
			try (ReadStream stream = link.newReadStream(8)) {
				assertThat(stream.window()).isEqualTo(8);
				MemorySegment[] slices = new MemorySegment[40];
				long posted2 = link.statistics().sendsPosted();
				long posts2 = link.statistics().sendPosts();
				long read2 = link.statistics().bytesRead();
				double completions2 = stableSendCompletions(meters);
				for (int i = 0; i < 40; i++) {
					slices[i] = arena.allocate(200);
					long completed = stream.submit(4096 + i * 200L, slices[i]);
					assertThat(completed + stream.inFlight()).as("each READ completed or in flight").isEqualTo(i + 1);
					assertThat(stream.inFlight()).isLessThanOrEqualTo(8);
					if (i < 8) {
						assertThat(completed).as("nothing reaped while the window fills").isZero();
					}
					if (i == 7) {
						// the first, then three groups of 2; the 8th waits for its group
						// (a thread posting at that moment, e.g. a poller's marker, posts
						// them for this one: awaited)
						await("7 of the window's 8 READs posted before any was reaped",
								() -> link.statistics().sendsPosted() - posted2 == 7);
						assertThat(stream.completed()).isZero();
					}
					if (i == 8) {
						assertThat(completed).as("the full window reaped its oldest group").isEqualTo(2);
					}
				}
				assertThat(stream.flush()).isEqualTo(40);
				assertThat(stream.inFlight()).isZero();
				for (int i = 0; i < 40; i++) {
					assertThat(slices[i].toArray(ValueLayout.JAVA_BYTE)).as("READ %d of the stream", i)
						.isEqualTo(Arrays.copyOfRange(pattern, i * 200, i * 200 + 200));
				}
				assertThat(link.statistics().sendsPosted() - posted2).isEqualTo(40);
				assertThat(link.statistics().bytesRead() - read2).isEqualTo(40 * 200);
				// one signaled READ per group posted: the first alone, three of 2 to fill
				// the window, the 8th's alone (posted before the first reap), then 16 of
				// 2 (each posted when its second READ is submitted)
				assertThat(stableSendCompletions(meters) - completions2).as("send completions of the stream's 40 READs")
					.isEqualTo(21);
				assertThat(link.statistics().sendPosts() - posts2).as("doorbells: at most one per group")
					.isLessThanOrEqualTo(21);
				// outside the peer's region: refused, nothing posted
				assertThatThrownBy(() -> stream.submit(REGION - 100, slices[0]))
					.isInstanceOf(IllegalArgumentException.class)
					.hasMessageContaining("200 bytes at offset " + (REGION - 100));
				assertThat(stream.inFlight()).isZero();
				assertThat(link.statistics().sendsPosted() - posted2).isEqualTo(40);
			}
			assertThatThrownBy(() -> link.newReadStream(65)).isInstanceOf(IllegalArgumentException.class)
				.hasMessageContaining("1 to send-depth (64)");

			// out of bounds: refused before anything is posted
			assertThatThrownBy(() -> link.write(REGION - 10, new byte[20])).isInstanceOf(IllegalArgumentException.class)
				.hasMessageContaining("20 bytes at offset " + (REGION - 10))
				.hasMessageContaining("region of " + REGION + " bytes");
			assertThatThrownBy(() -> link.read(-1, target)).isInstanceOf(IllegalArgumentException.class);
			assertThatThrownBy(() -> serverLink.read(REGION, arena.allocate(1)))
				.isInstanceOf(IllegalArgumentException.class);

			// the traffic crossed: 10 WRITEs, 13 READ requests and 9 READ responses from
			// rxeA; 9 WRITEs, 13 READ responses and 9 READ requests from rxeB
			m0.assertCrossed(10);
			TwoDevices.Traffic a = m0.aSince();
			TwoDevices.Traffic b = m0.bSince();
			assertThat(a.sent()).as("rxeA: WRITE and READ request packets").isGreaterThanOrEqualTo(10 + 13);
			assertThat(b.sent()).as("rxeB: WRITE and READ response packets").isGreaterThanOrEqualTo(9 + 13);
			assertThat(b.received()).as("rxeB: WRITE and READ request packets").isGreaterThanOrEqualTo(10 + 13);
			assertThat(a.received()).as("rxeA: WRITE and READ response packets").isGreaterThanOrEqualTo(9 + 13);

			assertThat(link.statistics().bytesWritten()).isEqualTo(10_000 + 16 * 1024 + 1000);
			assertThat(link.statistics().bytesRead()).isEqualTo(13_000 + 1000 + 8 * 512 + 28 + 40 * 200);
			assertThat(link.statistics().sendErrors()).isZero();
			assertThat(serverLink.statistics().bytesWritten()).isEqualTo(9000);
			assertThat(serverLink.statistics().bytesRead()).isEqualTo(9000);
			assertThat(meters.get("rdma.connection.bytes.written").tag("connection", "link").functionCounter().count())
				.isEqualTo(10_000 + 16 * 1024 + 1000);
			assertThat(meters.get("rdma.connection.bytes.read").tag("connection", "link").functionCounter().count())
				.isEqualTo(13_000 + 1000 + 8 * 512 + 28 + 40 * 200);
			// every buffer came back: as many sends as send-depth still go through
			for (int i = 0; i < 64; i++) {
				link.write(0, pattern, 0, 1024);
			}
			await("the last writes completed",
					() -> link.statistics().bytesWritten() == 10_000 + 16 * 1024 + 1000 + 64 * 1024);
		}
	}

	/**
	 * A stream of WRITEs that keeps all 8 send buffers in flight, with one signaled in 64
	 * due: a post that takes the last free buffer is signaled only when no signaled WRITE
	 * is in flight. Two signaled posts are then at least 8 apart (the earlier one's
	 * completion gave back all 8 buffers before the later one emptied the pool again), so
	 * 2,000 WRITEs give at most 251 completions. Signaling every post that found the pool
	 * empty gave 300 here (the sender took the buffers back one by one as the poller
	 * released them), and once per message in a stream of 64 KiB SENDs (bench run 47).
	 */
	@Test
	void aStreamThatKeepsEveryBufferInFlightIsSignaledOncePerRoundOfBuffers() throws Exception {
		TwoDevices two = tier.two();
		try (AppPair apps = AppPair.start(two, tier.port(), List.of("remote-access-size=64KB"),
				List.of("remote-access-size=64KB", "message-size=4096", "send-depth=8", "signal-interval=64"))) {
			RdmaConnection link = apps.link;
			MeterRegistry meters = apps.client.getBean(MeterRegistry.class);
			apps.awaitConnected();
			byte[] pattern = pattern(8192, 13);
			double completions0 = stableSendCompletions(meters);
			int writes = 2000;
			for (int i = 0; i < writes; i++) {
				link.write((i % 16) * 4096L, pattern, (i % 8) * 512, 4096);
			}
			long waited = link.statistics().sendQueueFull();
			await("the WRITEs up to the last signaled one counted",
					() -> link.statistics().bytesWritten() >= (writes - 8) * 4096L);
			double completions = stableSendCompletions(meters) - completions0;
			System.out.println("REMOTE-ACCESS " + writes + " streamed WRITEs of 4 KiB: " + waited
					+ " waited for a buffer, " + (long) completions + " send completions");
			assertThat(waited).as("WRITEs that found all 8 send buffers in flight").isPositive();
			assertThat(completions).as("send completions: signaled posts at least 8 apart")
				.isBetween((double) writes / 64 - 1, (double) writes / 8 + 1);
			assertThat(link.statistics().sendErrors()).isZero();
			// a READ after the WRITEs (RC executes them in order) finds the last one's
			// bytes,
			// and its completion gives back the unsignaled WRITEs before it
			try (Arena arena = Arena.ofConfined()) {
				MemorySegment last = arena.allocate(4096);
				link.read(15 * 4096L, last);
				int from = ((writes - 1) % 8) * 512;
				assertThat(last.toArray(ValueLayout.JAVA_BYTE)).as("the last WRITE, at offset 15 * 4096")
					.isEqualTo(Arrays.copyOfRange(pattern, from, from + 4096));
			}
			assertThat(link.statistics().bytesWritten()).isEqualTo(writes * 4096L);
		}
	}

	@Test
	void aPeerWithoutARegionHasNone() throws Exception {
		TwoDevices two = tier.two();
		int port = tier.port();
		try (AppPair apps = AppPair.start(two, port, List.of(), List.of("remote-access-size=4KB"))) {
			RdmaConnection link = apps.link;
			RdmaConnection serverLink = apps.serverLink;
			ConnectionApps.Collector collector = apps.collector;
			apps.awaitConnected();
			TwoDevices.Marks m0 = two.mark();

			assertThat(link.remoteRegionSize()).as("the server exposes none").isZero();
			assertThat(serverLink.remoteRegionSize()).as("the client's region").isEqualTo(4096);
			assertThatThrownBy(() -> link.write(0, new byte[1])).isInstanceOf(IllegalStateException.class)
				.hasMessageContaining("exposes no region");
			assertThatThrownBy(serverLink::localRegion).isInstanceOf(IllegalStateException.class)
				.hasMessageContaining("remote-access-size is 0");

			byte[] pattern = pattern(4096, 5);
			serverLink.write(0, pattern);
			byte[] note = new byte[64];
			ConnectionApps.fill(note, 42, 64);
			serverLink.send(note);
			await("the server's note", () -> collector.echoes.contains(42L));
			assertThat(bytes(link.localRegion(), 0, 4096)).isEqualTo(pattern);
			TwoDevices.assertCrossed(two.b(), m0.b(), two.a(), m0.a(), 1);
			assertThat(m0.bSince().sent()).as("rxeB: 4 WRITE packets and the note").isGreaterThanOrEqualTo(5);
			assertThat(m0.aSince().received()).as("rxeA: 4 WRITE packets and the note").isGreaterThanOrEqualTo(5);
			assertThat(serverLink.statistics().bytesWritten()).isEqualTo(4096);
		}
	}

	private static double sendCompletions(MeterRegistry meters) {
		return meters.get("rdma.completions").tag("queue", "tx").tag("status", "success").counter().count();
	}

	/** The send completions once nothing is in flight and the meter stopped moving. */
	private static double stableSendCompletions(MeterRegistry meters) throws InterruptedException {
		double last = -1;
		double now = sendCompletions(meters);
		while (now != last) {
			last = now;
			Thread.sleep(200);
			now = sendCompletions(meters);
		}
		return now;
	}

	private static byte[] pattern(int length, int seed) {
		byte[] out = new byte[length];
		for (int i = 0; i < length; i++) {
			out[i] = (byte) (i * seed + (i >> 8) + 1);
		}
		return out;
	}

	private static byte[] bytes(MemorySegment segment, long offset, int length) {
		return segment.asSlice(offset, length).toArray(ValueLayout.JAVA_BYTE);
	}

}
