package dev.rdma.verbs;

import java.io.IOException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFileAttributes;
import java.nio.file.attribute.PosixFilePermissions;

import org.jspecify.annotations.Nullable;

/**
 * The character devices through which a process reaches RDMA ({@code /dev/infiniband/
 * uverbsN} per device, {@code /dev/infiniband/rdma_cm} for librdmacm) and the explanation
 * of a failure to open one ({@code EACCES}, {@code EPERM}): the file, its mode and owner,
 * the user and groups of this process, and the fixes. Plain file reads, no native call;
 * thread-safe.
 */
public final class DeviceFiles {

	/** The file librdmacm opens. */
	public static final Path RDMA_CM = Path.of("/dev/infiniband/rdma_cm");

	/** The fixes of a device file this process may not open. */
	public static final String FIXES = "open the device files to the service's user: the kernel creates them "
			+ "crw-rw-rw- and rdma-core's udev rules keep them so (or group rdma with the user in it); a container "
			+ "needs them passed in (docker run --device=/dev/infiniband/uverbsN --device=/dev/infiniband/rdma_cm, "
			+ "Kubernetes: the RDMA device plugin's resource), a device cgroup that denies them fails with EPERM; "
			+ "see docs/deployment.md";

	private static final Path SYS_VERBS = Path.of("/sys/class/infiniband_verbs");

	private DeviceFiles() {
	}

	/**
	 * The uverbs file of RDMA device {@code deviceName}, read from
	 * {@code /sys/class/infiniband_verbs/uverbs*}{@code /ibdev}, or
	 * {@code /dev/infiniband/
	 * uverbs*} when sysfs does not say.
	 */
	public static Path uverbs(String deviceName) {
		return uverbs(SYS_VERBS, deviceName);
	}

	static Path uverbs(Path sysVerbs, String deviceName) {
		try (DirectoryStream<Path> entries = Files.newDirectoryStream(sysVerbs, "uverbs*")) {
			for (Path entry : entries) {
				Path ibdev = entry.resolve("ibdev");
				if (Files.isReadable(ibdev) && Files.readString(ibdev).trim().equals(deviceName)) {
					return Path.of("/dev/infiniband").resolve(entry.getFileName().toString());
				}
			}
		}
		catch (IOException | RuntimeException ex) {
			// no sysfs: the generic name
		}
		return Path.of("/dev/infiniband/uverbs*");
	}

	/** Whether {@code errno} says a device file may not be opened (EACCES, EPERM). */
	public static boolean isAccessDenied(int errno) {
		return errno == Errno.EACCES || errno == Errno.EPERM;
	}

	/**
	 * Why {@code file} could not be opened: its mode and owner (when it can be read), the
	 * user and groups of this process, and {@link #FIXES}.
	 */
	public static String explainAccess(Path file) {
		return file + " " + attributes(file) + " cannot be opened by user " + user() + ": " + FIXES;
	}

	/**
	 * Whether {@code file} exists but this process may not open it for reading and
	 * writing ({@code access(2)}). rdma-core reports such a file as {@code ENOENT}, not
	 * {@code EACCES}: after the open fails it looks for the device node elsewhere and
	 * reports that it found none.
	 */
	public static boolean isClosedToThisProcess(Path file) {
		return Files.exists(file) && !(Files.isReadable(file) && Files.isWritable(file));
	}

	/**
	 * Whether a failed open of {@code file} with {@code errno} is a matter of access:
	 * EACCES, EPERM, or a file that exists but is closed to this process.
	 */
	public static boolean isAccessDenied(int errno, Path file) {
		return isAccessDenied(errno) || isClosedToThisProcess(file);
	}

	/** The detail of a failed open: {@code detail}, then {@link #explainAccess}. */
	static String detail(int errno, Path file, String detail) {
		return isAccessDenied(errno, file) ? detail + "; " + explainAccess(file) : detail;
	}

	private static String attributes(Path file) {
		try {
			PosixFileAttributes a = Files.readAttributes(file, PosixFileAttributes.class, LinkOption.NOFOLLOW_LINKS);
			return "(mode " + (a.isOther() ? "c" : "-") + PosixFilePermissions.toString(a.permissions()) + ", owner "
					+ a.owner().getName() + ":" + a.group().getName() + ")";
		}
		catch (IOException | RuntimeException ex) {
			return "(" + (Files.exists(file, LinkOption.NOFOLLOW_LINKS) ? "attributes unreadable" : "absent") + ")";
		}
	}

	/** This process's user, uid, gid and supplementary groups, from /proc/self/status. */
	static String user() {
		String name = System.getProperty("user.name", "?");
		try {
			return name + " " + ids(Files.readString(Path.of("/proc/self/status")));
		}
		catch (IOException | RuntimeException ex) {
			return name;
		}
	}

	static String ids(String status) {
		String uid = field(status, "Uid:");
		String gid = field(status, "Gid:");
		String groups = field(status, "Groups:");
		return "(uid " + (uid == null ? "?" : uid.split("\\s+")[1]) + ", gid "
				+ (gid == null ? "?" : gid.split("\\s+")[1]) + ", groups "
				+ (groups == null || groups.isBlank() ? "none" : groups.trim().replace(' ', ',')) + ")";
	}

	private static @Nullable String field(String status, String name) {
		for (String line : status.lines().toList()) {
			if (line.startsWith(name)) {
				return line.substring(name.length()).trim().replace('\t', ' ');
			}
		}
		return null;
	}

}
