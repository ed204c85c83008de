package dev.rdma.verbs;

import java.util.EnumSet;

/**
 * A reliable-connected QP connected to itself over the device's IPv4 (RoCE v2) GID of
 * port 1, with one registered buffer split in send slots (lower half) and receive slots
 * (upper half): every send it posts arrives as a receive on the same QP. Produces real
 * completions for smoke tests, benchmarks and the sample application: public API for
 * applications that check a device end to end without a peer. Closing it closes the QP,
 * the MR and the PD (not the CQs, not the context). Thread-safety as {@link QueuePair}.
 */
public class LoopbackQueuePair implements AutoCloseable {

	public static final int PORT = 1;

	private final ProtectionDomain pd;

	private final MemoryRegion mr;

	private final QueuePair qp;

	private final int slotSize;

	// one work request per direction, reused under its own lock: any thread may post
	private final SendWorkRequest send = new SendWorkRequest();

	private final ReceiveWorkRequest recv = new ReceiveWorkRequest();

	public LoopbackQueuePair(Context context, CompletionQueue sendCq, CompletionQueue recvCq, int depth, int slotSize) {
		this.slotSize = slotSize;
		this.pd = context.allocateProtectionDomain();
		try {
			this.mr = pd.registerMemory((long) slotSize * depth * 2, EnumSet.of(MemoryRegion.Access.LOCAL_WRITE,
					MemoryRegion.Access.REMOTE_WRITE, MemoryRegion.Access.REMOTE_READ));
			this.qp = pd.createQueuePair(new QueuePair.Attributes(sendCq, recvCq, depth, depth, false));
			int gidIndex = context.findIpv4GidIndex(PORT);
			if (gidIndex < 0) {
				throw new IllegalStateException("no IPv4-mapped GID on " + context.deviceName() + " port " + PORT);
			}
			Gid gid = context.queryGid(PORT, gidIndex);
			qp.connect(PORT, gidIndex, gid, qp.qpNum());
		}
		catch (RuntimeException e) {
			pd.close();
			throw e;
		}
	}

	public QueuePair qp() {
		return qp;
	}

	public MemoryRegion mr() {
		return mr;
	}

	public int slotSize() {
		return slotSize;
	}

	/** Offset of receive slot {@code i} (the upper half of the buffer). */
	public long recvOffset(int i) {
		return mr.buffer().byteSize() / 2 + (long) i * slotSize;
	}

	/** Offset of send slot {@code i} (the lower half). */
	public long sendOffset(int i) {
		return (long) i * slotSize;
	}

	/** {@code ibv_post_recv} of receive slot {@code slot} (its whole size). */
	public void postRecv(long wrId, int slot) {
		synchronized (recv) {
			qp.postRecv(recv.wrId(wrId).buffer(mr, recvOffset(slot), slotSize));
		}
	}

	/**
	 * A signaled SEND (or SEND_WITH_IMM when {@code imm} is non-null) of {@code length}
	 * bytes from send slot ({@code ibv_post_send}).
	 */
	public void postSend(long wrId, int slot, int length, Integer imm) {
		synchronized (send) {
			send.wrId(wrId)
				.buffer(mr, sendOffset(slot), length)
				.opcode(imm == null ? QueuePair.SendOpcode.SEND : QueuePair.SendOpcode.SEND_WITH_IMM)
				.immediateData(imm == null ? 0 : imm);
			qp.postSend(send);
		}
	}

	@Override
	public void close() {
		pd.close();
	}

}
