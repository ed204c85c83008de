package dev.rdma.verbs;

import dev.rdma.verbs.efa.EfaWcFlag;
import dev.rdma.verbs.ffm.Libc;
import dev.rdma.verbs.cm.CmEventType;
import dev.rdma.verbs.cm.CmParameters;
import dev.rdma.verbs.ffm.Layouts;
import dev.rdma.verbs.ffm.RdmacmLayouts;

import java.io.IOException;
import java.lang.foreign.GroupLayout;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Proves every size and offset the binding uses against the installed C headers:
 * generates a C probe from {@link Layouts} (each struct's size, each member's offset and
 * size, the verbs_context-relative offsets) and from the enums (each constant's value),
 * compiles it with gcc against {@code <infiniband/verbs.h>} and
 * {@code <infiniband/efadv.h>}, runs it and compares.
 */
class LayoutConformanceTest {

	private static final Map<String, Long> JAVA = new LinkedHashMap<>();

	private static final List<String> C_LINES = new ArrayList<>();

	private static Map<String, Long> c;

	private static void expect(String key, long javaValue, String cExpression) {
		JAVA.put(key, javaValue);
		C_LINES.add("  printf(\"%s %lld\\n\", \"" + key + "\", (long long)(" + cExpression + "));");
	}

	@BeforeAll
	static void probe(@TempDir Path dir) throws Exception {
		List<GroupLayout> layouts = new ArrayList<>(Layouts.ALL);
		layouts.addAll(RdmacmLayouts.ALL); // librdmacm (rdma/rdma_cma.h) and the socket
											// addresses
		for (GroupLayout layout : layouts) {
			String type = Layouts.cType(layout);
			expect(type + " sizeof", layout.byteSize(), "sizeof(" + type + ")");
			expect(type + " alignof", layout.byteAlignment(), "_Alignof(" + type + ")");
			Layouts.members(layout).forEach((path, offSize) -> {
				expect(type + "." + path + " offset", offSize[0], "offsetof(" + type + ", " + path + ")");
				expect(type + "." + path + " size", offSize[1], "sizeof(((" + type + " *)0)->" + path + ")");
			});
		}
		Layouts.VERBS_CONTEXT_RELATIVE.forEach((member, rel) -> expect("verbs_context." + member + " - context", rel,
				"(long)offsetof(struct verbs_context, " + member
						+ ") - (long)offsetof(struct verbs_context, context)"));
		expect("sizeof(struct ibv_context)", Layouts.IBV_CONTEXT.byteSize(), "sizeof(struct ibv_context)");
		expect("__VERBS_ABI_IS_EXTENDED", Layouts.VERBS_ABI_IS_EXTENDED, "(long)__VERBS_ABI_IS_EXTENDED");
		// efadv_cq.wc_is_unsolicited (rdma-core 52+) follows wc_read_sgid: in a v44
		// header the struct ends there.
		expect("efadv_cq.wc_is_unsolicited offset", Layouts.EFADV_CQ_WC_IS_UNSOLICITED,
				"offsetof(struct efadv_cq, wc_read_sgid) + sizeof(void *)");

		for (WcStatus s : WcStatus.values()) {
			if (s != WcStatus.UNKNOWN) {
				expect("IBV_WC_" + s.name(), s.code(), "IBV_WC_" + s.name());
			}
		}
		for (WcOpcode o : WcOpcode.values()) {
			if (o != WcOpcode.UNKNOWN && o != WcOpcode.FLUSH) { // IBV_WC_FLUSH is
																// rdma-core 45+
				expect("IBV_WC_" + o.name(), o.code(), "IBV_WC_" + o.name());
			}
		}
		for (WcFlag f : WcFlag.values()) {
			expect("IBV_WC_" + f.name(), f.bit(), "IBV_WC_" + f.name());
		}
		for (WcExFlag f : WcExFlag.values()) {
			expect("IBV_WC_EX_WITH_" + f.name(), f.bit(), "IBV_WC_EX_WITH_" + f.name());
		}
		expect("IBV_WC_STANDARD_FLAGS", WcExFlag.STANDARD, "IBV_WC_STANDARD_FLAGS");
		expect("IBV_CREATE_CQ_SUP_WC_FLAGS", WcExFlag.SUPPORTED, "IBV_CREATE_CQ_SUP_WC_FLAGS");
		for (CqCreateFlag f : CqCreateFlag.values()) {
			expect("IBV_CREATE_CQ_ATTR_" + f.name(), f.bit(), "IBV_CREATE_CQ_ATTR_" + f.name());
		}
		expect("IBV_CQ_INIT_ATTR_MASK_FLAGS", CqInitAttributes.IBV_CQ_INIT_ATTR_MASK_FLAGS,
				"IBV_CQ_INIT_ATTR_MASK_FLAGS");
		expect("IBV_CQ_INIT_ATTR_MASK_PD", CqInitAttributes.IBV_CQ_INIT_ATTR_MASK_PD, "IBV_CQ_INIT_ATTR_MASK_PD");
		expect("EFADV_WC_EX_WITH_SGID", EfaWcFlag.SGID.bit(), "EFADV_WC_EX_WITH_SGID");
		for (AsyncEventType t : AsyncEventType.values()) {
			if (t != AsyncEventType.UNKNOWN) {
				expect("IBV_EVENT_" + t.name(), t.ordinal(), "IBV_EVENT_" + t.name());
			}
		}
		for (PortAttributes.PortState s : PortAttributes.PortState.values()) {
			if (s != PortAttributes.PortState.UNKNOWN) {
				expect("IBV_PORT_" + s.name(), s.ordinal(), "IBV_PORT_" + s.name());
			}
		}
		for (QueuePair.State s : QueuePair.State.values()) {
			if (s != QueuePair.State.UNKNOWN) {
				expect("IBV_QPS_" + s.name(), s.ordinal(), "IBV_QPS_" + s.name());
			}
		}
		for (QueuePair.SendOpcode o : QueuePair.SendOpcode.values()) {
			expect("IBV_WR_" + o.name(), o.code, "IBV_WR_" + o.name());
		}
		for (MemoryRegion.Access a : MemoryRegion.Access.values()) {
			expect("IBV_ACCESS_" + a.name(), a.bit, "IBV_ACCESS_" + a.name());
		}
		for (QueuePair.Type t : QueuePair.Type.values()) {
			expect("IBV_QPT_" + t.name(), t.code, "IBV_QPT_" + t.name());
		}
		for (GidEntry.Type t : GidEntry.Type.values()) {
			if (t != GidEntry.Type.UNKNOWN) {
				expect("IBV_GID_TYPE_" + t.name(), t.ordinal(), "IBV_GID_TYPE_" + t.name());
			}
		}
		expect("sizeof(struct ibv_grh)", QueuePair.GRH_BYTES, "sizeof(struct ibv_grh)");
		expect("IBV_QP_QKEY", QueuePairTransitions.QP_QKEY, "IBV_QP_QKEY");
		expect("IBV_QP_STATE", QueuePairTransitions.QP_STATE, "IBV_QP_STATE");
		expect("IBV_QP_ACCESS_FLAGS", QueuePairTransitions.QP_ACCESS_FLAGS, "IBV_QP_ACCESS_FLAGS");
		expect("IBV_QP_PKEY_INDEX", QueuePairTransitions.QP_PKEY_INDEX, "IBV_QP_PKEY_INDEX");
		expect("IBV_QP_PORT", QueuePairTransitions.QP_PORT, "IBV_QP_PORT");
		expect("IBV_QP_AV", QueuePairTransitions.QP_AV, "IBV_QP_AV");
		expect("IBV_QP_PATH_MTU", QueuePairTransitions.QP_PATH_MTU, "IBV_QP_PATH_MTU");
		expect("IBV_QP_TIMEOUT", QueuePairTransitions.QP_TIMEOUT, "IBV_QP_TIMEOUT");
		expect("IBV_QP_RETRY_CNT", QueuePairTransitions.QP_RETRY_CNT, "IBV_QP_RETRY_CNT");
		expect("IBV_QP_RNR_RETRY", QueuePairTransitions.QP_RNR_RETRY, "IBV_QP_RNR_RETRY");
		expect("IBV_QP_RQ_PSN", QueuePairTransitions.QP_RQ_PSN, "IBV_QP_RQ_PSN");
		expect("IBV_QP_MAX_QP_RD_ATOMIC", QueuePairTransitions.QP_MAX_QP_RD_ATOMIC, "IBV_QP_MAX_QP_RD_ATOMIC");
		expect("IBV_QP_MIN_RNR_TIMER", QueuePairTransitions.QP_MIN_RNR_TIMER, "IBV_QP_MIN_RNR_TIMER");
		expect("IBV_QP_SQ_PSN", QueuePairTransitions.QP_SQ_PSN, "IBV_QP_SQ_PSN");
		expect("IBV_QP_MAX_DEST_RD_ATOMIC", QueuePairTransitions.QP_MAX_DEST_RD_ATOMIC, "IBV_QP_MAX_DEST_RD_ATOMIC");
		expect("IBV_QP_DEST_QPN", QueuePairTransitions.QP_DEST_QPN, "IBV_QP_DEST_QPN");
		expect("IBV_SEND_SIGNALED", SendWorkRequest.Flag.SIGNALED.bit, "IBV_SEND_SIGNALED");
		expect("IBV_SEND_SOLICITED", SendWorkRequest.Flag.SOLICITED.bit, "IBV_SEND_SOLICITED");
		expect("IBV_SEND_INLINE", SendWorkRequest.Flag.INLINE.bit, "IBV_SEND_INLINE");
		expect("IBV_SRQ_MAX_WR", SharedReceiveQueue.IBV_SRQ_MAX_WR, "IBV_SRQ_MAX_WR");
		expect("IBV_SRQ_LIMIT", SharedReceiveQueue.IBV_SRQ_LIMIT, "IBV_SRQ_LIMIT");
		expect("IBV_QP_CAP", QueuePair.IBV_QP_CAP, "IBV_QP_CAP");
		expect("ops.post_srq_recv offset", Layouts.CONTEXT_POST_SRQ_RECV,
				"offsetof(struct ibv_context, ops.post_srq_recv)");
		expect("JDK interrupt signal (__SIGRTMAX - 2)", Libc.JDK_INTERRUPT_SIGNAL, "__SIGRTMAX - 2");
		expect("sizeof(struct sigaction)", Libc.SIGACTION_BYTES, "sizeof(struct sigaction)");
		expect("offsetof(struct sigaction, sa_handler)", Libc.SIGACTION_HANDLER,
				"offsetof(struct sigaction, sa_handler)");
		expect("offsetof(struct sigaction, sa_flags)", Libc.SIGACTION_FLAGS, "offsetof(struct sigaction, sa_flags)");
		expect("SA_RESTART", Libc.SA_RESTART, "SA_RESTART");
		expect("SIG_DFL", Libc.SIG_DFL, "(long)SIG_DFL");
		expect("SIG_IGN", Libc.SIG_IGN, "(long)SIG_IGN");
		expect("POLLIN", Libc.POLLIN, "POLLIN");
		expect("O_NONBLOCK", Libc.O_NONBLOCK, "O_NONBLOCK");
		expect("F_GETFL", Libc.F_GETFL, "F_GETFL");
		expect("F_SETFL", Libc.F_SETFL, "F_SETFL");
		expect("EFD_NONBLOCK", Libc.EFD_NONBLOCK, "EFD_NONBLOCK");
		expect("EFD_CLOEXEC", Libc.EFD_CLOEXEC, "EFD_CLOEXEC");
		expect("EPOLLIN", Libc.EPOLLIN, "EPOLLIN");
		expect("EPOLL_CLOEXEC", Libc.EPOLL_CLOEXEC, "EPOLL_CLOEXEC");
		expect("EPOLL_CTL_ADD", Libc.EPOLL_CTL_ADD, "EPOLL_CTL_ADD");
		expect("EPOLL_CTL_DEL", Libc.EPOLL_CTL_DEL, "EPOLL_CTL_DEL");
		for (var f : Errno.class.getFields()) {
			if (f.getType() == int.class) {
				expect(f.getName(), f.getInt(null), f.getName());
			}
		}

		// device attributes ex: enum ibv_device_cap_flags (the structs and
		// query_device_ex are in Layouts.ALL and
		// VERBS_CONTEXT_RELATIVE)
		for (DeviceCapability d : DeviceCapability.values()) {
			expect("IBV_DEVICE_" + d.name(), d.bit(), "IBV_DEVICE_" + d.name());
		}

		// librdmacm
		for (CmEventType t : CmEventType.values()) {
			if (t != CmEventType.UNKNOWN) {
				expect("RDMA_CM_EVENT_" + t.name(), t.code(), "RDMA_CM_EVENT_" + t.name());
			}
		}
		expect("RDMA_PS_TCP", RdmacmLayouts.RDMA_PS_TCP, "RDMA_PS_TCP");
		expect("RDMA_PS_UDP", RdmacmLayouts.RDMA_PS_UDP, "RDMA_PS_UDP");
		expect("RDMA_MAX_RESP_RES", RdmacmLayouts.RDMA_MAX_RESP_RES, "RDMA_MAX_RESP_RES");
		expect("RDMA_MAX_INIT_DEPTH", RdmacmLayouts.RDMA_MAX_INIT_DEPTH, "RDMA_MAX_INIT_DEPTH");
		expect("CmParameters.DEVICE_MAXIMUM", CmParameters.DEVICE_MAXIMUM, "RDMA_MAX_RESP_RES");
		expect("AF_INET", RdmacmLayouts.AF_INET, "AF_INET");
		expect("AF_INET6", RdmacmLayouts.AF_INET6, "AF_INET6");
		expect("rdma_conn_param.private_data_len max", 255,
				"(1 << (8 * sizeof(((struct rdma_conn_param *)0)->private_data_len))) - 1");

		Path cmHeader = Path.of("/usr/include/rdma/rdma_cma.h");
		assertThat(cmHeader).as("the librdmacm headers (apt-get install librdmacm-dev) are needed for this test")
			.exists();
		Path header = Path.of("/usr/include/infiniband/verbs.h");
		assertThat(header).as("the rdma-core headers (apt-get install libibverbs-dev) are needed for this test")
			.exists();
		StringBuilder src = new StringBuilder("""
				#include <stddef.h>
				#include <stdio.h>
				#include <errno.h>
				#include <fcntl.h>
				#include <poll.h>
				#include <signal.h>
				#include <sys/eventfd.h>
				#include <sys/epoll.h>
				#include <infiniband/verbs.h>
				#include <infiniband/efadv.h>
				#include <netinet/in.h>
				#include <sys/socket.h>
				#include <rdma/rdma_cma.h>
				int main(void) {
				""");
		C_LINES.forEach(l -> src.append(l).append('\n'));
		src.append("  return 0;\n}\n");
		Path c = dir.resolve("probe.c");
		Files.writeString(c, src);
		Path exe = dir.resolve("probe");
		String out = run(dir, "gcc", "-std=gnu11", "-Wall", "-Werror", "-o", exe.toString(), c.toString());
		assertThat(Files.exists(exe)).as("gcc failed:\n" + out).isTrue();
		LayoutConformanceTest.c = new LinkedHashMap<>();
		for (String line : run(dir, exe.toString()).split("\n")) {
			int at = line.lastIndexOf(' ');
			LayoutConformanceTest.c.put(line.substring(0, at), Long.parseLong(line.substring(at + 1).trim()));
		}
	}

	private static String run(Path dir, String... command) throws IOException, InterruptedException {
		Process p = new ProcessBuilder(command).directory(dir.toFile()).redirectErrorStream(true).start();
		String out = new String(p.getInputStream().readAllBytes());
		assertThat(p.waitFor(60, TimeUnit.SECONDS)).isTrue();
		assertThat(p.exitValue()).as(String.join(" ", command) + ":\n" + out).isZero();
		return out;
	}

	@Test
	void everySizeOffsetAndConstantEqualsTheCHeaders() {
		assertThat(c).hasSameSizeAs(JAVA);
		List<String> mismatches = new ArrayList<>();
		JAVA.forEach((key, value) -> {
			if (!value.equals(c.get(key))) {
				mismatches.add(key + ": Java " + value + ", C " + c.get(key));
			}
		});
		assertThat(mismatches).as("Java layouts/constants that differ from the installed headers").isEmpty();
		assertThat(JAVA.size()).as("entries compared").isGreaterThan(400);
	}

	@Test
	void keyOffsetsMatchTheNativeAbiNotes() {
		assertThat(Layouts.CONTEXT_POLL_CQ).isEqualTo(96);
		assertThat(Layouts.CONTEXT_REQ_NOTIFY_CQ).isEqualTo(104);
		assertThat(Layouts.CONTEXT_NUM_COMP_VECTORS).isEqualTo(272);
		assertThat(Layouts.CONTEXT_ABI_COMPAT).isEqualTo(320);
		assertThat(Layouts.CQ_CQE).isEqualTo(28);
		assertThat(Layouts.IBV_CQ_EX.byteSize()).isEqualTo(288);
		assertThat(Layouts.off(Layouts.IBV_CQ_EX, "start_poll")).isEqualTo(144);
		assertThat(Layouts.off(Layouts.IBV_CQ_EX, "read_completion_wallclock_ns")).isEqualTo(280);
		assertThat(Layouts.WC_SIZE).isEqualTo(48);
		assertThat(Layouts.IBV_CQ_INIT_ATTR_EX.byteSize()).isEqualTo(56);
		assertThat(Layouts.VCTX_CREATE_CQ_EX).isEqualTo(-120);
		// packed on x86_64: data right after events
		assertThat(Layouts.EPOLL_EVENT.byteSize()).isEqualTo(12);
		assertThat(Layouts.off(Layouts.EPOLL_EVENT, "data")).isEqualTo(4);
	}

	@Test
	void librdmacmOffsetsAsGccPrintedThem() {
		assertThat(RdmacmLayouts.SOCKADDR_IN.byteSize()).isEqualTo(16);
		assertThat(RdmacmLayouts.SOCKADDR_IN6.byteSize()).isEqualTo(28);
		assertThat(RdmacmLayouts.SOCKADDR_STORAGE.byteSize()).isEqualTo(128);
		assertThat(RdmacmLayouts.RDMA_CONN_PARAM.byteSize()).isEqualTo(24);
		assertThat(RdmacmLayouts.EVENT_CONN).isEqualTo(24);
		assertThat(RdmacmLayouts.ID_SRC_ADDR).isEqualTo(32);
		assertThat(RdmacmLayouts.ID_DST_ADDR).isEqualTo(160);
	}

	@Test
	void deviceAttributesExOffsets() { // device attributes ex: what ibv_query_device_ex
										// reads, as gcc printed them
		assertThat(Layouts.IBV_DEVICE_ATTR_EX.byteSize()).isEqualTo(400);
		assertThat(Layouts.off(Layouts.IBV_DEVICE_ATTR_EX, "completion_timestamp_mask")).isEqualTo(264);
		assertThat(Layouts.off(Layouts.IBV_DEVICE_ATTR_EX, "hca_core_clock")).isEqualTo(272);
		assertThat(Layouts.off(Layouts.IBV_DEVICE_ATTR_EX, "device_cap_flags_ex")).isEqualTo(280);
		assertThat(Layouts.VCTX_QUERY_DEVICE_EX).isEqualTo(-104);
	}

}
