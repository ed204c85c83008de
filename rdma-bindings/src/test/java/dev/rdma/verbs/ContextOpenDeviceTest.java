package dev.rdma.verbs;

import java.io.FileInputStream;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
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
 */
@Tag(DeviceTestSupport.TAG)
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class ContextOpenDeviceTest {

	private static final int RLIMIT_NOFILE = 7;

	private static final Linker LINKER = Linker.nativeLinker();

	private static final MethodHandle GETRLIMIT = LINKER.downcallHandle(
			LINKER.defaultLookup().find("getrlimit").orElseThrow(), FunctionDescriptor.of(JAVA_INT, JAVA_INT, ADDRESS));

	private static final MethodHandle SETRLIMIT = LINKER.downcallHandle(
			LINKER.defaultLookup().find("setrlimit").orElseThrow(), FunctionDescriptor.of(JAVA_INT, JAVA_INT, ADDRESS));

	@Test
	void anOpenThatRunsOutOfFileDescriptorsLeavesNoneOpen() throws Throwable {
		String name = DeviceTestSupport.deviceName();
		Context.open(name).close(); // provider loaded, classes initialised
		try (Arena arena = Arena.ofConfined()) {
			MemorySegment saved = arena.allocate(16);
			MemorySegment lowered = arena.allocate(16);
			assertThat((int) GETRLIMIT.invokeExact(RLIMIT_NOFILE, saved)).isZero();
			List<String> failures = new ArrayList<>();
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
				assertThat((int) SETRLIMIT.invokeExact(RLIMIT_NOFILE, lowered)).isZero();
				try {
					context = Context.open(name);
				}
				catch (VerbsException e) {
					failure = e;
				}
				finally {
					assertThat((int) SETRLIMIT.invokeExact(RLIMIT_NOFILE, saved)).isZero();
					for (FileInputStream f : fillers) {
						f.close();
					}
				}
				if (context != null) {
					context.close();
					opened = true;
				}
				else {
					failures.add(free + " free: " + failure.getMessage());
					assertThat(failure.getMessage()).contains("EMFILE");
					Set<Integer> leaked = openFds();
					leaked.removeAll(before);
					assertThat(leaked)
						.as("descriptors left open by a failed open with %d free: %s", free, failure.getMessage())
						.isEmpty();
				}
			}
			System.out.println("Context.open with few free descriptors: " + failures + ", then opened: " + opened);
			assertThat(failures).as("opens that ran out of descriptors").isNotEmpty();
			assertThat(opened).as("an open with enough descriptors").isTrue();
		}
	}

	private static Set<Integer> openFds() throws IOException {
		Set<Integer> fds = new TreeSet<>();
		String[] names = new java.io.File("/proc/self/fd").list();
		if (names == null) {
			throw new IOException("cannot list /proc/self/fd");
		}
		for (String n : names) {
			fds.add(Integer.parseInt(n));
		}
		return fds;
	}

}
