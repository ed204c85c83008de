package dev.rdma.verbs;

import dev.rdma.verbs.ffm.Native;
import dev.rdma.verbs.ffm.Ibverbs;
import dev.rdma.verbs.ffm.Layouts;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.EnumSet;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import dev.rdma.verbs.testing.DeviceTestSupport;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * {@link Context#queryDevice()} ({@code ibv_query_device_ex}) on a real device (rxe0 in
 * the Soft-RoCE VM): the extended members, the capability flags, and the completion-field
 * hints against what {@code ibv_create_cq_ex} really accepts.
 */
@Tag(DeviceTestSupport.TAG)
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class DeviceAttributesDeviceTest {

	private static final EnumSet<WcExFlag> STANDARD = EnumSet.range(WcExFlag.BYTE_LEN, WcExFlag.DLID_PATH_BITS);

	@Test
	void queryDeviceExAgreesWithIbvQueryDeviceAndTheHintsWithCqCreation() throws Throwable {
		long openBefore = NativeObjects.open();
		Context ctx = DeviceTestSupport.openContext();
		try {
			DeviceAttributes attr = ctx.queryDevice();
			assertThat(ctx.queryDevice()).as("cached").isSameAs(attr);
			System.out.printf(
					"device %s (ibv_query_device_ex): fw %s, vendor 0x%x part %d, max_cqe %d, max_cq %d, "
							+ "completion_timestamp_mask 0x%x, hca_core_clock %d kHz, device_cap_flags 0x%08x "
							+ "(unknown bits 0x%x), device_cap_flags_ex 0x%x, capabilities %s%n",
					ctx.deviceName(), attr.fwVersion(), attr.vendorId(), attr.vendorPartId(), attr.maxCqe(),
					attr.maxCq(), attr.completionTimestampMask(), attr.hcaCoreClockKhz(), attr.deviceCapFlags(),
					DeviceCapability.unknownBits(attr.deviceCapFlags()), attr.deviceCapFlagsEx(),
					attr.deviceCapabilities());

			// rdma-core providers all have query_device_ex (libibverbs puts a dummy
			// answering EOPNOTSUPP in the slot
			// otherwise): the extended path is the one that answered here
			assertThat(Native.isNull(ctx.verbsOp(Layouts.VCTX_QUERY_DEVICE_EX))).isFalse();

			// orig_attr is what ibv_query_device (the verb queryDevice() used before)
			// reports, member by member
			DeviceAttributes legacy;
			try (Arena arena = Arena.ofConfined()) {
				MemorySegment ex = arena.allocate(Layouts.IBV_DEVICE_ATTR_EX);
				int rc = (int) Ibverbs.QUERY_DEVICE.invokeExact(ctx.handle,
						ex.asSlice(Layouts.off(Layouts.IBV_DEVICE_ATTR_EX, "orig_attr"), Layouts.IBV_DEVICE_ATTR));
				assertThat(rc).as("ibv_query_device").isZero();
				legacy = DeviceQueries.decodeDeviceAttributes(ex);
			}
			assertThat(legacy.maxCqe()).isPositive();
			assertThat(attr.maxCqe()).isEqualTo(legacy.maxCqe());
			assertThat(attr).usingRecursiveComparison()
				.ignoringFields("completionTimestampMask", "hcaCoreClockKhz", "deviceCapFlagsEx")
				.isEqualTo(legacy);

			// capabilities: every known bit decoded, nothing else
			assertThat(DeviceCapability.mask(attr.deviceCapabilities()))
				.isEqualTo(attr.deviceCapFlags() & DeviceCapability.KNOWN_MASK);
			for (DeviceCapability c : DeviceCapability.values()) {
				assertThat(attr.hasCapability(c)).as(c.name()).isEqualTo((attr.deviceCapFlags() & c.bit()) != 0);
			}
			assertThat(attr.deviceCapabilities()).as("every provider reports some capability").isNotEmpty();
			if (attr.deviceCapFlagsEx() != 0) {
				// the kernel reports device_cap_flags as the low 32 bits of
				// device_cap_flags_ex
				assertThat((int) attr.deviceCapFlagsEx()).isEqualTo(attr.deviceCapFlags());
			}
			assertThat(attr.supportsCompletionTimestamps()).isEqualTo(attr.completionTimestampMask() != 0);

			// the hints against ibv_create_cq_ex: a flag the hint rules out is refused
			// with EOPNOTSUPP; a flag it
			// allows is either accepted or refused with EOPNOTSUPP, never anything else
			Map<WcExFlag, String> outcome = new LinkedHashMap<>();
			for (WcExFlag flag : WcExFlag.values()) {
				EnumSet<WcExFlag> flags = EnumSet.copyOf(STANDARD);
				flags.add(flag);
				String result;
				try (ExtendedCompletionQueue cq = ctx
					.createExtendedCompletionQueue(CqInitAttributes.of(16).withWcFlags(flags))) {
					assertThat(cq.provides(flag)).isTrue();
					result = "accepted";
				}
				catch (VerbsException e) {
					assertThat(e.verb()).isEqualTo("ibv_create_cq_ex");
					assertThat(e.errno()).as(flag + ": " + e.getMessage()).isEqualTo(Errno.EOPNOTSUPP);
					result = "EOPNOTSUPP";
				}
				if (!attr.mayProvide(flag)) {
					assertThat(result).as(flag + " is ruled out by the hint").isEqualTo("EOPNOTSUPP");
				}
				outcome.put(flag, "hint " + attr.mayProvide(flag) + ", " + result);
			}
			System.out.printf("device %s: wc_flags hint vs ibv_create_cq_ex: %s%n", ctx.deviceName(), outcome);

			if (attr.isSoftRoce()) {
				// rxe stamps no completion: the kernel reports neither a timestamp mask
				// nor a core clock
				assertThat(attr.completionTimestampMask()).isZero();
				assertThat(attr.hcaCoreClockKhz()).isZero();
				assertThat(attr.supportsCompletionTimestamps()).isFalse();
				assertThat(attr.mayProvide(WcExFlag.COMPLETION_TIMESTAMP)).isFalse();
				assertThat(attr.mayProvide(WcExFlag.COMPLETION_TIMESTAMP_WALLCLOCK)).isFalse();
				assertThat(outcome.get(WcExFlag.COMPLETION_TIMESTAMP)).isEqualTo("hint false, EOPNOTSUPP");
				// rxe accepts exactly the standard fields (RXE_SUP_WC_EX_FLAGS, rdma-core
				// 44 to current)
				outcome.forEach((flag, result) -> assertThat(result.endsWith("accepted")).as(flag + ": " + result)
					.isEqualTo(STANDARD.contains(flag)));
			}
		}
		finally {
			ctx.close();
		}
		assertThatThrownBy(ctx::queryDevice).isInstanceOf(IllegalStateException.class).hasMessageContaining("closed");
		assertThat(NativeObjects.open()).as("native objects left open: " + NativeObjects.openByType())
			.isEqualTo(openBefore);
	}

}
