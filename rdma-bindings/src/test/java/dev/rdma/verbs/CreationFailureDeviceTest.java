package dev.rdma.verbs;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayDeque;
import java.util.Deque;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Function;
import java.util.stream.Stream;

import dev.rdma.verbs.testing.DeviceTestSupport;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * A create whose Java object cannot be built leaves nothing behind, and a create racing a
 * close of its context never lets the context go first.
 * <ul>
 * <li>Between the create verb and the wrapper's registration with its context, a
 * concurrent {@code Context.close()} used to find neither a call in flight nor the new
 * object, and ran {@code ibv_close_device}; the refused wrapper's
 * {@code ibv_destroy_cq}/{@code ibv_destroy_comp_channel} then read the freed
 * context.</li>
 * <li>A completion channel whose close waker found no descriptor left ({@code eventfd}
 * EMFILE: a service at its {@code nofile} limit) stayed registered with its context half
 * built, and every later {@code Context.close()} failed on it.</li>
 * </ul>
 */
@Tag(DeviceTestSupport.TAG)
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class CreationFailureDeviceTest {

	static Stream<Arguments> creations() {
		Function<Context, NativeObject> channel = Context::createCompletionChannel;
		Function<Context, NativeObject> cq = c -> c.createCompletionQueue(16, null, 0);
		Function<Context, NativeObject> extended = c -> c.createExtendedCompletionQueue(CqInitAttributes.of(16));
		return Stream.of(Arguments.of("completion channel", channel), Arguments.of("CQ", cq),
				Arguments.of("extended CQ", extended));
	}

	/**
	 * The context's close starts in the window between the create verb and the wrapper
	 * ({@link NativeObject#beforeAdoptForTests}): it must wait for the create, which then
	 * finds the context closing, destroys what it created and throws; then the close
	 * ends.
	 */
	@ParameterizedTest(name = "{0}")
	@MethodSource("creations")
	void aCloseOfTheContextDuringACreateWaitsForIt(String what, Function<Context, NativeObject> create)
			throws Exception {
		long before = NativeObjects.open();
		Context context = DeviceTestSupport.openContext();
		Thread creator = Thread.currentThread();
		AtomicReference<Throwable> closeFailure = new AtomicReference<>();
		AtomicReference<Thread> closer = new AtomicReference<>();
		NativeObject.beforeAdoptForTests = () -> {
			if (Thread.currentThread() != creator || closer.get() != null) {
				return;
			}
			Thread t = Thread.ofPlatform().name("context-closer").start(() -> {
				try {
					context.close();
				}
				catch (Throwable e) {
					closeFailure.set(e);
				}
			});
			closer.set(t);
			DeviceTestSupport.await(java.time.Duration.ofSeconds(10), context::closing, "the close to begin");
			try {
				// the close must wait for the create, which holds the context
				if (t.join(java.time.Duration.ofMillis(500))) {
					throw new AssertionError(
							"the context closed while its " + what + " was between its create verb and its wrapper");
				}
			}
			catch (InterruptedException e) {
				Thread.currentThread().interrupt();
				throw new AssertionError(e);
			}
		};
		try {
			assertThatThrownBy(() -> create.apply(context)).isInstanceOf(IllegalStateException.class)
				.hasMessageContaining("is closed");
		}
		finally {
			NativeObject.beforeAdoptForTests = null;
		}
		assertThat(closer.get()).as("the close ran in the create's window").isNotNull();
		assertThat(closer.get().join(java.time.Duration.ofSeconds(30))).as("the close ended").isTrue();
		assertThat(closeFailure.get()).as("the close's failure").isNull();
		assertThat(context.isClosed()).isTrue();
		assertThat(NativeObjects.open()).as("native objects left open: " + NativeObjects.openByType())
			.isEqualTo(before);
	}

	/**
	 * One descriptor left: {@code ibv_create_comp_channel} takes it, the channel's close
	 * waker ({@code eventfd}) finds none. The create fails naming {@code eventfd} and
	 * EMFILE, the half-built channel is forgotten and destroyed, and the context still
	 * creates channels and closes.
	 */
	@Test
	void aChannelWithoutADescriptorForItsWakerIsForgottenAndTheContextStillCloses() throws Throwable {
		long before = NativeObjects.open();
		Context context = DeviceTestSupport.openContext();
		try {
			// load what the failure uses before the process runs out of descriptors
			context.createCompletionChannel().close();
			assertThat(new VerbsException("eventfd", Errno.EMFILE, "a waker").errnoName()).isEqualTo("EMFILE");
			VerbsException failure = createAtTheDescriptorLimit(context);
			assertThat(failure.verb()).isEqualTo("eventfd");
			assertThat(failure.errno()).isEqualTo(Errno.EMFILE);
			assertThat(context.completionChannels()).as("channels of the context").isEmpty();
			context.createCompletionChannel().close();
		}
		finally {
			context.close();
		}
		assertThat(context.isClosed()).isTrue();
		assertThat(NativeObjects.open()).as("native objects left open: " + NativeObjects.openByType())
			.isEqualTo(before);
	}

	private static final Linker LINKER = Linker.nativeLinker();

	private static final MethodHandle GETRLIMIT = libc("getrlimit", FunctionDescriptor.of(JAVA_INT, JAVA_INT, ADDRESS));

	private static final MethodHandle SETRLIMIT = libc("setrlimit", FunctionDescriptor.of(JAVA_INT, JAVA_INT, ADDRESS));

	private static final MethodHandle DUP = libc("dup", FunctionDescriptor.of(JAVA_INT, JAVA_INT));

	private static final MethodHandle CLOSE = libc("close", FunctionDescriptor.of(JAVA_INT, JAVA_INT));

	private static final int RLIMIT_NOFILE = 7;

	private static MethodHandle libc(String name, FunctionDescriptor descriptor) {
		return LINKER.downcallHandle(LINKER.defaultLookup().find(name).orElseThrow(), descriptor);
	}

	/**
	 * Lowers the soft {@code RLIMIT_NOFILE} just above the highest open descriptor, fills
	 * every free one with {@code dup}, frees exactly one and creates a channel; the limit
	 * and the descriptors are restored before this returns. Another thread of the JVM may
	 * take or free a descriptor meanwhile: then the verb, not the waker, fails (one more
	 * is freed) or the channel is created (it is closed and the process filled again), at
	 * most eight times.
	 */
	private static VerbsException createAtTheDescriptorLimit(Context context) throws Throwable {
		try (Arena arena = Arena.ofConfined()) {
			MemorySegment saved = arena.allocate(JAVA_LONG, 2);
			assertThat((int) GETRLIMIT.invokeExact(RLIMIT_NOFILE, saved)).isZero();
			MemorySegment lowered = arena.allocate(JAVA_LONG, 2);
			lowered.set(JAVA_LONG, 0, highestOpenDescriptor() + 16);
			lowered.set(JAVA_LONG, 8, saved.get(JAVA_LONG, 8));
			Deque<Integer> filler = new ArrayDeque<>();
			String outcomes = "";
			assertThat((int) SETRLIMIT.invokeExact(RLIMIT_NOFILE, lowered)).isZero();
			try {
				for (int attempt = 0; attempt < 8; attempt++) {
					fill(filler);
					assertThat(filler).as("descriptors filled below the lowered limit").isNotEmpty();
					int ignored = (int) CLOSE.invokeExact((int) filler.pop());
					try {
						context.createCompletionChannel().close();
						outcomes += " created;";
					}
					catch (VerbsException e) {
						if (e.verb().equals("eventfd")) {
							return e;
						}
						outcomes += " " + e.getMessage() + ";";
					}
				}
			}
			finally {
				int restored = (int) SETRLIMIT.invokeExact(RLIMIT_NOFILE, saved);
				while (!filler.isEmpty()) {
					int ignored = (int) CLOSE.invokeExact((int) filler.pop());
				}
				assertThat(restored).isZero();
			}
			throw new AssertionError("no create reached the waker's eventfd in 8 attempts:" + outcomes);
		}
	}

	/** dup(2) of stderr until the process has no descriptor left. */
	private static void fill(Deque<Integer> filler) throws Throwable {
		for (int fd = (int) DUP.invokeExact(2); fd >= 0; fd = (int) DUP.invokeExact(2)) {
			filler.push(fd);
		}
	}

	private static long highestOpenDescriptor() throws IOException {
		try (Stream<Path> fds = Files.list(Path.of("/proc/self/fd"))) {
			return fds.mapToLong(p -> Long.parseLong(p.getFileName().toString())).max().orElseThrow();
		}
	}

}
