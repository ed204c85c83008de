package dev.rdma.verbs.ffm;

import java.lang.foreign.GroupLayout;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.StructLayout;
import java.lang.foreign.UnionLayout;
import java.util.List;

import static dev.rdma.verbs.ffm.Layouts.bytes;
import static dev.rdma.verbs.ffm.Layouts.ptr;
import static dev.rdma.verbs.ffm.Layouts.u16;
import static dev.rdma.verbs.ffm.Layouts.u32;
import static dev.rdma.verbs.ffm.Layouts.u8;

/**
 * Hand-written layouts of the librdmacm structs ({@code <rdma/rdma_cma.h>}) and of the
 * socket addresses they embed (x86_64, LP64, glibc), with the same naming rules as
 * {@link Layouts}: every layout and member is named after its C counterpart, members of
 * an anonymous union live in a group named {@code anon_...}, and
 * {@code LayoutConformanceTest} proves every size and offset against the installed
 * headers with gcc.
 */
public final class RdmacmLayouts {

	private RdmacmLayouts() {
	}

	// ---------------------------------------------------------------- socket addresses

	/** {@code AF_INET} */
	public static final int AF_INET = 2;

	/** {@code AF_INET6} */
	public static final int AF_INET6 = 10;

	/** {@code struct sockaddr} (16 bytes) */
	public static final StructLayout SOCKADDR = Layouts.struct("sockaddr", u16("sa_family"), bytes("sa_data", 14));

	/** {@code struct in_addr} */
	public static final StructLayout IN_ADDR = Layouts.struct("in_addr", u32("s_addr"));

	/** {@code struct sockaddr_in}: port and address in network byte order */
	public static final StructLayout SOCKADDR_IN = Layouts.struct("sockaddr_in", u16("sin_family"), u16("sin_port"),
			IN_ADDR.withName("sin_addr"), bytes("sin_zero", 8));

	/** {@code struct in6_addr} (a union of byte, u16 and u32 arrays, 4-byte aligned) */
	public static final StructLayout IN6_ADDR = Layouts.struct("in6_addr", bytes("s6_addr", 16).withByteAlignment(4));

	/** {@code struct sockaddr_in6} */
	public static final StructLayout SOCKADDR_IN6 = Layouts.struct("sockaddr_in6", u16("sin6_family"), u16("sin6_port"),
			u32("sin6_flowinfo"), IN6_ADDR.withName("sin6_addr"), u32("sin6_scope_id"));

	/** {@code struct sockaddr_storage} (128 bytes, 8-byte aligned) */
	public static final StructLayout SOCKADDR_STORAGE = Layouts.struct("sockaddr_storage", u16("ss_family"),
			bytes("__ss_padding", 118), java.lang.foreign.ValueLayout.JAVA_LONG.withName("__ss_align"));

	// ---------------------------------------------------------------- rdma_cma.h

	/** {@code enum rdma_port_space}: RDMA_PS_TCP (reliable connected) */
	public static final int RDMA_PS_TCP = 0x0106;

	/** {@code enum rdma_port_space}: RDMA_PS_UDP (unreliable datagram) */
	public static final int RDMA_PS_UDP = 0x0111;

	/** {@code RDMA_MAX_RESP_RES}: "as many as the device allows" */
	public static final int RDMA_MAX_RESP_RES = 0xFF;

	/** {@code RDMA_MAX_INIT_DEPTH}: "as many as the device allows" */
	public static final int RDMA_MAX_INIT_DEPTH = 0xFF;

	public static final StructLayout RDMA_IB_ADDR = Layouts.struct("rdma_ib_addr", Layouts.IBV_GID.withName("sgid"),
			Layouts.IBV_GID.withName("dgid"), u16("pkey"));

	public static final StructLayout RDMA_ADDR = Layouts.struct("rdma_addr",
			Layouts.union("anon_src", SOCKADDR.withName("src_addr"), SOCKADDR_IN.withName("src_sin"),
					SOCKADDR_IN6.withName("src_sin6"), SOCKADDR_STORAGE.withName("src_storage")),
			Layouts.union("anon_dst", SOCKADDR.withName("dst_addr"), SOCKADDR_IN.withName("dst_sin"),
					SOCKADDR_IN6.withName("dst_sin6"), SOCKADDR_STORAGE.withName("dst_storage")),
			Layouts.union("addr", RDMA_IB_ADDR.withName("ibaddr")));

	public static final StructLayout RDMA_ROUTE = Layouts.struct("rdma_route", RDMA_ADDR.withName("addr"),
			ptr("path_rec"), u32("num_paths"));

	public static final StructLayout RDMA_EVENT_CHANNEL = Layouts.struct("rdma_event_channel", u32("fd"));

	public static final StructLayout RDMA_CM_ID = Layouts.struct("rdma_cm_id", ptr("verbs"), ptr("channel"),
			ptr("context"), ptr("qp"), RDMA_ROUTE.withName("route"), u32("ps"), u8("port_num"), ptr("event"),
			ptr("send_cq_channel"), ptr("send_cq"), ptr("recv_cq_channel"), ptr("recv_cq"), ptr("srq"), ptr("pd"),
			u32("qp_type"));

	public static final StructLayout RDMA_CONN_PARAM = Layouts.struct("rdma_conn_param", ptr("private_data"),
			u8("private_data_len"), u8("responder_resources"), u8("initiator_depth"), u8("flow_control"),
			u8("retry_count"), u8("rnr_retry_count"), u8("srq"), u32("qp_num"));

	public static final StructLayout RDMA_UD_PARAM = Layouts.struct("rdma_ud_param", ptr("private_data"),
			u8("private_data_len"), Layouts.IBV_AH_ATTR.withName("ah_attr"), u32("qp_num"), u32("qkey"));

	public static final UnionLayout RDMA_CM_EVENT_PARAM = Layouts.union("param", RDMA_CONN_PARAM.withName("conn"),
			RDMA_UD_PARAM.withName("ud"));

	public static final StructLayout RDMA_CM_EVENT = Layouts.struct("rdma_cm_event", ptr("id"), ptr("listen_id"),
			u32("event"), u32("status"), RDMA_CM_EVENT_PARAM);

	// offsets the binding uses

	public static final long CHANNEL_FD = Layouts.off(RDMA_EVENT_CHANNEL, "fd");

	public static final long ID_VERBS = Layouts.off(RDMA_CM_ID, "verbs");

	public static final long ID_PORT_NUM = Layouts.off(RDMA_CM_ID, "port_num");

	public static final long ID_SRC_ADDR = Layouts.off(RDMA_CM_ID, "route", "addr", "anon_src", "src_storage");

	public static final long ID_DST_ADDR = Layouts.off(RDMA_CM_ID, "route", "addr", "anon_dst", "dst_storage");

	public static final long ID_SGID = Layouts.off(RDMA_CM_ID, "route", "addr", "addr", "ibaddr", "sgid");

	public static final long ID_DGID = Layouts.off(RDMA_CM_ID, "route", "addr", "addr", "ibaddr", "dgid");

	public static final long EVENT_ID = Layouts.off(RDMA_CM_EVENT, "id");

	public static final long EVENT_LISTEN_ID = Layouts.off(RDMA_CM_EVENT, "listen_id");

	public static final long EVENT_EVENT = Layouts.off(RDMA_CM_EVENT, "event");

	public static final long EVENT_STATUS = Layouts.off(RDMA_CM_EVENT, "status");

	public static final long EVENT_CONN = Layouts.off(RDMA_CM_EVENT, "param", "conn");

	/** Every layout above, for the conformance test. */
	public static final List<GroupLayout> ALL = List.of(SOCKADDR, IN_ADDR, SOCKADDR_IN, IN6_ADDR, SOCKADDR_IN6,
			SOCKADDR_STORAGE, RDMA_IB_ADDR, RDMA_ADDR, RDMA_ROUTE, RDMA_EVENT_CHANNEL, RDMA_CM_ID, RDMA_CONN_PARAM,
			RDMA_UD_PARAM, RDMA_CM_EVENT);

}
