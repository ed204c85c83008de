package dev.rdma.verbs;

import dev.rdma.verbs.ffm.Layouts;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * Device attributes without a device: the decoding of {@code device_cap_flags}, the
 * completion-field hints, and the {@code ibv_query_device_ex} inline's logic (which slot
 * it calls with what, when it falls back to {@code ibv_query_device}) against a native
 * stand-in: memory laid out as a {@code struct verbs_context} whose
 * {@code query_device_ex} is an FFM upcall stub, and an upcall stub standing in for
 * {@code ibv_query_device}.
 */
class DeviceAttributesTest {

	// ------------------------------------------------------------------ decoding and
	// hints

	private static DeviceAttributes attributes(int capFlags, long timestampMask, long clockKhz) {
		return new DeviceAttributes("1.0", 1, 2, 3, 4, 5, 6, 7, 8, capFlags, 9, 10, 11, 12, 13, 14, 1, timestampMask,
				clockKhz, 0);
	}

	@Test
	void capabilityBitsDecodeToTheirConstantsAndUnknownBitsStayInTheRawValue() {
		int unknown = (1 << 15) | (1 << 16) | (1 << 31);
		int flags = DeviceCapability.RESIZE_MAX_WR.bit() | DeviceCapability.N_NOTIFY_CQ.bit()
				| DeviceCapability.MANAGED_FLOW_STEERING.bit() | unknown;
		DeviceAttributes a = attributes(flags, 0, 0);

		assertThat(a.deviceCapabilities()).containsExactly(DeviceCapability.RESIZE_MAX_WR, DeviceCapability.N_NOTIFY_CQ,
				DeviceCapability.MANAGED_FLOW_STEERING);
		assertThat(a.deviceCapFlags()).isEqualTo(flags);
		assertThat(DeviceCapability.unknownBits(a.deviceCapFlags())).isEqualTo(unknown);
		assertThat(DeviceCapability.mask(a.deviceCapabilities()) | DeviceCapability.unknownBits(flags))
			.isEqualTo(flags);
		assertThat(a.hasCapability(DeviceCapability.N_NOTIFY_CQ)).isTrue();
		assertThat(a.hasCapability(DeviceCapability.XRC)).isFalse();
		assertThatThrownBy(() -> a.hasCapability(null)).isInstanceOf(IllegalArgumentException.class)
			.hasMessageContaining("capability");

		// a copy per call: changing it changes nothing
		a.deviceCapabilities().clear();
		assertThat(a.deviceCapabilities()).hasSize(3);

		assertThat(DeviceCapability.decode(0)).isEmpty();
		assertThat(DeviceCapability.decode(-1)).containsExactlyElementsOf(EnumSet.allOf(DeviceCapability.class));
		assertThat(DeviceCapability.decode(unknown)).isEmpty();
		assertThat(Integer.bitCount(DeviceCapability.KNOWN_MASK)).isEqualTo(DeviceCapability.values().length);
		for (DeviceCapability c : DeviceCapability.values()) {
			assertThat(Integer.bitCount(c.bit())).as(c.name()).isEqualTo(1);
			assertThat(DeviceCapability.decode(c.bit())).as(c.name()).containsExactly(c);
		}
	}

	@Test
	void completionFieldHintsFollowTheTimestampMaskAndTheCoreClock() {
		DeviceAttributes none = attributes(0, 0, 0);
		assertThat(none.supportsCompletionTimestamps()).isFalse();
		assertThat(none.mayProvide(WcExFlag.COMPLETION_TIMESTAMP)).isFalse();
		assertThat(none.mayProvide(WcExFlag.COMPLETION_TIMESTAMP_WALLCLOCK)).isFalse();

		DeviceAttributes noClock = attributes(0, (1L << 48) - 1, 0);
		assertThat(noClock.supportsCompletionTimestamps()).isTrue();
		assertThat(noClock.mayProvide(WcExFlag.COMPLETION_TIMESTAMP)).isTrue();
		assertThat(noClock.mayProvide(WcExFlag.COMPLETION_TIMESTAMP_WALLCLOCK)).isFalse();

		DeviceAttributes clockWithoutMask = attributes(0, 0, 156_250);
		assertThat(clockWithoutMask.mayProvide(WcExFlag.COMPLETION_TIMESTAMP)).isFalse();
		assertThat(clockWithoutMask.mayProvide(WcExFlag.COMPLETION_TIMESTAMP_WALLCLOCK)).isFalse();

		DeviceAttributes both = attributes(0, -1L, 156_250);
		assertThat(both.mayProvide(WcExFlag.COMPLETION_TIMESTAMP)).isTrue();
		assertThat(both.mayProvide(WcExFlag.COMPLETION_TIMESTAMP_WALLCLOCK)).isTrue();

		for (WcExFlag f : WcExFlag.values()) {
			if (f != WcExFlag.COMPLETION_TIMESTAMP && f != WcExFlag.COMPLETION_TIMESTAMP_WALLCLOCK) {
				assertThat(none.mayProvide(f)).as(f + ": not known to be unsupported").isTrue();
			}
		}
		assertThatThrownBy(() -> none.mayProvide(null)).isInstanceOf(IllegalArgumentException.class)
			.hasMessageContaining("flag");
	}

	@Test
	void theConstructorOfIbvQueryDeviceAloneStillWorksAndReportsNothingExtended() {
		DeviceAttributes a = new DeviceAttributes("fw", 1, 2, 3, DeviceAttributes.RXE_VENDOR_ID, 5, 6, 7, 8,
				DeviceCapability.SRQ_RESIZE.bit(), 9, 10, 11, 12, 13, 14, 1);
		assertThat(a.isSoftRoce()).isTrue();
		assertThat(a.maxCqe()).isEqualTo(11);
		assertThat(a.completionTimestampMask()).isZero();
		assertThat(a.hcaCoreClockKhz()).isZero();
		assertThat(a.deviceCapFlagsEx()).isZero();
		assertThat(a.supportsCompletionTimestamps()).isFalse();
		assertThat(a.deviceCapabilities()).containsExactly(DeviceCapability.SRQ_RESIZE);
	}

	// ------------------------------------------------------------------
	// ibv_query_device_ex against a stand-in

	/** Bytes of the stand-in verbs_context before its struct ibv_context. */
	private static final long PREFIX = 512;

	record ExCall(long ctx, long input, int inputCompMask, long attr, long attrSize) {
	}

	record LegacyCall(long ctx, long attr, boolean zeroed) {
	}

	static final List<ExCall> EX_CALLS = new ArrayList<>();
	static final List<LegacyCall> LEGACY_CALLS = new ArrayList<>();
	static int exResult;
	static int legacyResult;

	private Arena arena;

	private MemorySegment block;

	private MemorySegment ctx;

	private MethodHandle legacy;

	/**
	 * The stand-in provider's query_device_ex: records its arguments, fills what it is
	 * configured to.
	 */
	static int queryDeviceEx(MemorySegment c, MemorySegment input, MemorySegment attr, long attrSize) {
		MemorySegment a = attr.reinterpret(attrSize);
		EX_CALLS.add(new ExCall(c.address(), input.address(), input.reinterpret(4).get(JAVA_INT, 0), attr.address(),
				attrSize));
		var ex = Layouts.IBV_DEVICE_ATTR_EX;
		// written also when failing: a fallback must not see them
		a.set(JAVA_INT, Layouts.off(ex, "orig_attr", "max_cqe"), 4096);
		a.set(JAVA_LONG, Layouts.off(ex, "completion_timestamp_mask"), 0xFFFF_FFFF_FFFFL);
		a.set(JAVA_LONG, Layouts.off(ex, "hca_core_clock"), 156_250);
		a.set(JAVA_LONG, Layouts.off(ex, "device_cap_flags_ex"), (1L << 34) | 0x8000_1001L);
		a.set(JAVA_INT, Layouts.off(ex, "orig_attr", "device_cap_flags"), 0x8000_1001);
		a.set(JAVA_INT, Layouts.off(ex, "orig_attr", "vendor_id"), 0x02c9);
		a.set(JAVA_BYTE, Layouts.off(ex, "orig_attr", "phys_port_cnt"), (byte) 2);
		a.set(JAVA_INT, Layouts.off(ex, "orig_attr", "max_qp_rd_atom"), 16);
		a.set(JAVA_INT, Layouts.off(ex, "orig_attr", "max_qp_init_rd_atom"), 8);
		a.setString(Layouts.off(ex, "orig_attr", "fw_ver"), "16.35.2000");
		return exResult;
	}

	/**
	 * The stand-in ibv_query_device: records whether it got zeroed memory, fills a few
	 * members.
	 */
	static int legacyQueryDevice(MemorySegment c, MemorySegment attr) {
		MemorySegment a = attr.reinterpret(Layouts.IBV_DEVICE_ATTR.byteSize());
		boolean zeroed = a.elements(JAVA_BYTE).allMatch(b -> b.get(JAVA_BYTE, 0) == 0);
		LEGACY_CALLS.add(new LegacyCall(c.address(), attr.address(), zeroed));
		var l = Layouts.IBV_DEVICE_ATTR;
		a.set(JAVA_INT, Layouts.off(l, "max_cqe"), 1024);
		a.set(JAVA_INT, Layouts.off(l, "device_cap_flags"), DeviceCapability.RC_RNR_NAK_GEN.bit());
		a.set(JAVA_BYTE, Layouts.off(l, "phys_port_cnt"), (byte) 1);
		a.setString(Layouts.off(l, "fw_ver"), "0.0.0");
		return legacyResult;
	}

	private MemorySegment stub(String method, FunctionDescriptor fd) throws ReflectiveOperationException {
		var mh = MethodHandles.lookup().findStatic(DeviceAttributesTest.class, method, fd.toMethodType());
		return Linker.nativeLinker().upcallStub(mh, fd, arena);
	}

	@BeforeEach
	void standIn() throws ReflectiveOperationException {
		EX_CALLS.clear();
		LEGACY_CALLS.clear();
		exResult = 0;
		legacyResult = 0;
		arena = Arena.ofConfined();
		block = arena.allocate(PREFIX + Layouts.IBV_CONTEXT.byteSize(), 16);
		ctx = block.asSlice(PREFIX, Layouts.IBV_CONTEXT.byteSize());
		ctx.set(JAVA_LONG, Layouts.CONTEXT_ABI_COMPAT, Layouts.VERBS_ABI_IS_EXTENDED);
		block.set(JAVA_LONG, PREFIX + Layouts.VCTX_SZ, PREFIX + Layouts.IBV_CONTEXT.byteSize());
		block.set(ADDRESS, PREFIX + Layouts.VCTX_QUERY_DEVICE_EX,
				stub("queryDeviceEx", FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, ADDRESS, JAVA_LONG)));
		FunctionDescriptor legacyFd = FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS);
		legacy = Linker.nativeLinker().downcallHandle(stub("legacyQueryDevice", legacyFd), legacyFd);
	}

	@AfterEach
	void free() {
		arena.close();
	}

	@Test
	void theProvidersQueryDeviceExIsCalledWithCompMaskZeroAndTheSizeOfTheLayout() {
		DeviceAttributes a = DeviceQueries.queryDeviceEx(ctx, "stand-in", legacy);

		assertThat(EX_CALLS).hasSize(1);
		ExCall call = EX_CALLS.getFirst();
		assertThat(call.ctx()).as("the struct ibv_context *").isEqualTo(ctx.address());
		assertThat(call.input()).as("a non-NULL input").isNotZero();
		assertThat(call.inputCompMask()).isZero();
		assertThat(call.attrSize()).isEqualTo(Layouts.IBV_DEVICE_ATTR_EX.byteSize()).isEqualTo(400);
		assertThat(LEGACY_CALLS).as("no fallback").isEmpty();

		assertThat(a.maxCqe()).isEqualTo(4096);
		assertThat(a.fwVersion()).isEqualTo("16.35.2000");
		assertThat(a.vendorId()).isEqualTo(0x02c9);
		assertThat(a.physPortCount()).isEqualTo(2);
		assertThat(a.maxQpRdAtom()).isEqualTo(16);
		assertThat(a.maxQpInitRdAtom()).isEqualTo(8);
		assertThat(a.completionTimestampMask()).isEqualTo(0xFFFF_FFFF_FFFFL);
		assertThat(a.hcaCoreClockKhz()).isEqualTo(156_250);
		assertThat(a.deviceCapFlagsEx()).isEqualTo((1L << 34) | 0x8000_1001L);
		assertThat(a.deviceCapFlags()).isEqualTo(0x8000_1001);
		assertThat(a.deviceCapabilities()).containsExactly(DeviceCapability.RESIZE_MAX_WR,
				DeviceCapability.RC_RNR_NAK_GEN);
		assertThat(a.supportsCompletionTimestamps()).isTrue();
		assertThat(a.mayProvide(WcExFlag.COMPLETION_TIMESTAMP_WALLCLOCK)).isTrue();
	}

	@Test
	void eopnotsuppAndEnosysFromTheProviderFallBackToIbvQueryDeviceOnZeroedMemory() {
		for (int rc : new int[] { Errno.EOPNOTSUPP, Errno.ENOSYS }) {
			EX_CALLS.clear();
			LEGACY_CALLS.clear();
			exResult = rc;
			DeviceAttributes a = DeviceQueries.queryDeviceEx(ctx, "stand-in", legacy);

			assertThat(EX_CALLS).as(Errno.name(rc)).hasSize(1);
			assertThat(LEGACY_CALLS).as(Errno.name(rc)).hasSize(1);
			LegacyCall call = LEGACY_CALLS.getFirst();
			assertThat(call.ctx()).isEqualTo(ctx.address());
			assertThat(call.attr()).as("&attr->orig_attr").isEqualTo(EX_CALLS.getFirst().attr());
			assertThat(call.zeroed()).as("memset(attr, 0, sizeof(*attr)) before ibv_query_device").isTrue();
			assertThat(a.maxCqe()).isEqualTo(1024);
			assertThat(a.fwVersion()).isEqualTo("0.0.0");
			assertThat(a.deviceCapabilities()).containsExactly(DeviceCapability.RC_RNR_NAK_GEN);
			assertThat(a.completionTimestampMask()).as("what the failed provider wrote is gone").isZero();
			assertThat(a.hcaCoreClockKhz()).isZero();
			assertThat(a.deviceCapFlagsEx()).isZero();
			assertThat(a.mayProvide(WcExFlag.COMPLETION_TIMESTAMP)).isFalse();
		}
	}

	@Test
	void anotherProviderErrorIsThrownNamingIbvQueryDeviceExWithoutFallback() {
		exResult = Errno.EINVAL;
		assertThatThrownBy(() -> DeviceQueries.queryDeviceEx(ctx, "stand-in", legacy))
			.isInstanceOfSatisfying(VerbsException.class, e -> {
				assertThat(e.verb()).isEqualTo("ibv_query_device_ex");
				assertThat(e.errno()).isEqualTo(Errno.EINVAL);
				assertThat(e.getMessage()).contains("EINVAL (22)").contains("stand-in");
			});
		assertThat(LEGACY_CALLS).isEmpty();
	}

	@Test
	void aFailingFallbackIsThrownNamingIbvQueryDevice() {
		exResult = Errno.EOPNOTSUPP;
		legacyResult = Errno.ENOMEM;
		assertThatThrownBy(() -> DeviceQueries.queryDeviceEx(ctx, "stand-in", legacy))
			.isInstanceOfSatisfying(VerbsException.class, e -> {
				assertThat(e.verb()).isEqualTo("ibv_query_device");
				assertThat(e.errno()).isEqualTo(Errno.ENOMEM);
			});
	}

	@Test
	void withoutAUsableQueryDeviceExSlotTheSlotIsNeverCalledAndIbvQueryDeviceAnswers()
			throws ReflectiveOperationException {
		// 1. the slot is NULL
		block.set(ADDRESS, PREFIX + Layouts.VCTX_QUERY_DEVICE_EX, MemorySegment.NULL);
		assertThat(DeviceQueries.queryDeviceEx(ctx, "stand-in", legacy).maxCqe()).isEqualTo(1024);
		// 2. the provider's verbs_context is too small to have query_device_ex (sz < 104
		// + sizeof(ibv_context))
		// (from here on the slot holds a stub answering EIO: reaching it would throw)
		block.set(ADDRESS, PREFIX + Layouts.VCTX_QUERY_DEVICE_EX, stub("queryDeviceExMustNotBeCalled",
				FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, ADDRESS, JAVA_LONG)));
		block.set(JAVA_LONG, PREFIX + Layouts.VCTX_SZ,
				-Layouts.VCTX_QUERY_DEVICE_EX + Layouts.IBV_CONTEXT.byteSize() - 8);
		assertThat(DeviceQueries.queryDeviceEx(ctx, "stand-in", legacy).maxCqe()).isEqualTo(1024);
		// 3. the context is not a verbs_context (abi_compat is not
		// __VERBS_ABI_IS_EXTENDED)
		block.set(JAVA_LONG, PREFIX + Layouts.VCTX_SZ, PREFIX + Layouts.IBV_CONTEXT.byteSize());
		ctx.set(JAVA_LONG, Layouts.CONTEXT_ABI_COMPAT, 0);
		assertThat(DeviceQueries.queryDeviceEx(ctx, "stand-in", legacy).maxCqe()).isEqualTo(1024);

		assertThat(EX_CALLS).isEmpty();
		assertThat(LEGACY_CALLS).hasSize(3).allMatch(LegacyCall::zeroed);
		// the guards were what kept the slot from being called: with an sz just large
		// enough it is
		ctx.set(JAVA_LONG, Layouts.CONTEXT_ABI_COMPAT, Layouts.VERBS_ABI_IS_EXTENDED);
		block.set(JAVA_LONG, PREFIX + Layouts.VCTX_SZ, -Layouts.VCTX_QUERY_DEVICE_EX + Layouts.IBV_CONTEXT.byteSize());
		assertThatThrownBy(() -> DeviceQueries.queryDeviceEx(ctx, "stand-in", legacy))
			.isInstanceOfSatisfying(VerbsException.class, e -> assertThat(e.errno()).isEqualTo(Errno.EIO));
	}

	/** In a slot that must not be reached: answers EIO, which the caller reports. */
	static int queryDeviceExMustNotBeCalled(MemorySegment c, MemorySegment input, MemorySegment attr, long size) {
		return Errno.EIO;
	}

}
