package dev.rdma.benchmarks.starter;

import java.lang.foreign.MemorySegment;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Map;

import dev.rdma.benchmarks.Progress;
import dev.rdma.benchmarks.ThreadCpu;
import dev.rdma.spring.annotation.RdmaMessageListener;
import dev.rdma.spring.boot.autoconfigure.RdmaAutoConfiguration;
import dev.rdma.spring.connection.ConnectionStatistics;
import dev.rdma.spring.connection.RdmaConnection;
import dev.rdma.spring.connection.RdmaMessage;
import org.springframework.boot.autoconfigure.ImportAutoConfiguration;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Bean;

import static dev.rdma.benchmarks.starter.StarterBench.CLIENT_QUEUE;
import static dev.rdma.benchmarks.starter.StarterBench.CONNECTION;
import static dev.rdma.benchmarks.starter.StarterBench.SERVER_QUEUE;
import static dev.rdma.benchmarks.starter.StarterBench.awaitEstablished;
import static dev.rdma.benchmarks.starter.StarterBench.env;
import static dev.rdma.benchmarks.starter.StarterBench.report;
import static dev.rdma.benchmarks.starter.StarterBench.start;

/**
 * Streaming through one connection of the starter (issue 33, cases {@code xstream},
 * {@code xstream_write}, {@code xstream_read} of {@code scripts/bench}), the Java side of
 * perftest's {@code ib_send_bw}, {@code ib_write_bw} and {@code ib_read_bw}: a server
 * application on device B and a client application on device A in this one JVM,
 * configured through properties only, as {@link XdevStarterPingPong}. The client's main
 * thread streams with a window of messages in flight:
 * <ul>
 * <li>{@code send}: {@link RdmaConnection#send(MemorySegment)} in a loop, the window
 * being the connection's {@code send-depth} send buffers (the call blocks while all are
 * in flight); the server's {@link RdmaMessageListener} counts what arrives, and the rate
 * is what the server received;</li>
 * <li>{@code write}: {@link RdmaConnection#write(long, MemorySegment)} into the server's
 * region ({@code remote-access-size}), slot after slot, the same window;</li>
 * <li>{@code read}: {@link RdmaConnection#read(long, MemorySegment)} blocks until its
 * READ completed, so READERS threads read at once (the window: perftest's {@code -o}
 * outstanding reads); with {@code XSTREAM_READ_BATCH=k} above 1 each reader posts k READs
 * at a time through a {@link dev.rdma.spring.connection.ReadBatch} (one doorbell, awaited
 * together): READERS x k in flight.</li>
 * </ul>
 * For each operation and size: WARMUP seconds of streaming, the JIT's quiet wait, one
 * second more (the pollers saw their idle timeout before the measured windows, see
 * {@link XdevStarterPingPong}), then REPS windows of WINDOW seconds back to back. Per
 * window: messages/s and MB/s (2^20 bytes, as perftest's MB/sec), the process's CPU time
 * per message ({@code OperatingSystemMXBean#getProcessCpuTime}: both applications, all
 * threads), and the bytes allocated per message by the data path's threads: the starter's
 * pollers and the application's streaming threads
 * ({@code com.sun.management.ThreadMXBean#getThreadAllocatedBytes}, read at the window's
 * boundaries; what all threads of the JVM allocated, the compilers' and the watchdog's
 * included, and the starter's control threads' bytes per second are printed beside it).
 * Lines {@code case=xstream_mbps|xstream_rate|xstream_cpu op=.. size=.. impl=java} and
 * {@code case=alloc of=xstream_<op>_<size>}; after each operation the threads' CPU per
 * message ({@code /proc/self/task}).
 *
 * <p>
 * Every message sent must arrive: after each send size the client waits until the server
 * received all it sent (up to 60 s) and fails otherwise; a write or read error fails the
 * run. Devices and addresses: {@code RDMA_DEVICE_A/_B}, {@code RDMA_IP_A/_B}
 * ({@code scripts/softroce-vm --two-devices}); extra properties for both applications in
 * {@code XSTREAM_PROPS} (space-separated {@code key=value}).
 *
 * <pre>XstreamBench OPS(send,write,read) MODE(event|busy) TCP_PORT WARMUP_S WINDOW_S REPS READERS SIZE...</pre>
 */
public final class XstreamBench {

	/** perftest's defaults: {@code -t 128} (tx depth), {@code -r 512} (rx depth). */
	static final int SEND_DEPTH = 128;

	static final int RECEIVE_DEPTH = 512;

	/** The largest size: every message goes out of a buffer of this size. */
	static final int MESSAGE_SIZE = 65536;

	/** The server's region for the writes and reads: 16 slots of the largest size. */
	static final int REGION = 1 << 20;

	/** Posts between two looks at the clock. */
	static final int BATCH = 32;

	private XstreamBench() {
	}

	public static void main(String[] args) throws Exception {
		if (args.length < 8) {
			System.err.println(
					"usage: XstreamBench send,write,read event|busy TCP_PORT WARMUP_S WINDOW_S REPS READERS SIZE...");
			System.exit(2);
		}
		List<String> ops = List.of(args[0].split(","));
		String mode = args[1];
		int port = Integer.parseInt(args[2]);
		double warmup = Double.parseDouble(args[3]);
		double window = Double.parseDouble(args[4]);
		int reps = Integer.parseInt(args[5]);
		int readers = Integer.parseInt(args[6]);
		int[] sizes = Arrays.stream(args, 7, args.length).mapToInt(Integer::parseInt).toArray();
		for (String op : ops) {
			if (!List.of("send", "write", "read").contains(op)) {
				throw new IllegalArgumentException("unknown operation " + op + " (send, write, read)");
			}
		}
		for (int s : sizes) {
			if (s < 1 || s > MESSAGE_SIZE) {
				throw new IllegalArgumentException("size " + s + " not in 1.." + MESSAGE_SIZE);
			}
		}
		String devA = env("RDMA_DEVICE_A");
		String devB = env("RDMA_DEVICE_B");
		String ipA = env("RDMA_IP_A");
		String ipB = env("RDMA_IP_B");
		long boot = System.nanoTime();
		Progress.startWatchdog("xstream", Long.getLong("xstream.stall-seconds", 1200));
		Progress.line("starting the server application on " + devB);
		try (ConfigurableApplicationContext server = start(SinkApp.class,
				properties(devB, SERVER_QUEUE, mode, "listen=" + ipB + ":" + port));
				ConfigurableApplicationContext client = start(SourceApp.class,
						properties(devA, CLIENT_QUEUE, mode, "connect=" + ipB + ":" + port, "source=" + ipA))) {
			Progress.line("both applications started");
			RdmaConnection connection = awaitEstablished(client, ipA + " -> " + ipB + ":" + port);
			Progress.line("connected");
			System.err.printf(Locale.ROOT,
					"XstreamBench: both applications up and connected in %.1f s: "
							+ "%s (%s) -> %s (%s) port %d, %s polling%n",
					(System.nanoTime() - boot) / 1e9, devA, ipA, devB, ipB, port, mode);
			XstreamClient stream = new XstreamClient(connection, server.getBean(Sink.class), readers);
			boolean first = true;
			for (String op : ops) {
				Map<String, String[]> cpuBefore = ThreadCpu.snapshot();
				long messages = 0;
				try {
					for (int size : sizes) {
						// the first operation's first size warms the common code up
						// longer
						messages += stream.measure(op, size, first ? warmup * 4 : warmup, window, reps);
						first = false;
					}
				}
				catch (RuntimeException ex) {
					// the next operation still runs (if the connection survived)
					System.out.println("# xstream Java benchmark failed: " + op + ": " + ex);
					ex.printStackTrace();
					stream.stopReads();
					continue;
				}
				Map<String, String[]> cpuAfter = ThreadCpu.snapshot();
				ThreadCpu.printTop("# xstream " + op + " cpu per message by thread (user+system, all sizes, "
						+ "warm-up included):", cpuBefore, cpuAfter, messages);
			}
			stream.close();
			ConnectionStatistics st = connection.statistics();
			System.out.printf(Locale.ROOT,
					"# xstream Java client: sent %d messages (%d bytes), %d send errors, %d bytes written, "
							+ "%d bytes read, send queue full %d times; server received %d%n",
					st.messagesSent(), st.bytesSent(), st.sendErrors(), st.bytesWritten(), st.bytesRead(),
					st.sendQueueFull(), server.getBean(Sink.class).received);
			if (st.sendErrors() != 0) {
				throw new IllegalStateException(st.sendErrors() + " send errors");
			}
		}
	}

	/** One side: device, channel, one queue for both directions, the connection. */
	static List<String> properties(String device, String queue, String mode, String... endpoint) {
		String c = "rdma.connections." + CONNECTION;
		List<String> p = StarterBench.side(device, queue, mode, SEND_DEPTH + RECEIVE_DEPTH + 4, SEND_DEPTH,
				RECEIVE_DEPTH, MESSAGE_SIZE);
		p.addAll(List.of(c + ".remote-access-size=" + REGION, c + ".send-timeout=30s"));
		// perftest's -o: the READs outstanding on the wire (max_rd_atomic and
		// max_dest_rd_atomic of both sides), not the device's maximum; with rxe's 128 a
		// window of 64 READs lost a third of its responses to retransmission (run 8)
		String outstanding = System.getenv("XSTREAM_OUTSTANDING_READS");
		if (outstanding != null && !outstanding.isBlank()) {
			p.addAll(List.of(c + ".cm.initiator-depth=" + outstanding, c + ".cm.responder-resources=" + outstanding));
		}
		for (String e : endpoint) {
			p.add(c + "." + e);
		}
		String extra = System.getenv("XSTREAM_PROPS");
		if (extra != null && !extra.isBlank()) {
			p.addAll(List.of(extra.trim().split("\\s+")));
		}
		return p;
	}

	// ---------------------------------------------------------------- the applications

	/** The server application: the auto-configuration and the {@link Sink}. */
	@ImportAutoConfiguration(RdmaAutoConfiguration.class)
	static class SinkApp {

		@Bean
		Sink sink() {
			return new Sink();
		}

	}

	/** The client application: the auto-configuration only. */
	@ImportAutoConfiguration(RdmaAutoConfiguration.class)
	static class SourceApp {

	}

	/** Counts the messages and bytes the server receives, on the server's poller. */
	static class Sink {

		volatile long received;

		volatile long bytes;

		@RdmaMessageListener(connection = CONNECTION)
		void onMessage(RdmaMessage message) {
			// one writer (the server's poller): plain increments of volatile fields
			received = received + 1;
			bytes = bytes + message.length();
		}

	}

}
