package dev.rdma.verbs;

import dev.rdma.verbs.ffm.Libc;

import java.util.Map;

/**
 * Names and texts of the error numbers verbs report (Linux x86_64 values). Public API:
 * the constants are what {@link VerbsException#errno()} returns, for callers that react
 * to one refusal (e.g. {@link #EOPNOTSUPP}: the provider lacks the feature;
 * {@link #EAGAIN}: retry later), and {@link #describe(int)} is how the binding's error
 * messages name an errno.
 */
public final class Errno {

	public static final int EPERM = 1;

	public static final int ENOENT = 2;

	public static final int EINTR = 4;

	public static final int EIO = 5;

	public static final int EAGAIN = 11;

	public static final int ENOMEM = 12;

	public static final int EACCES = 13;

	public static final int EFAULT = 14;

	public static final int EBUSY = 16;

	public static final int EEXIST = 17;

	public static final int ENODEV = 19;

	public static final int EINVAL = 22;

	public static final int ENOSPC = 28;

	public static final int ENOSYS = 38;

	public static final int EOVERFLOW = 75;

	public static final int EOPNOTSUPP = 95;

	public static final int ETIMEDOUT = 110;

	private static final Map<Integer, String> NAMES = Map.ofEntries(Map.entry(EPERM, "EPERM"),
			Map.entry(ENOENT, "ENOENT"), Map.entry(EINTR, "EINTR"), Map.entry(EIO, "EIO"), Map.entry(EAGAIN, "EAGAIN"),
			Map.entry(ENOMEM, "ENOMEM"), Map.entry(EACCES, "EACCES"), Map.entry(EFAULT, "EFAULT"),
			Map.entry(EBUSY, "EBUSY"), Map.entry(EEXIST, "EEXIST"), Map.entry(ENODEV, "ENODEV"),
			Map.entry(EINVAL, "EINVAL"), Map.entry(ENOSPC, "ENOSPC"), Map.entry(ENOSYS, "ENOSYS"),
			Map.entry(EOVERFLOW, "EOVERFLOW"), Map.entry(EOPNOTSUPP, "EOPNOTSUPP"), Map.entry(ETIMEDOUT, "ETIMEDOUT"));

	private Errno() {
	}

	/** {@code EINVAL}, or {@code errno 123} for a number without a name here. */
	public static String name(int errno) {
		if (errno == 0) {
			return "errno 0";
		}
		if (errno < 0) {
			return "provider code " + errno;
		}
		return NAMES.getOrDefault(errno, "errno " + errno);
	}

	/**
	 * The C library's {@code strerror} text, or a fixed text when libc cannot be asked.
	 */
	public static String text(int errno) {
		if (errno == 0) {
			return "unknown provider failure (errno not set)";
		}
		if (errno < 0) {
			return "provider-specific failure, not an errno";
		}
		return Libc.strerror(errno);
	}

	/** {@code EINVAL (22): Invalid argument}. */
	public static String describe(int errno) {
		if (errno <= 0) {
			return name(errno) + ": " + text(errno);
		}
		return name(errno) + " (" + errno + "): " + text(errno);
	}

}
