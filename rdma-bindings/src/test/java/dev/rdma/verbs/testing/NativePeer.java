package dev.rdma.verbs.testing;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

/**
 * A C program (a peer no one here wrote: {@code ibv_rc_pingpong}, {@code rdma_server},
 * ...) run by a device test: stdout and stderr captured together, every wait bounded.
 * {@link #close()} kills it (idempotent), so a test that fails halfway leaves no process
 * behind when it uses try-with-resources.
 */
public final class NativePeer implements AutoCloseable {

	private final List<String> command;

	private final Process process;

	private final StringBuilder output = new StringBuilder();

	private final Thread reader;

	private NativePeer(List<String> command, Process process) {
		this.command = command;
		this.process = process;
		this.reader = Thread.ofPlatform().daemon().name("native-peer-" + process.pid()).start(this::drain);
	}

	/** Starts {@code command} (stdin empty, stdout and stderr merged). */
	public static NativePeer start(String... command) {
		List<String> list = List.of(command);
		try {
			Process process = new ProcessBuilder(list).redirectErrorStream(true)
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
				close();
				throw new AssertionError(
						describe() + " did not exit within " + timeout + "; killed. Output:\n" + output());
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
