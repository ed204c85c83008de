package dev.rdma.verbs;

import java.io.File;
import java.io.FileInputStream;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import dev.rdma.verbs.testing.DeviceTestSupport;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * {@link Context#open(String)} when the process runs out of file descriptors part way:
 * the soft RLIMIT_NOFILE is lowered (for a few milliseconds, restored in any case) so
 * that only 0, 1, 2, ... descriptors are free, until the open succeeds. Every failed open
 * names its verb and EMFILE and leaves no descriptor open: the context needs the device's
 * command fd, its async fd and the eventfd of its async waker, and an eventfd that failed
 * after {@code ibv_open_device} succeeded leaked the first two.
 * <p>
 * The opens run in a JVM of their own ({@link Probe}): with no descriptor free, a class
 * that the JVM loads for the first time cannot be read either, and the JVM remembers that
 * {@link NoClassDefFoundError} for good. In the device tests' shared JVM the first run
 * loaded {@link Errno} for the first time inside the window, and every later test that
 * needed it failed.
 */
@Tag(DeviceTestSupport.TAG)
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class ContextOpenDeviceTest {

	@Test
	void anOpenThatRunsOutOfFileDescriptorsLeavesNoneOpen() throws Exception {
		String classPath = location(Context.class) + File.pathSeparator + location(Probe.class);
		List<String> command = new ArrayList<>();
		command.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
		// this JVM's -XX flags: in the Soft-RoCE VM the emulator's (C1 only: the probe's
		// start costs half) and the crash-log path the VM checks, not the lane's AOT
		// cache
		ProcessHandle.current()
			.info()
			.arguments()
			.stream()
			.flatMap(Arrays::stream)
			.filter(a -> a.startsWith("-XX:") && !a.startsWith("-XX:AOT"))
			.forEach(command::add);
		command.addAll(List.of("--enable-native-access=ALL-UNNAMED", "-cp", classPath, Probe.class.getName(),
				DeviceTestSupport.deviceName()));
		Process probe = new ProcessBuilder(command).redirectErrorStream(true).start();
		CompletableFuture<String> output = CompletableFuture.supplyAsync(() -> {
			try {
				return new String(probe.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
			}
			catch (IOException ex) {
				return "[output: " + ex + "]";
			}
		}, runnable -> Thread.ofPlatform().daemon().start(runnable));
		if (!probe.waitFor(90, TimeUnit.SECONDS)) {
			probe.destroyForcibly();
			throw new AssertionError("the probe JVM did not end within 90 s");
		}
		String out = output.get(10, TimeUnit.SECONDS);
		System.out.print(out);
		assertThat(probe.exitValue()).as("probe exit status; output:%n%s", out).isZero();
		List<String> failures = out.lines().filter(l -> l.startsWith("failed ")).toList();
		assertThat(failures).as("opens that ran out of descriptors; output:%n%s", out)
			.isNotEmpty()
			.allSatisfy(l -> assertThat(l).contains("EMFILE"));
		assertThat(out).as("descriptors left open by a failed open").doesNotContain("leaked ");
		assertThat(out.lines()).as("an open with enough descriptors").contains("opened");
	}

	private static String location(Class<?> type) throws Exception {
		return Path.of(type.getProtectionDomain().getCodeSource().getLocation().toURI()).toString();
	}

	/**
	 * The opens, in a JVM of their own. Prints {@code failed <free>: <message>} for each
	 * open that failed, {@code leaked <free>: <fds>} when a failed open left descriptors
	 * open, {@code opened} once an open succeeded; exits with 1 on anything unexpected.
	 */
	static final class Probe {

		private static final int RLIMIT_NOFILE = 7;

		private static final Linker LINKER = Linker.nativeLinker();

		private static final MethodHandle GETRLIMIT = LINKER.downcallHandle(
				LINKER.defaultLookup().find("getrlimit").orElseThrow(),
				FunctionDescriptor.of(JAVA_INT, JAVA_INT, ADDRESS));

		private static final MethodHandle SETRLIMIT = LINKER.downcallHandle(
				LINKER.defaultLookup().find("setrlimit").orElseThrow(),
				FunctionDescriptor.of(JAVA_INT, JAVA_INT, ADDRESS));

		public static void main(String[] args) throws Throwable {
			String name = args[0];
			// provider loaded, classes of the open and of its failure initialised
			Context.open(name).close();
			String warm = new VerbsException("eventfd", Errno.EMFILE, "warm-up").getMessage();
			if (!warm.contains("EMFILE")) {
				throw new AssertionError(warm);
			}
			try (Arena arena = Arena.ofConfined()) {
				MemorySegment saved = arena.allocate(16);
				MemorySegment lowered = arena.allocate(16);
				check((int) GETRLIMIT.invokeExact(RLIMIT_NOFILE, saved) == 0, "getrlimit");
				boolean opened = false;
				for (int free = 0; free <= 8 && !opened; free++) {
					Set<Integer> before = openFds();
					int max = before.stream().mapToInt(Integer::intValue).max().orElseThrow();
					List<FileInputStream> fillers = new ArrayList<>();
					for (int fd = 0; fd < max; fd++) {
						if (!before.contains(fd)) {
							fillers.add(new FileInputStream("/dev/null")); // fills a hole
						}
					}
					lowered.set(JAVA_LONG, 0, max + 1 + free);
					lowered.set(JAVA_LONG, 8, saved.get(JAVA_LONG, 8));
					Context context = null;
					VerbsException failure = null;
					check((int) SETRLIMIT.invokeExact(RLIMIT_NOFILE, lowered) == 0, "setrlimit");
					try {
						context = Context.open(name);
					}
					catch (VerbsException e) {
						failure = e;
					}
					finally {
						check((int) SETRLIMIT.invokeExact(RLIMIT_NOFILE, saved) == 0, "setrlimit (restore)");
						for (FileInputStream f : fillers) {
							f.close();
						}
					}
					if (context != null) {
						context.close();
						opened = true;
						System.out.println("opened");
					}
					else {
						System.out.println("failed " + free + ": " + failure.getMessage());
						Set<Integer> leaked = openFds();
						leaked.removeAll(before);
						if (!leaked.isEmpty()) {
							System.out.println("leaked " + free + ": " + leaked);
						}
					}
				}
			}
		}

		private static void check(boolean ok, String what) {
			if (!ok) {
				System.out.println(what + " failed");
				System.exit(1);
			}
		}

		private static Set<Integer> openFds() throws IOException {
			Set<Integer> fds = new TreeSet<>();
			String[] names = new File("/proc/self/fd").list();
			if (names == null) {
				throw new IOException("cannot list /proc/self/fd");
			}
			for (String n : names) {
				fds.add(Integer.parseInt(n));
			}
			return fds;
		}

	}

}
