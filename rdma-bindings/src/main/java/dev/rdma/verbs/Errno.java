package dev.rdma.verbs;

import dev.rdma.verbs.ffm.Libc;

import java.lang.reflect.Field;
import java.lang.reflect.Modifier;
import java.util.HashMap;
import java.util.Map;

/**
 * Names and texts of the error numbers verbs, librdmacm's connection events and the C
 * library's calls report (Linux x86_64 values, proven against the C headers by
 * {@code LayoutConformanceTest}); a number without a constant here is named
 * {@code errno N}. Public API: the constants are what {@link VerbsException#errno()}
 * returns, for callers that react to one refusal (e.g. {@link #EOPNOTSUPP}: the provider
 * lacks the feature; {@link #EAGAIN}: retry later), and {@link #describe(int)} is how the
 * binding's error messages name an errno.
 */
public final class Errno {

	public static final int EPERM = 1;

	public static final int ENOENT = 2;

	public static final int ESRCH = 3;

	public static final int EINTR = 4;

	public static final int EIO = 5;

	public static final int ENXIO = 6;

	public static final int E2BIG = 7;

	public static final int EBADF = 9;

	public static final int ECHILD = 10;

	public static final int EAGAIN = 11;

	public static final int ENOMEM = 12;

	public static final int EACCES = 13;

	public static final int EFAULT = 14;

	public static final int EBUSY = 16;

	public static final int EEXIST = 17;

	public static final int ENODEV = 19;

	public static final int EINVAL = 22;

	public static final int ENFILE = 23;

	public static final int EMFILE = 24;

	public static final int ENOTTY = 25;

	public static final int ENOSPC = 28;

	public static final int EPIPE = 32;

	public static final int ERANGE = 34;

	public static final int ENOSYS = 38;

	public static final int ENODATA = 61;

	public static final int ETIME = 62;

	public static final int ENOLINK = 67;

	public static final int EPROTO = 71;

	public static final int EOVERFLOW = 75;

	public static final int ENOTSOCK = 88;

	public static final int EMSGSIZE = 90;

	public static final int EPROTONOSUPPORT = 93;

	public static final int EOPNOTSUPP = 95;

	public static final int EAFNOSUPPORT = 97;

	public static final int EADDRINUSE = 98;

	public static final int EADDRNOTAVAIL = 99;

	public static final int ENETDOWN = 100;

	public static final int ENETUNREACH = 101;

	public static final int ECONNABORTED = 103;

	public static final int ECONNRESET = 104;

	public static final int ENOBUFS = 105;

	public static final int EISCONN = 106;

	public static final int ENOTCONN = 107;

	public static final int ETIMEDOUT = 110;

	public static final int ECONNREFUSED = 111;

	public static final int EHOSTDOWN = 112;

	public static final int EHOSTUNREACH = 113;

	public static final int EALREADY = 114;

	public static final int EINPROGRESS = 115;

	public static final int EREMOTEIO = 121;

	public static final int ECANCELED = 125;

	/** The constants above by value: every public int field is one. */
	private static final Map<Integer, String> NAMES = names();

	private Errno() {
	}

	private static Map<Integer, String> names() {
		Map<Integer, String> names = new HashMap<>();
		for (Field f : Errno.class.getFields()) {
			if (f.getType() == int.class && Modifier.isStatic(f.getModifiers())) {
				try {
					names.put(f.getInt(null), f.getName());
				}
				catch (IllegalAccessException e) {
					throw new ExceptionInInitializerError(e);
				}
			}
		}
		return Map.copyOf(names);
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

	/**
	 * {@code EINVAL (22): Invalid argument}; {@code errno 200: Unknown error 200} for a
	 * number without a name here.
	 */
	public static String describe(int errno) {
		if (errno <= 0 || !NAMES.containsKey(errno)) {
			return name(errno) + ": " + text(errno);
		}
		return name(errno) + " (" + errno + "): " + text(errno);
	}

}
