package dev.rdma.verbs;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The locked-memory limit of this process and what the binding has pinned under it.
 * {@code ibv_reg_mr} (and, on hardware providers, CQ and QP creation) pins pages, which
 * the kernel counts against {@code RLIMIT_MEMLOCK} unless the process has
 * {@code CAP_IPC_LOCK}; past the limit the verb fails with {@code ENOMEM}, which says
 * nothing about locked memory. {@link #explainEnomem} is the text the binding appends to
 * such a failure, so that it names the limit and the fixes.
 *
 * <p>
 * The limit is read from {@code /proc/self/limits} ("Max locked memory", the soft limit
 * in bytes, or unlimited) and the capability from {@code /proc/self/status}
 * ({@code CapEff}, bit 14): both plain reads, no native call. Thread-safe; the pinned
 * count is updated when a memory region is registered or deregistered, never per message.
 */
public final class LockedMemory {

	/** Bit of {@code CAP_IPC_LOCK} in the capability sets. */
	static final int CAP_IPC_LOCK = 14;

	/** The fixes of a too low limit, for the common ways a service runs. */
	public static final String FIXES = "raise the locked-memory limit of the process: docker run --ulimit memlock=-1 "
			+ "(or a byte count), systemd LimitMEMLOCK=infinity in the unit's [Service], '<user> - memlock unlimited' "
			+ "in /etc/security/limits.conf (a login session), Kubernetes: the container runtime's default memlock "
			+ "limit (containerd/CRI-O LimitMEMLOCK, or the RDMA device plugin's) or capability IPC_LOCK "
			+ "(securityContext.capabilities.add); see docs/deployment.md";

	private static final AtomicLong REGISTERED = new AtomicLong();

	private static final long PAGE = 4096;

	private LockedMemory() {
	}

	/**
	 * A process's locked-memory limit.
	 *
	 * @param soft the soft {@code RLIMIT_MEMLOCK} in bytes, -1 for unlimited (or unknown:
	 * the files could not be read)
	 * @param hard the hard limit in bytes, -1 for unlimited or unknown
	 * @param ipcLock whether the effective capabilities hold {@code CAP_IPC_LOCK} (no
	 * limit applies then)
	 */
	public record Limit(long soft, long hard, boolean ipcLock) {

		/** No limit: the soft limit is unlimited or the process has CAP_IPC_LOCK. */
		public static final Limit UNLIMITED = new Limit(-1, -1, false);

		/** Whether the kernel lets this process pin any amount. */
		public boolean unlimited() {
			return soft < 0 || ipcLock;
		}

		/** The limit in words, e.g. {@code 65536 bytes (64 KiB, RLIMIT_MEMLOCK)}. */
		public String describe() {
			if (ipcLock) {
				return "unlimited (CAP_IPC_LOCK)";
			}
			return soft < 0 ? "unlimited (RLIMIT_MEMLOCK)" : soft + " bytes (" + bytes(soft) + ", RLIMIT_MEMLOCK)";
		}

	}

	/** The limit of this process, {@link Limit#UNLIMITED} when /proc cannot be read. */
	public static Limit current() {
		try {
			Path uidMap = Path.of("/proc/self/uid_map");
			return parse(Files.readString(Path.of("/proc/self/limits")), Files.readString(Path.of("/proc/self/status")),
					Files.isReadable(uidMap) ? Files.readString(uidMap) : INITIAL_UID_MAP);
		}
		catch (IOException | RuntimeException ex) {
			return Limit.UNLIMITED;
		}
	}

	/** The {@code uid_map} of the initial user namespace: every id mapped to itself. */
	static final String INITIAL_UID_MAP = "0 0 4294967295";

	/**
	 * Parses {@code /proc/<pid>/limits} and {@code /proc/<pid>/status} text, for a
	 * process of the initial user namespace.
	 * @throws IllegalArgumentException when the limits lack a "Max locked memory" line
	 */
	public static Limit parse(String limits, String status) {
		return parse(limits, status, INITIAL_UID_MAP);
	}

	/**
	 * Parses {@code /proc/<pid>/limits}, {@code /proc/<pid>/status} and
	 * {@code /proc/<pid>/uid_map} text. {@code CAP_IPC_LOCK} counts only in the initial
	 * user namespace ({@code uid_map} maps every id to itself): the kernel checks it
	 * there ({@code capable()} in {@code ib_umem_get}), so in a rootless container (a
	 * user namespace of its own) the bit shows in {@code CapEff} and lifts no limit.
	 * @throws IllegalArgumentException when the limits lack a "Max locked memory" line
	 */
	public static Limit parse(String limits, String status, String uidMap) {
		long soft = -2;
		long hard = -2;
		for (String line : limits.lines().toList()) {
			if (line.startsWith("Max locked memory")) {
				String[] fields = line.substring("Max locked memory".length()).trim().split("\\s+");
				soft = value(fields[0]);
				hard = value(fields[1]);
			}
		}
		if (soft == -2) {
			throw new IllegalArgumentException("no 'Max locked memory' line in the limits");
		}
		boolean ipcLock = false;
		for (String line : status.lines().toList()) {
			if (line.startsWith("CapEff:")) {
				long caps = Long.parseUnsignedLong(line.substring("CapEff:".length()).trim(), 16);
				ipcLock = (caps & (1L << CAP_IPC_LOCK)) != 0;
			}
		}
		boolean initialNamespace = String.join(" ", uidMap.trim().split("\\s+")).equals(INITIAL_UID_MAP);
		return new Limit(soft, hard, ipcLock && initialNamespace);
	}

	private static long value(String field) {
		return field.equals("unlimited") ? -1 : Long.parseLong(field);
	}

	/** Bytes the memory regions of this JVM pin now (whole pages), all PDs together. */
	public static long registered() {
		return REGISTERED.get();
	}

	/** What a registration of {@code size} bytes pins: whole pages. */
	public static long pages(long size) {
		return (size + PAGE - 1) / PAGE * PAGE;
	}

	static void added(long size) {
		REGISTERED.addAndGet(pages(size));
	}

	static void removed(long size) {
		REGISTERED.addAndGet(-pages(size));
	}

	/**
	 * The explanation of an {@code ENOMEM} of {@code verb} that asked to pin
	 * {@code bytes} (0: unknown): the limit of this process, what is registered already,
	 * and {@link #FIXES}. When the process has no limit the ENOMEM is real memory
	 * shortage, and the text says so.
	 */
	public static String explainEnomem(String verb, long bytes) {
		return explainEnomem(verb, bytes, current(), registered());
	}

	static String explainEnomem(String verb, long bytes, Limit limit, long registered) {
		String asked = bytes > 0 ? " " + bytes(pages(bytes)) : "";
		if (limit.unlimited()) {
			return verb + " could not pin" + asked + " of memory although locked memory is " + limit.describe() + " ("
					+ bytes(registered) + " registered by this JVM): the host is short of memory";
		}
		return "locked memory: " + verb + " could not pin" + asked + " more; this process may lock " + limit.describe()
				+ " and its memory regions hold " + bytes(registered) + " already; " + FIXES;
	}

	/**
	 * The detail of a failed verb that may pin memory: {@code detail}, followed by
	 * {@link #explainEnomem} when {@code errno} is ENOMEM.
	 */
	static String detail(String verb, int errno, String detail) {
		return errno == Errno.ENOMEM ? detail + "; " + explainEnomem(verb, 0) : detail;
	}

	/** A byte count for people: {@code 8 MiB}, {@code 64 KiB}, {@code 262144 B}. */
	public static String bytes(long n) {
		if (n >= (1L << 30) && n % (1L << 30) == 0) {
			return (n >> 30) + " GiB";
		}
		if (n >= (1L << 20) && n % (1L << 20) == 0) {
			return (n >> 20) + " MiB";
		}
		if (n >= 1024 && n % 1024 == 0) {
			return (n >> 10) + " KiB";
		}
		if (n >= (1L << 20)) {
			return String.format(java.util.Locale.ROOT, "%.1f MiB", n / (double) (1L << 20));
		}
		return n + " B";
	}

}
