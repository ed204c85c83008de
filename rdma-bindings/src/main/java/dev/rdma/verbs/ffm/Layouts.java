package dev.rdma.verbs.ffm;

import java.lang.foreign.GroupLayout;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemoryLayout.PathElement;
import java.lang.foreign.SequenceLayout;
import java.lang.foreign.StructLayout;
import java.lang.foreign.UnionLayout;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static java.lang.foreign.ValueLayout.JAVA_SHORT;

/**
 * Hand-written layouts of the rdma-core structs this binding reads or writes (x86_64,
 * LP64, glibc).
 *
 * <p>
 * Every layout is named after its C struct, every member after its C field, so that
 * {@code LayoutConformanceTest} can generate a C probe that prints
 * {@code offsetof}/{@code sizeof} for each of them and compare. Members of an anonymous C
 * union live in a group whose name starts with {@code anon_}; the probe leaves that name
 * out of the C path. Padding is inserted by {@link #struct} from natural alignment,
 * exactly as the C compiler does.
 *
 * <p>
 * Offsets that are relative to a {@code struct ibv_context *} but lie in
 * {@code struct verbs_context} before it are in {@link #VERBS_CONTEXT_RELATIVE}.
 */
public final class Layouts {

	private Layouts() {
	}

	public static final ValueLayout.OfInt U32 = JAVA_INT;

	public static final ValueLayout.OfLong U64 = JAVA_LONG;

	public static final ValueLayout.OfShort U16 = JAVA_SHORT;

	public static final ValueLayout.OfByte U8 = JAVA_BYTE;

	public static final MemoryLayout PTHREAD_MUTEX = MemoryLayout.sequenceLayout(5, JAVA_LONG); // 40
																								// bytes,
																								// align
																								// 8

	public static final MemoryLayout PTHREAD_COND = MemoryLayout.sequenceLayout(6, JAVA_LONG); // 48
																								// bytes,
																								// align
																								// 8

	/**
	 * Lays out {@code members} in C order, inserting the padding the C compiler inserts.
	 */
	public static StructLayout struct(String name, MemoryLayout... members) {
		List<MemoryLayout> laid = new ArrayList<>();
		long offset = 0;
		long maxAlign = 1;
		for (MemoryLayout member : members) {
			long align = member.byteAlignment();
			maxAlign = Math.max(maxAlign, align);
			long pad = (align - offset % align) % align;
			if (pad > 0) {
				laid.add(MemoryLayout.paddingLayout(pad));
				offset += pad;
			}
			laid.add(member);
			offset += member.byteSize();
		}
		long tail = (maxAlign - offset % maxAlign) % maxAlign;
		if (tail > 0) {
			laid.add(MemoryLayout.paddingLayout(tail));
		}
		return MemoryLayout.structLayout(laid.toArray(MemoryLayout[]::new)).withName(name);
	}

	public static UnionLayout union(String name, MemoryLayout... members) {
		return MemoryLayout.unionLayout(members).withName(name);
	}

	static MemoryLayout ptr(String name) {
		return ADDRESS.withName(name);
	}

	static MemoryLayout u64(String name) {
		return JAVA_LONG.withName(name);
	}

	static MemoryLayout u32(String name) {
		return JAVA_INT.withName(name);
	}

	static MemoryLayout u16(String name) {
		return JAVA_SHORT.withName(name);
	}

	static MemoryLayout u8(String name) {
		return JAVA_BYTE.withName(name);
	}

	static SequenceLayout bytes(String name, long n) {
		return MemoryLayout.sequenceLayout(n, JAVA_BYTE).withName(name);
	}

	// ---------------------------------------------------------------- struct ibv_context

	private static final String[] CONTEXT_OPS = { "_compat_query_device", "_compat_query_port", "_compat_alloc_pd",
			"_compat_dealloc_pd", "_compat_reg_mr", "_compat_rereg_mr", "_compat_dereg_mr", "alloc_mw", "bind_mw",
			"dealloc_mw", "_compat_create_cq", "poll_cq", "req_notify_cq", "_compat_cq_event", "_compat_resize_cq",
			"_compat_destroy_cq", "_compat_create_srq", "_compat_modify_srq", "_compat_query_srq",
			"_compat_destroy_srq", "post_srq_recv", "_compat_create_qp", "_compat_query_qp", "_compat_modify_qp",
			"_compat_destroy_qp", "post_send", "post_recv", "_compat_create_ah", "_compat_destroy_ah",
			"_compat_attach_mcast", "_compat_detach_mcast", "_compat_async_event" };

	public static final StructLayout IBV_CONTEXT_OPS = struct("ibv_context_ops",
			java.util.Arrays.stream(CONTEXT_OPS).map(Layouts::ptr).toArray(MemoryLayout[]::new));

	public static final StructLayout IBV_CONTEXT = struct("ibv_context", ptr("device"), IBV_CONTEXT_OPS.withName("ops"),
			u32("cmd_fd"), u32("async_fd"), u32("num_comp_vectors"), PTHREAD_MUTEX.withName("mutex"),
			ptr("abi_compat"));

	public static final long CONTEXT_DEVICE = off(IBV_CONTEXT, "device");

	public static final long CONTEXT_POLL_CQ = off(IBV_CONTEXT, "ops", "poll_cq");

	public static final long CONTEXT_REQ_NOTIFY_CQ = off(IBV_CONTEXT, "ops", "req_notify_cq");

	public static final long CONTEXT_POST_SEND = off(IBV_CONTEXT, "ops", "post_send");

	public static final long CONTEXT_POST_RECV = off(IBV_CONTEXT, "ops", "post_recv");

	/** {@code ops.post_srq_recv}, behind the inline {@code ibv_post_srq_recv}. */
	public static final long CONTEXT_POST_SRQ_RECV = off(IBV_CONTEXT, "ops", "post_srq_recv");

	public static final long CONTEXT_ASYNC_FD = off(IBV_CONTEXT, "async_fd");

	public static final long CONTEXT_NUM_COMP_VECTORS = off(IBV_CONTEXT, "num_comp_vectors");

	public static final long CONTEXT_ABI_COMPAT = off(IBV_CONTEXT, "abi_compat");

	/**
	 * Members of {@code struct verbs_context} as (negative) offsets from the
	 * {@code struct ibv_context} that is its last member. {@code verbs_context} grows at
	 * the front, so these never change between rdma-core versions. Keys are the C member
	 * names; the conformance test checks each against
	 * {@code offsetof(verbs_context, member) - offsetof(verbs_context, context)}.
	 */
	public static final Map<String, Long> VERBS_CONTEXT_RELATIVE = Map.of("query_port", -320L, "modify_cq", -184L,
			"alloc_parent_domain", -208L, "create_cq_ex", -120L, "query_device_ex", -104L, // device
																							// attributes
																							// ex
																							// (ibv_query_device_ex)
			"priv", -112L, "sz", -8L);

	public static final long VCTX_QUERY_PORT = VERBS_CONTEXT_RELATIVE.get("query_port");

	public static final long VCTX_CREATE_CQ_EX = VERBS_CONTEXT_RELATIVE.get("create_cq_ex");

	public static final long VCTX_ALLOC_PARENT_DOMAIN = VERBS_CONTEXT_RELATIVE.get("alloc_parent_domain");

	public static final long VCTX_SZ = VERBS_CONTEXT_RELATIVE.get("sz");

	/** {@code verbs_context.query_device_ex}: device attributes ex. */
	public static final long VCTX_QUERY_DEVICE_EX = VERBS_CONTEXT_RELATIVE.get("query_device_ex");

	/**
	 * {@code (void *)-1}: {@code ibv_context.abi_compat} of a context that is a
	 * {@code verbs_context}.
	 */
	public static final long VERBS_ABI_IS_EXTENDED = -1L;

	// ---------------------------------------------------------------- devices

	public static final StructLayout IBV_DEVICE = struct("ibv_device", bytes("_ops", 16).withByteAlignment(8),
			u32("node_type"), u32("transport_type"), bytes("name", 64), bytes("dev_name", 64), bytes("dev_path", 256),
			bytes("ibdev_path", 256));

	public static final StructLayout IBV_DEVICE_ATTR = struct("ibv_device_attr", bytes("fw_ver", 64), u64("node_guid"),
			u64("sys_image_guid"), u64("max_mr_size"), u64("page_size_cap"), u32("vendor_id"), u32("vendor_part_id"),
			u32("hw_ver"), u32("max_qp"), u32("max_qp_wr"), u32("device_cap_flags"), u32("max_sge"), u32("max_sge_rd"),
			u32("max_cq"), u32("max_cqe"), u32("max_mr"), u32("max_pd"), u32("max_qp_rd_atom"), u32("max_ee_rd_atom"),
			u32("max_res_rd_atom"), u32("max_qp_init_rd_atom"), u32("max_ee_init_rd_atom"), u32("atomic_cap"),
			u32("max_ee"), u32("max_rdd"), u32("max_mw"), u32("max_raw_ipv6_qp"), u32("max_raw_ethy_qp"),
			u32("max_mcast_grp"), u32("max_mcast_qp_attach"), u32("max_total_mcast_qp_attach"), u32("max_ah"),
			u32("max_fmr"), u32("max_map_per_fmr"), u32("max_srq"), u32("max_srq_wr"), u32("max_srq_sge"),
			u16("max_pkeys"), u8("local_ca_ack_delay"), u8("phys_port_cnt"));

	public static final StructLayout IBV_PORT_ATTR = struct("ibv_port_attr", u32("state"), u32("max_mtu"),
			u32("active_mtu"), u32("gid_tbl_len"), u32("port_cap_flags"), u32("max_msg_sz"), u32("bad_pkey_cntr"),
			u32("qkey_viol_cntr"), u16("pkey_tbl_len"), u16("lid"), u16("sm_lid"), u8("lmc"), u8("max_vl_num"),
			u8("sm_sl"), u8("subnet_timeout"), u8("init_type_reply"), u8("active_width"), u8("active_speed"),
			u8("phys_state"), u8("link_layer"), u8("flags"), u16("port_cap_flags2"));

	public static final UnionLayout IBV_GID = union("ibv_gid", bytes("raw", 16),
			struct("global", u64("subnet_prefix"), u64("interface_id")));

	/** {@code struct ibv_gid_entry} of {@code ibv_query_gid_ex}. */
	public static final StructLayout IBV_GID_ENTRY = struct("ibv_gid_entry", IBV_GID.withName("gid"), u32("gid_index"),
			u32("port_num"), u32("gid_type"), u32("ndev_ifindex"));

	public static final StructLayout IBV_ASYNC_EVENT = struct("ibv_async_event",
			union("element", ptr("cq"), ptr("qp"), ptr("srq"), ptr("wq"), u32("port_num")), u32("event_type"));

	// ---------------------------------------------------------------- device attributes
	// ex (ibv_query_device_ex)

	public static final StructLayout IBV_QUERY_DEVICE_EX_INPUT = struct("ibv_query_device_ex_input", u32("comp_mask"));

	/**
	 * {@code struct ibv_device_attr_ex}, whole (400 bytes in rdma-core 44 and current):
	 * its size is the {@code attr_size} the binding passes to {@code query_device_ex}, as
	 * the inline does with {@code sizeof(*attr)}; libibverbs fills only the members that
	 * fit in {@code attr_size}.
	 */
	public static final StructLayout IBV_DEVICE_ATTR_EX = struct("ibv_device_attr_ex",
			IBV_DEVICE_ATTR.withName("orig_attr"), u32("comp_mask"),
			struct("ibv_odp_caps", u64("general_caps"),
					struct("per_transport_caps", u32("rc_odp_caps"), u32("uc_odp_caps"), u32("ud_odp_caps"))
						.withName("per_transport_caps"))
				.withName("odp_caps"),
			u64("completion_timestamp_mask"), u64("hca_core_clock"), u64("device_cap_flags_ex"),
			struct("ibv_tso_caps", u32("max_tso"), u32("supported_qpts")).withName("tso_caps"),
			struct("ibv_rss_caps", u32("supported_qpts"), u32("max_rwq_indirection_tables"),
					u32("max_rwq_indirection_table_size"), u64("rx_hash_fields_mask"), u8("rx_hash_function"))
				.withName("rss_caps"),
			u32("max_wq_type_rq"),
			struct("ibv_packet_pacing_caps", u32("qp_rate_limit_min"), u32("qp_rate_limit_max"), u32("supported_qpts"))
				.withName("packet_pacing_caps"),
			u32("raw_packet_caps"),
			struct("ibv_tm_caps", u32("max_rndv_hdr_size"), u32("max_num_tags"), u32("flags"), u32("max_ops"),
					u32("max_sge"))
				.withName("tm_caps"),
			struct("ibv_cq_moderation_caps", u16("max_cq_count"), u16("max_cq_period")).withName("cq_mod_caps"),
			u64("max_dm_size"), struct("ibv_pci_atomic_caps", u16("fetch_add"), u16("swap"), u16("compare_swap"))
				.withName("pci_atomic_caps"),
			u32("xrc_odp_caps"), u32("phys_port_cnt_ex"));

	// ---------------------------------------------------------------- completion channel
	// and CQs

	public static final StructLayout IBV_COMP_CHANNEL = struct("ibv_comp_channel", ptr("context"), u32("fd"),
			u32("refcnt"));

	public static final long CHANNEL_FD = off(IBV_COMP_CHANNEL, "fd");

	private static MemoryLayout[] cqHead() {
		return new MemoryLayout[] { ptr("context"), ptr("channel"), ptr("cq_context"), u32("handle"), u32("cqe"),
				PTHREAD_MUTEX.withName("mutex"), PTHREAD_COND.withName("cond"), u32("comp_events_completed"),
				u32("async_events_completed") };
	}

	public static final StructLayout IBV_CQ = struct("ibv_cq", cqHead());

	public static final long CQ_CONTEXT = off(IBV_CQ, "context");

	public static final long CQ_CQE = off(IBV_CQ, "cqe");

	public static final StructLayout IBV_CQ_EX;

	static {
		List<MemoryLayout> m = new ArrayList<>(List.of(cqHead()));
		m.addAll(List.of(u32("comp_mask"), u32("status"), u64("wr_id"), ptr("start_poll"), ptr("next_poll"),
				ptr("end_poll"), ptr("read_opcode"), ptr("read_vendor_err"), ptr("read_byte_len"), ptr("read_imm_data"),
				ptr("read_qp_num"), ptr("read_src_qp"), ptr("read_wc_flags"), ptr("read_slid"), ptr("read_sl"),
				ptr("read_dlid_path_bits"), ptr("read_completion_ts"), ptr("read_cvlan"), ptr("read_flow_tag"),
				ptr("read_tm_info"), ptr("read_completion_wallclock_ns")));
		IBV_CQ_EX = struct("ibv_cq_ex", m.toArray(MemoryLayout[]::new));
	}

	public static final long CQ_EX_STATUS = off(IBV_CQ_EX, "status");

	public static final long CQ_EX_WR_ID = off(IBV_CQ_EX, "wr_id");

	public static final StructLayout IBV_WC = struct("ibv_wc", u64("wr_id"), u32("status"), u32("opcode"),
			u32("vendor_err"), u32("byte_len"), union("anon_imm", u32("imm_data"), u32("invalidated_rkey")),
			u32("qp_num"), u32("src_qp"), u32("wc_flags"), u16("pkey_index"), u16("slid"), u8("sl"),
			u8("dlid_path_bits"));

	public static final long WC_SIZE = IBV_WC.byteSize();

	public static final long WC_WR_ID = off(IBV_WC, "wr_id");

	public static final long WC_STATUS = off(IBV_WC, "status");

	public static final long WC_OPCODE = off(IBV_WC, "opcode");

	public static final long WC_VENDOR_ERR = off(IBV_WC, "vendor_err");

	public static final long WC_BYTE_LEN = off(IBV_WC, "byte_len");

	public static final long WC_IMM_DATA = off(IBV_WC, "anon_imm", "imm_data");

	public static final long WC_QP_NUM = off(IBV_WC, "qp_num");

	public static final long WC_SRC_QP = off(IBV_WC, "src_qp");

	public static final long WC_WC_FLAGS = off(IBV_WC, "wc_flags");

	public static final long WC_PKEY_INDEX = off(IBV_WC, "pkey_index");

	public static final long WC_SLID = off(IBV_WC, "slid");

	public static final long WC_SL = off(IBV_WC, "sl");

	public static final long WC_DLID_PATH_BITS = off(IBV_WC, "dlid_path_bits");

	public static final StructLayout IBV_CQ_INIT_ATTR_EX = struct("ibv_cq_init_attr_ex", u32("cqe"), ptr("cq_context"),
			ptr("channel"), u32("comp_vector"), u64("wc_flags"), u32("comp_mask"), u32("flags"), ptr("parent_domain"));

	public static final StructLayout IBV_POLL_CQ_ATTR = struct("ibv_poll_cq_attr", u32("comp_mask"));

	public static final StructLayout IBV_WC_TM_INFO = struct("ibv_wc_tm_info", u64("tag"), u32("priv"));

	// ---------------------------------------------------------------- EFA (rdma-core 44
	// layout; see EfaCompletionQueue)

	public static final StructLayout EFADV_CQ_INIT_ATTR = struct("efadv_cq_init_attr", u64("comp_mask"),
			u64("wc_flags"));

	public static final StructLayout EFADV_CQ = struct("efadv_cq", u64("comp_mask"), ptr("wc_read_sgid"));

	/**
	 * {@code efadv_cq.wc_is_unsolicited}: rdma-core 52+ only, absent from the installed
	 * v44 header.
	 */
	public static final long EFADV_CQ_WC_IS_UNSOLICITED = 16;

	// ---------------------------------------------------------------- PD, MR, QP

	public static final StructLayout IBV_MR = struct("ibv_mr", ptr("context"), ptr("pd"), ptr("addr"), u64("length"),
			u32("handle"), u32("lkey"), u32("rkey"));

	public static final StructLayout IBV_QP = struct("ibv_qp", ptr("context"), ptr("qp_context"), ptr("pd"),
			ptr("send_cq"), ptr("recv_cq"), ptr("srq"), u32("handle"), u32("qp_num"), u32("state"), u32("qp_type"),
			PTHREAD_MUTEX.withName("mutex"), PTHREAD_COND.withName("cond"), u32("events_completed"));

	public static final long QP_CONTEXT = off(IBV_QP, "context");

	public static final StructLayout IBV_QP_CAP = struct("ibv_qp_cap", u32("max_send_wr"), u32("max_recv_wr"),
			u32("max_send_sge"), u32("max_recv_sge"), u32("max_inline_data"));

	public static final StructLayout IBV_QP_INIT_ATTR = struct("ibv_qp_init_attr", ptr("qp_context"), ptr("send_cq"),
			ptr("recv_cq"), ptr("srq"), IBV_QP_CAP.withName("cap"), u32("qp_type"), u32("sq_sig_all"));

	/** {@code struct ibv_srq_attr} ({@code ibv_modify_srq}, {@code ibv_query_srq}). */
	public static final StructLayout IBV_SRQ_ATTR = struct("ibv_srq_attr", u32("max_wr"), u32("max_sge"),
			u32("srq_limit"));

	/** {@code struct ibv_srq_init_attr} ({@code ibv_create_srq}). */
	public static final StructLayout IBV_SRQ_INIT_ATTR = struct("ibv_srq_init_attr", ptr("srq_context"),
			IBV_SRQ_ATTR.withName("attr"));

	/** {@code struct ibv_srq}. */
	public static final StructLayout IBV_SRQ = struct("ibv_srq", ptr("context"), ptr("srq_context"), ptr("pd"),
			u32("handle"), PTHREAD_MUTEX.withName("mutex"), PTHREAD_COND.withName("cond"), u32("events_completed"));

	public static final StructLayout IBV_GLOBAL_ROUTE = struct("ibv_global_route", IBV_GID.withName("dgid"),
			u32("flow_label"), u8("sgid_index"), u8("hop_limit"), u8("traffic_class"));

	public static final StructLayout IBV_AH_ATTR = struct("ibv_ah_attr", IBV_GLOBAL_ROUTE.withName("grh"), u16("dlid"),
			u8("sl"), u8("src_path_bits"), u8("static_rate"), u8("is_global"), u8("port_num"));

	public static final StructLayout IBV_QP_ATTR = struct("ibv_qp_attr", u32("qp_state"), u32("cur_qp_state"),
			u32("path_mtu"), u32("path_mig_state"), u32("qkey"), u32("rq_psn"), u32("sq_psn"), u32("dest_qp_num"),
			u32("qp_access_flags"), IBV_QP_CAP.withName("cap"), IBV_AH_ATTR.withName("ah_attr"),
			IBV_AH_ATTR.withName("alt_ah_attr"), u16("pkey_index"), u16("alt_pkey_index"), u8("en_sqd_async_notify"),
			u8("sq_draining"), u8("max_rd_atomic"), u8("max_dest_rd_atomic"), u8("min_rnr_timer"), u8("port_num"),
			u8("timeout"), u8("retry_cnt"), u8("rnr_retry"), u8("alt_port_num"), u8("alt_timeout"), u32("rate_limit"));

	public static final StructLayout IBV_PARENT_DOMAIN_INIT_ATTR = struct("ibv_parent_domain_init_attr", ptr("pd"),
			ptr("td"), u32("comp_mask"), ptr("alloc"), ptr("free"), ptr("pd_context"));

	public static final StructLayout IBV_SGE = struct("ibv_sge", u64("addr"), u32("length"), u32("lkey"));

	public static final StructLayout IBV_SEND_WR = struct("ibv_send_wr", u64("wr_id"), ptr("next"), ptr("sg_list"),
			u32("num_sge"), u32("opcode"), u32("send_flags"),
			union("anon_imm", u32("imm_data"), u32("invalidate_rkey")),
			union("wr", struct("rdma", u64("remote_addr"), u32("rkey")),
					struct("atomic", u64("remote_addr"), u64("compare_add"), u64("swap"), u32("rkey")),
					struct("ud", ptr("ah"), u32("remote_qpn"), u32("remote_qkey"))),
			union("qp_type", struct("xrc", u32("remote_srqn"))),
			union("anon_mw",
					struct("bind_mw", ptr("mw"), u32("rkey"),
							struct("bind_info", ptr("mr"), u64("addr"), u64("length"), u32("mw_access_flags"))),
					struct("tso", ptr("hdr"), u16("hdr_sz"), u16("mss"))));

	public static final StructLayout IBV_RECV_WR = struct("ibv_recv_wr", u64("wr_id"), ptr("next"), ptr("sg_list"),
			u32("num_sge"));

	// ---------------------------------------------------------------- libc

	public static final StructLayout POLLFD = struct("pollfd", u32("fd"), u16("events"), u16("revents"));

	/**
	 * {@code struct epoll_event}: packed on x86_64 ({@code __EPOLL_PACKED}), so
	 * {@code data} sits at offset 4, the struct is 12 bytes and aligned to 1; the probe
	 * proves it.
	 */
	public static final StructLayout EPOLL_EVENT = struct("epoll_event",
			JAVA_INT.withByteAlignment(1).withName("events"), JAVA_LONG.withByteAlignment(1).withName("data"));

	/** Every layout above, for the conformance test. */
	public static final List<GroupLayout> ALL = List.of(IBV_CONTEXT, IBV_DEVICE, IBV_DEVICE_ATTR, IBV_PORT_ATTR,
			IBV_GID, IBV_GID_ENTRY, IBV_ASYNC_EVENT, IBV_COMP_CHANNEL, IBV_CQ, IBV_CQ_EX, IBV_WC, IBV_CQ_INIT_ATTR_EX,
			IBV_POLL_CQ_ATTR, IBV_WC_TM_INFO, EFADV_CQ_INIT_ATTR, EFADV_CQ, IBV_MR, IBV_QP, IBV_QP_CAP,
			IBV_QP_INIT_ATTR, IBV_GLOBAL_ROUTE, IBV_AH_ATTR, IBV_QP_ATTR, IBV_PARENT_DOMAIN_INIT_ATTR, IBV_SGE,
			IBV_SEND_WR, IBV_RECV_WR, POLLFD, EPOLL_EVENT, IBV_SRQ_ATTR, IBV_SRQ_INIT_ATTR, IBV_SRQ,
			// device attributes ex
			IBV_QUERY_DEVICE_EX_INPUT, IBV_DEVICE_ATTR_EX);

	/** C tag of each layout ({@code union} for ibv_gid, else {@code struct}). */
	public static String cType(GroupLayout layout) {
		return (layout instanceof UnionLayout ? "union " : "struct ") + layout.name().orElseThrow();
	}

	/** The byte offset of a member, by its path of names. */
	public static long off(MemoryLayout layout, String... path) {
		PathElement[] elements = new PathElement[path.length];
		for (int i = 0; i < path.length; i++) {
			elements[i] = PathElement.groupElement(path[i]);
		}
		return layout.byteOffset(elements);
	}

	/**
	 * Offset of every named member, keyed by its C access path ("ops.poll_cq",
	 * "imm_data"), for the probe.
	 */
	public static Map<String, long[]> members(GroupLayout layout) {
		Map<String, long[]> out = new LinkedHashMap<>();
		collect(layout, "", 0, out);
		return out;
	}

	private static void collect(GroupLayout group, String prefix, long base, Map<String, long[]> out) {
		long offset = 0;
		for (MemoryLayout member : group.memberLayouts()) {
			long at = base + (group instanceof UnionLayout ? 0 : offset);
			if (member.name().isPresent()) {
				String name = member.name().get();
				boolean anonymous = name.startsWith("anon_");
				String path = anonymous ? prefix : prefix + name;
				if (!anonymous) {
					out.put(path, new long[] { at, member.byteSize() });
				}
				if (member instanceof GroupLayout nested) {
					collect(nested, anonymous ? prefix : path + ".", at, out);
				}
			}
			offset += member.byteSize();
		}
	}

}
