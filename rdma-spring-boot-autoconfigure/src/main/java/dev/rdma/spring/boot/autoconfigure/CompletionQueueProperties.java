package dev.rdma.spring.boot.autoconfigure;

import java.util.LinkedHashSet;
import java.util.Set;

import org.jspecify.annotations.Nullable;

import org.springframework.boot.context.properties.ConfigurationPropertiesSource;
import org.springframework.boot.context.properties.NestedConfigurationProperty;

import dev.rdma.spring.listener.PollerSettings;
import dev.rdma.verbs.CqCreateFlag;
import dev.rdma.verbs.WcExFlag;

/** A completion queue. */
@ConfigurationPropertiesSource
public class CompletionQueueProperties {

	/**
	 * Key of the device (under rdma.devices). May be omitted when exactly one device is
	 * configured.
	 */
	private @Nullable String device;

	/**
	 * Kind of CQ: legacy (ibv_create_cq), extended (ibv_create_cq_ex) or efa
	 * (efadv_create_cq).
	 */
	private QueueType type = QueueType.LEGACY;

	/**
	 * Minimum number of entries; the provider may round up (the bean's cqe() is the
	 * actual size). At most the device's max_cqe.
	 */
	private int entries = 1024;

	/**
	 * Completion vector: auto (round robin over the device's num_comp_vectors) or a
	 * number 0 .. num_comp_vectors - 1.
	 */
	private String compVector = "auto";

	/**
	 * Key of the completion channel (under rdma.channels); omitted = no completion events
	 * (polled in backoff or busy mode).
	 */
	private @Nullable String channel;

	/**
	 * Completion fields an extended or efa CQ provides (ibv_create_cq_ex wc_flags).
	 * Defaults to the standard fields (byte-len .. dlid-path-bits).
	 */
	private Set<WcExFlag> wcFlags = new LinkedHashSet<>();

	/** Creation flags of an extended or efa CQ. */
	private Set<CqCreateFlag> flags = new LinkedHashSet<>();

	/** EFA-specific completion fields (efa type only). */
	private Set<EfaWcField> efaWcFlags = new LinkedHashSet<>();

	/**
	 * Which poller runs this queue's listener: a group under rdma.pollers, 'default' (the
	 * default group), or 'dedicated' (a thread of its own). Omitted: the default group
	 * when the queue has a channel and sets no polling.mode, else dedicated.
	 */
	private @Nullable String poller;

	/**
	 * How the dedicated poller of this queue waits for completions (a group's queues use
	 * the group's mode; batch-size applies to both).
	 */
	@NestedConfigurationProperty
	private final Polling polling = new Polling();

	/**
	 * Number of completion events acknowledged together (ibv_ack_cq_events); all are
	 * acked before the CQ is destroyed.
	 */
	private int ackBatch = 64;

	public @Nullable String getDevice() {
		return device;
	}

	public void setDevice(@Nullable String device) {
		this.device = device;
	}

	public QueueType getType() {
		return type;
	}

	public void setType(QueueType type) {
		this.type = type;
	}

	public int getEntries() {
		return entries;
	}

	public void setEntries(int entries) {
		this.entries = entries;
	}

	public String getCompVector() {
		return compVector;
	}

	public void setCompVector(String compVector) {
		this.compVector = compVector;
	}

	public @Nullable String getChannel() {
		return channel;
	}

	public void setChannel(@Nullable String channel) {
		this.channel = channel;
	}

	public Set<WcExFlag> getWcFlags() {
		return wcFlags;
	}

	public void setWcFlags(Set<WcExFlag> wcFlags) {
		this.wcFlags = wcFlags;
	}

	public Set<CqCreateFlag> getFlags() {
		return flags;
	}

	public void setFlags(Set<CqCreateFlag> flags) {
		this.flags = flags;
	}

	public Set<EfaWcField> getEfaWcFlags() {
		return efaWcFlags;
	}

	public void setEfaWcFlags(Set<EfaWcField> efaWcFlags) {
		this.efaWcFlags = efaWcFlags;
	}

	public Polling getPolling() {
		return polling;
	}

	public @Nullable String getPoller() {
		return poller;
	}

	public void setPoller(@Nullable String poller) {
		this.poller = poller;
	}

	public int getAckBatch() {
		return ackBatch;
	}

	public void setAckBatch(int ackBatch) {
		this.ackBatch = ackBatch;
	}

	/**
	 * The settings the queue's poller runs with, built once from these properties (the
	 * mode resolved as {@code poller} and {@code polling.mode} say).
	 */
	public PollerSettings toPollerSettings() {
		return new PollerSettings(RdmaPropertiesValidator.effectiveMode(this), polling.getBatchSize(),
				polling.getSpin(), ackBatch, polling.getMaxSleep());
	}

}
