package dev.rdma.verbs.testing;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * A C program (a peer no one here wrote: {@code ibv_rc_pingpong}, {@code rdma_server},
 * ...) run by a device test: stdout and stderr captured together, every wait bounded.
 * {@link #close()} kills it (idempotent), so a test that fails halfway leaves no process
 * behind when it uses try-with-resources.
 * <p>
 * The program runs under {@code stdbuf -oL} where coreutils' {@code stdbuf} exists, so
 * its stdout reaches the test line by line (a pipe would hold it until exit, and a peer
 * killed for hanging would show nothing). A peer that does not exit within its bound is
 * described before it is killed: the kernel's view of every peer still running (state,
 * wait channel, kernel stack), their output so far, the rdma_cm ids and the neighbour
 * table.
 */
public final class NativePeer implements AutoCloseable {

	private static final Path STDBUF = Path.of("/usr/bin/stdbuf");

	/** The peers started and not yet closed, described together when one hangs. */
	private static final Set<NativePeer> LIVE = ConcurrentHashMap.newKeySet();

	private final List<String> command;

	private final Process process;

	private final StringBuilder output = new StringBuilder();

	private final Thread reader;

	private NativePeer(List<String> command, Process process) {
		this.command = command;
		this.process = process;
		this.reader = Thread.ofPlatform().daemon().name("native-peer-" + process.pid()).start(this::drain);
		LIVE.add(this);
	}

	/** Starts {@code command} (stdin empty, stdout and stderr merged). */
	public static NativePeer start(String... command) {
		List<String> list = List.of(command);
		List<String> run = new ArrayList<>();
		if (Files.isExecutable(STDBUF)) {
			run.addAll(List.of(STDBUF.toString(), "-oL"));
		}
		run.addAll(list);
		try {
			Process process = new ProcessBuilder(run).redirectErrorStream(true)
				.redirectInput(ProcessBuilder.Redirect.from(new java.io.File("/dev/null")))
				.start();
			return new NativePeer(list, process);
		}
		catch (IOException ex) {
			throw new UncheckedIOException("cannot start " + String.join(" ", list), ex);
		}
	}

	private void drain() {
		byte[] buffer = new byte[4096];
		try (InputStream in = process.getInputStream()) {
			int n;
			while ((n = in.read(buffer)) >= 0) {
				String chunk = new String(buffer, 0, n, StandardCharsets.UTF_8);
				synchronized (output) {
					output.append(chunk);
					output.notifyAll();
				}
			}
		}
		catch (IOException ex) {
			synchronized (output) {
				output.append("\n[output read failed: ").append(ex).append("]\n");
			}
		}
		finally {
			synchronized (output) {
				output.notifyAll();
			}
		}
	}

	/** Everything the program wrote so far (stdout and stderr, interleaved). */
	public String output() {
		synchronized (output) {
			return output.toString();
		}
	}

	/**
	 * Waits for the program to exit and returns its exit status; on timeout kills it and
	 * fails with its output.
	 */
	public int awaitExit(Duration timeout) {
		try {
			if (!process.waitFor(timeout.toNanos(), TimeUnit.NANOSECONDS)) {
				String diagnosis = diagnose();
				close();
				throw new AssertionError(describe() + " did not exit within " + timeout + "; killed. Output:\n"
						+ output() + "\n" + diagnosis);
			}
			// the output is complete once the reader saw end of file
			reader.join(Duration.ofSeconds(10));
			return process.exitValue();
		}
		catch (InterruptedException ex) {
			Thread.currentThread().interrupt();
			close();
			throw new AssertionError("interrupted waiting for " + describe(), ex);
		}
	}

	/**
	 * Waits up to {@code timeout} for the program to exit ({@link #awaitExit}) and
	 * asserts that its exit status is 0, the failure naming {@code who} and showing the
	 * output.
	 */
	public void assertExitsZero(Duration timeout, String who) {
		int status = awaitExit(timeout);
		assertThat(status).as("%s exit status; output:%n%s", who, output()).isZero();
	}

	/**
	 * Starts rdma-core's {@code ibv_rc_pingpong} with completion events ({@code -e}) on
	 * {@code device} (its name and GID index), {@code iterations} round trips, TCP port
	 * {@code port}: the server, or with {@code server} (its address) the client.
	 */
	public static NativePeer ibvRcPingpong(TwoDevices.Peer device, int iterations, int port, String... server) {
		List<String> command = new ArrayList<>(
				List.of("ibv_rc_pingpong", "-d", device.device(), "-g", Integer.toString(device.gidIndex()), "-e", "-n",
						Integer.toString(iterations), "-p", Integer.toString(port)));
		command.addAll(List.of(server));
		return start(command.toArray(String[]::new));
	}

	/**
	 * Waits until the output contains {@code substring}; fails (with the output) when the
	 * program exits without writing it or {@code timeout} passes first. The program keeps
	 * running on failure until {@link #close()}.
	 */
	public void awaitOutput(String substring, Duration timeout) {
		long deadline = System.nanoTime() + timeout.toNanos();
		synchronized (output) {
			while (output.indexOf(substring) < 0) {
				long left = deadline - System.nanoTime();
				if (left <= 0) {
					throw new AssertionError(describe() + " did not write \"" + substring + "\" within " + timeout
							+ ". Output:\n" + output);
				}
				if (!process.isAlive() && !reader.isAlive()) {
					throw new AssertionError(describe() + " exited (" + process.exitValue() + ") without writing \""
							+ substring + "\". Output:\n" + output);
				}
				try {
					output.wait(Math.max(1, Math.min(TimeUnit.NANOSECONDS.toMillis(left), 100)));
				}
				catch (InterruptedException ex) {
					Thread.currentThread().interrupt();
					throw new AssertionError("interrupted waiting for " + describe(), ex);
				}
			}
		}
	}

	/**
	 * Waits until a TCP socket listens on {@code port} ({@code /proc/net/tcp}, state
	 * {@code 0A}): the moment a client such as {@code ibv_rc_pingpong} may connect to a
	 * server that prints its address before it listens. Fails after {@code timeout}.
	 */
	public static void awaitTcpListening(int port, Duration timeout) {
		String local = String.format(":%04X", port);
		// ibv_rc_pingpong binds the first getaddrinfo(AI_PASSIVE) answer: 0.0.0.0 or ::
		DeviceTestSupport.await(timeout,
				() -> Stream.of("/proc/net/tcp", "/proc/net/tcp6")
					.map(Path::of)
					.filter(Files::exists)
					.flatMap(NativePeer::lines)
					.map(line -> line.trim().split("\\s+"))
					.anyMatch(f -> f.length > 3 && f[1].endsWith(local) && f[3].equals("0A")),
				"a TCP listener on port " + port);
	}

	/**
	 * Waits until an rdma_cm id listens on {@code port} of {@code device} (a
	 * {@code LISTEN} line of {@code rdma resource show cm_id} naming the device and the
	 * port): the moment a client such as {@code rdma_client} may connect. Fails after
	 * {@code timeout}, showing the last listing.
	 */
	public static void awaitRdmaCmListening(String device, int port, Duration timeout) {
		long deadline = System.nanoTime() + timeout.toNanos();
		String last = "";
		while (System.nanoTime() < deadline) {
			try (NativePeer rdma = start("rdma", "resource", "show", "cm_id")) {
				int rc = rdma.awaitExit(Duration.ofSeconds(30));
				last = rdma.output();
				if (rc == 0 && last.lines()
					.anyMatch(l -> l.contains("LISTEN") && l.contains(device + "/") && l.contains(":" + port + " ")
							|| l.contains("LISTEN") && l.contains(device + "/") && l.endsWith(":" + port))) {
					return;
				}
			}
			try {
				Thread.sleep(100);
			}
			catch (InterruptedException ex) {
				Thread.currentThread().interrupt();
				throw new AssertionError(ex);
			}
		}
		throw new AssertionError("no rdma_cm id listened on " + device + " port " + port + " within " + timeout
				+ "; last 'rdma resource show cm_id':\n" + last);
	}

	private static Stream<String> lines(Path file) {
		try {
			return Files.readAllLines(file).stream().skip(1);
		}
		catch (IOException ex) {
			throw new UncheckedIOException("cannot read " + file, ex);
		}
	}

	/**
	 * What the kernel says about every peer still running, and the rdma_cm ids and
	 * neighbours of the moment: read before a hanging peer is killed.
	 */
	private String diagnose() {
		StringBuilder text = new StringBuilder("-- peers still running:\n");
		for (NativePeer peer : LIVE) {
			if (!peer.process.isAlive()) {
				continue;
			}
			text.append(peer.describe()).append('\n');
			for (String task : tasks(peer.process.pid())) {
				String proc = "/proc/" + peer.process.pid() + "/task/" + task + "/";
				text.append("  thread ").append(task).append(": ").append(state(read(proc + "stat"))).append('\n');
				text.append("    wchan: ").append(read(proc + "wchan").strip()).append('\n');
				text.append("    kernel stack:\n").append(read(proc + "stack").indent(6));
			}
			if (peer != this) {
				text.append("  output so far:\n").append(peer.output().indent(4));
			}
		}
		text.append("-- rdma resource show cm_id:\n").append(diagnosticCommand("rdma", "resource", "show", "cm_id"));
		text.append("-- rdma resource show qp:\n").append(diagnosticCommand("rdma", "resource", "show", "qp"));
		text.append("-- ip neigh show:\n").append(diagnosticCommand("ip", "neigh", "show"));
		return text.toString();
	}

	/** {@code pid (comm) state}: the first fields of a {@code stat} line. */
	private static String state(String stat) {
		int end = stat.lastIndexOf(')');
		return end < 0 || end + 2 >= stat.length() ? stat.strip() : stat.substring(0, end + 3);
	}

	private static List<String> tasks(long pid) {
		try (Stream<Path> tasks = Files.list(Path.of("/proc/" + pid + "/task"))) {
			return tasks.map(task -> task.getFileName().toString()).sorted().toList();
		}
		catch (IOException | RuntimeException ex) {
			return List.of();
		}
	}

	private static String read(String file) {
		try {
			return Files.readString(Path.of(file));
		}
		catch (IOException | RuntimeException ex) {
			return "[" + file + ": " + ex + "]\n";
		}
	}

	/** Runs a short command for {@link #diagnose()}, at most 10 s, never failing. */
	private static String diagnosticCommand(String... command) {
		try {
			Process process = new ProcessBuilder(command).redirectErrorStream(true)
				.redirectInput(ProcessBuilder.Redirect.from(new java.io.File("/dev/null")))
				.start();
			if (!process.waitFor(10, TimeUnit.SECONDS)) {
				process.destroyForcibly();
				return "[" + String.join(" ", command) + ": no answer within 10 s]\n";
			}
			return new String(process.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
		}
		catch (IOException ex) {
			return "[" + String.join(" ", command) + ": " + ex + "]\n";
		}
		catch (InterruptedException ex) {
			Thread.currentThread().interrupt();
			return "[" + String.join(" ", command) + ": interrupted]\n";
		}
	}

	/** The program's process id. */
	public long pid() {
		return process.pid();
	}

	/** Whether the program still runs. */
	public boolean isAlive() {
		return process.isAlive();
	}

	private String describe() {
		return "'" + String.join(" ", command) + "' (pid " + process.pid() + ")";
	}

	/** Kills the program (and waits up to 10 s for it to go); idempotent. */
	@Override
	public void close() {
		LIVE.remove(this);
		if (process.isAlive()) {
			process.destroyForcibly();
			try {
				process.waitFor(10, TimeUnit.SECONDS);
			}
			catch (InterruptedException ex) {
				Thread.currentThread().interrupt();
			}
		}
	}

	@Override
	public String toString() {
		return describe();
	}

}
