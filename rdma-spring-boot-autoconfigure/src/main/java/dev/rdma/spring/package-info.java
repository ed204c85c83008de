/**
 * Spring support for RDMA completion queues: what every part of it shares
 * ({@link dev.rdma.spring.RdmaConfigurationException}). Below it, {@code annotation}
 * (what users write), {@code config} (endpoints, registry, container factory) and
 * {@code listener} (containers, poll loop, dispatch) are plain Spring;
 * {@code boot.autoconfigure} is Spring Boot's auto-configuration of them. See
 * docs/architecture.md.
 */
@NullMarked
package dev.rdma.spring;

import org.jspecify.annotations.NullMarked;
