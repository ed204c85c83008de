package dev.rdma.verbs.testing;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

import dev.rdma.verbs.ffm.Layouts;
import org.junit.jupiter.api.extension.AfterEachCallback;
import org.junit.jupiter.api.extension.BeforeEachCallback;
import org.junit.jupiter.api.extension.ExtensionContext;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The stand-in CQ of a host test
 * ({@code @RegisterExtension final StandInCq standIn = new StandInCq();}): before each
 * test, {@link StandInLibrary}'s record cleared and fresh memory laid out as
 * {@code struct ibv_cq_ex} and {@code struct efadv_cq} with the stand-in's functions
 * installed (in a shared arena: the stand-in is polled from other threads too); after
 * each test, no call may have come with a wrong CQ/efadv_cq pointer or poll attribute,
 * and the memory is freed.
 */
public final class StandInCq implements BeforeEachCallback, AfterEachCallback {

	/**
	 * The stand-in's destroy function (ibv_destroy_cq's signature; records "destroy_cq").
	 */
	public static final MemorySegment DESTROY = StandInLibrary.fn("si_destroy_cq");

	private Arena arena;

	private MemorySegment cq;

	private MemorySegment efadv;

	@Override
	public void beforeEach(ExtensionContext extension) {
		StandInLibrary.clear();
		arena = Arena.ofShared();
		cq = arena.allocate(Layouts.IBV_CQ_EX);
		efadv = arena.allocate(24, 8);
		StandInLibrary.install(cq, efadv);
	}

	@Override
	public void afterEach(ExtensionContext extension) {
		arena.close();
		assertThat(StandInLibrary.badCalls()).as("calls with a wrong CQ/efadv_cq pointer or poll attribute").isZero();
	}

	/** The {@code struct ibv_cq_ex} of this test. */
	public MemorySegment cq() {
		return cq;
	}

	/** The {@code struct efadv_cq} of this test. */
	public MemorySegment efadv() {
		return efadv;
	}

}
