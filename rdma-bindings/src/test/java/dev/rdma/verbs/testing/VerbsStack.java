package dev.rdma.verbs.testing;

import java.util.EnumSet;
import java.util.function.Function;

import dev.rdma.verbs.CompletionChannel;
import dev.rdma.verbs.CompletionQueue;
import dev.rdma.verbs.Context;
import dev.rdma.verbs.MemoryRegion;
import dev.rdma.verbs.ProtectionDomain;
import dev.rdma.verbs.QueuePair;
import dev.rdma.verbs.WorkCompletionBuffer;

/**
 * One device's verbs objects for a device test: its own context, a completion channel, a
 * CQ on it, a PD, a memory region with local and remote access and a QP whose send and
 * receive CQ is that CQ, plus a buffer to poll it. A failure while creating them closes
 * what was created; {@link #close()} closes the context (and everything in it) and the
 * buffer. The ends of the rdma_cm tests ({@code cm.CmSide}) and of the ping-pong tests
 * ({@code exchange.PingPongSide}) extend it.
 */
public class VerbsStack implements AutoCloseable {

	public final Context context;

	public final CompletionChannel channel;

	public final CompletionQueue cq;

	public final ProtectionDomain pd;

	public final MemoryRegion mr;

	public final QueuePair qp;

	public final WorkCompletionBuffer buffer = new WorkCompletionBuffer(16);

	/**
	 * Opens {@code device} and creates the objects: a CQ of {@code cqEntries}, a region
	 * of {@code mrBytes}, and a QP with the attributes {@code qpAttributes} makes for the
	 * CQ.
	 */
	protected VerbsStack(String device, int cqEntries, long mrBytes,
			Function<CompletionQueue, QueuePair.Attributes> qpAttributes) {
		context = Context.open(device);
		try {
			channel = context.createCompletionChannel();
			cq = context.createCompletionQueue(cqEntries, channel, 0);
			pd = context.allocateProtectionDomain();
			mr = pd.registerMemory(mrBytes, EnumSet.of(MemoryRegion.Access.LOCAL_WRITE,
					MemoryRegion.Access.REMOTE_WRITE, MemoryRegion.Access.REMOTE_READ));
			qp = pd.createQueuePair(qpAttributes.apply(cq));
		}
		catch (RuntimeException e) {
			context.close();
			buffer.close();
			throw e;
		}
	}

	@Override
	public void close() {
		try {
			context.close();
		}
		finally {
			buffer.close();
		}
	}

}
