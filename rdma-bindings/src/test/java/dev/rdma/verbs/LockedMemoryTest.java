package dev.rdma.verbs;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.BitSet;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatIllegalArgumentException;

/**
 * The locked-memory limit read from /proc text (soft and hard limit, unlimited,
 * CAP_IPC_LOCK), the explanation an ENOMEM of a registration gets, the device-file
 * explanation of EACCES/EPERM, and CPU lists with the calling thread's pinning.
 */
class LockedMemoryTest {

	static final String LIMITS = """
			Limit                     Soft Limit           Hard Limit           Units
			Max open files            1024                 1048576              files
			Max locked memory         65536                8388608              bytes
			Max address space         unlimited            unlimited            bytes
			""";

	static final String STATUS_NO_CAPS = "Name:\tjava\nUid:\t65534\t65534\t65534\t65534\nGid:\t65534\t65534\t65534\t65534\n"
			+ "Groups:\t65534 27 \nCapEff:\t0000000000000000\nCpus_allowed_list:\t0-1\n";

	@Test
	void readsTheSoftAndHardLimitAndTheCapability() {
		LockedMemory.Limit limit = LockedMemory.parse(LIMITS, STATUS_NO_CAPS);
		assertThat(limit).isEqualTo(new LockedMemory.Limit(65536, 8388608, false));
		assertThat(limit.unlimited()).isFalse();
		assertThat(limit.describe()).isEqualTo("65536 bytes (64 KiB, RLIMIT_MEMLOCK)");
		// CAP_IPC_LOCK is bit 14: 0x4000
		LockedMemory.Limit capable = LockedMemory.parse(LIMITS, "CapEff:\t0000000000004000\n");
		assertThat(capable.ipcLock()).isTrue();
		assertThat(capable.unlimited()).isTrue();
		assertThat(capable.describe()).contains("CAP_IPC_LOCK");
		// root's full set
		assertThat(LockedMemory.parse(LIMITS, "CapEff:\t000001ffffffffff\n").ipcLock()).isTrue();
		assertThat(LockedMemory.parse(LIMITS.replace("65536  ", "unlimited"), STATUS_NO_CAPS).unlimited()).isTrue();
		assertThatIllegalArgumentException().isThrownBy(() -> LockedMemory.parse("Max open files 1 2 files", ""));
	}

	/**
	 * CAP_IPC_LOCK lifts the limit only in the initial user namespace: the kernel checks
	 * it there. In a rootless container (root mapped to an unprivileged id) the bit shows
	 * in CapEff and the limit still applies; before, the check trusted the bit and
	 * ibv_reg_mr then failed with ENOMEM.
	 */
	@Test
	void theCapabilityCountsOnlyInTheInitialUserNamespace() {
		String caps = "CapEff:\t000001ffffffffff\n";
		assertThat(LockedMemory.parse(LIMITS, caps, "         0          0 4294967295\n").ipcLock()).isTrue();
		LockedMemory.Limit rootless = LockedMemory.parse(LIMITS, caps, "         0     100000      65536\n");
		assertThat(rootless.ipcLock()).as("root of a user namespace of its own").isFalse();
		assertThat(rootless.unlimited()).isFalse();
		assertThat(rootless.describe()).isEqualTo("65536 bytes (64 KiB, RLIMIT_MEMLOCK)");
		assertThat(LockedMemory.parse(LIMITS, caps, "0 1000 1\n1 100000 65536\n").ipcLock()).isFalse();
	}

	@Test
	void theCurrentLimitIsReadFromProc() {
		LockedMemory.Limit limit = LockedMemory.current();
		assertThat(limit.soft() == -1 || limit.soft() >= 0).isTrue();
	}

	@Test
	void anEnomemUnderALimitNamesTheLimitWhatIsRegisteredAndTheFixes() {
		String text = LockedMemory.explainEnomem("ibv_reg_mr", 262144, new LockedMemory.Limit(65536, 65536, false),
				8192);
		assertThat(text).startsWith("locked memory: ibv_reg_mr could not pin 256 KiB more")
			.contains("65536 bytes (64 KiB, RLIMIT_MEMLOCK)", "8 KiB already", "--ulimit memlock=-1",
					"LimitMEMLOCK=infinity", "/etc/security/limits.conf", "IPC_LOCK", "docs/deployment.md");
		String unlimited = LockedMemory.explainEnomem("ibv_create_cq", 0, LockedMemory.Limit.UNLIMITED, 0);
		assertThat(unlimited).contains("short of memory").doesNotContain("--ulimit");
		assertThat(LockedMemory.detail("ibv_create_qp", Errno.EINVAL, "x")).isEqualTo("x");
		assertThat(LockedMemory.detail("ibv_create_qp", Errno.ENOMEM, "x")).startsWith("x; ");
	}

	@Test
	void pagesAndBytesForPeople() {
		assertThat(LockedMemory.pages(1)).isEqualTo(4096);
		assertThat(LockedMemory.pages(8192)).isEqualTo(8192);
		assertThat(LockedMemory.bytes(8 << 20)).isEqualTo("8 MiB");
		assertThat(LockedMemory.bytes(65536)).isEqualTo("64 KiB");
		assertThat(LockedMemory.bytes(100)).isEqualTo("100 B");
		assertThat(LockedMemory.bytes((8 << 20) + 100)).isEqualTo("8.0 MiB");
		assertThat(LockedMemory.bytes((8 << 20) + 4096)).isEqualTo("8196 KiB");
	}

	@Test
	void anAccessDenialNamesTheFileItsModeTheUserAndTheFixes(@TempDir Path dir) throws Exception {
		Path sys = dir.resolve("infiniband_verbs");
		Files.createDirectories(sys.resolve("uverbs0"));
		Files.createDirectories(sys.resolve("uverbs1"));
		Files.writeString(sys.resolve("uverbs0/ibdev"), "rxeA\n");
		Files.writeString(sys.resolve("uverbs1/ibdev"), "rxeB\n");
		assertThat(DeviceFiles.uverbs(sys, "rxeB")).isEqualTo(Path.of("/dev/infiniband/uverbs1"));
		assertThat(DeviceFiles.uverbs(dir.resolve("absent"), "rxeB")).isEqualTo(Path.of("/dev/infiniband/uverbs*"));
		assertThat(DeviceFiles.ids(STATUS_NO_CAPS)).isEqualTo("(uid 65534, gid 65534, groups 65534,27)");
		Path file = dir.resolve("uverbs9");
		Files.writeString(file, "");
		String text = DeviceFiles.explainAccess(file);
		assertThat(text).startsWith(file + " (mode -rw")
			.contains("cannot be opened by user " + System.getProperty("user.name"), "crw-rw-rw-", "udev",
					"--device=/dev/infiniband/uverbsN", "--device=/dev/infiniband/rdma_cm", "EPERM");
		assertThat(DeviceFiles.explainAccess(dir.resolve("none"))).contains("(absent)");
		assertThat(DeviceFiles.isAccessDenied(Errno.EACCES)).isTrue();
		assertThat(DeviceFiles.isAccessDenied(Errno.EPERM)).isTrue();
		assertThat(DeviceFiles.isAccessDenied(Errno.ENODEV)).isFalse();
		// rdma-core reports a closed device file as ENOENT: what decides is the file
		assertThat(DeviceFiles.isAccessDenied(Errno.ENOENT, dir.resolve("none"))).isFalse();
		assertThat(DeviceFiles.isAccessDenied(Errno.EACCES, dir.resolve("none"))).isTrue();
		assertThat(DeviceFiles.isClosedToThisProcess(file)).isFalse();
	}

	@Test
	void cpuListsParseAndFormatLikeLinux() {
		BitSet cpus = CpuAffinity.parse("0-3, 6,8-9");
		assertThat(CpuAffinity.format(cpus)).isEqualTo("0-3,6,8-9");
		assertThat(CpuAffinity.format(CpuAffinity.parse("5"))).isEqualTo("5");
		assertThatIllegalArgumentException().isThrownBy(() -> CpuAffinity.parse("")).withMessage("an empty CPU list");
		assertThatIllegalArgumentException().isThrownBy(() -> CpuAffinity.parse("3-1"))
			.withMessage("'3-1' is a range from high to low");
		assertThatIllegalArgumentException().isThrownBy(() -> CpuAffinity.parse("0,x"))
			.withMessage("'x' is not a CPU number or a range a-b");
		assertThatIllegalArgumentException().isThrownBy(() -> CpuAffinity.parse("0,,1"));
		assertThatIllegalArgumentException().isThrownBy(() -> CpuAffinity.parse("1024"))
			.withMessageContaining("CPU_SETSIZE");
	}

	@Test
	void theCallingThreadIsPinnedThroughSchedSetaffinity() throws Exception {
		BitSet allowed = CpuAffinity.currentThread();
		assertThat(allowed.isEmpty()).isFalse();
		int last = allowed.length() - 1;
		BitSet[] seen = new BitSet[1];
		Thread t = Thread.ofPlatform().start(() -> {
			BitSet one = new BitSet();
			one.set(last);
			CpuAffinity.pinCurrentThread(one);
			seen[0] = CpuAffinity.currentThread();
		});
		t.join();
		assertThat(CpuAffinity.format(seen[0])).isEqualTo(String.valueOf(last));
		// this thread is untouched
		assertThat(CpuAffinity.currentThread()).isEqualTo(allowed);
		BitSet offline = new BitSet();
		offline.set(CpuAffinity.MAX_CPU);
		Thread u = Thread.ofPlatform().start(() -> {
			try {
				CpuAffinity.pinCurrentThread(offline);
				seen[0] = null;
			}
			catch (VerbsException ex) {
				assertThat(ex.verb()).isEqualTo("sched_setaffinity");
				assertThat(ex.errno()).isEqualTo(Errno.EINVAL);
				seen[0] = offline;
			}
		});
		u.join();
		assertThat(seen[0]).isSameAs(offline);
	}

}
