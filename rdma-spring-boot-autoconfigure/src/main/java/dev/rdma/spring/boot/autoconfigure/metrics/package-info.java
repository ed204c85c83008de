/**
 * Auto-configuration of the pollers' Micrometer meters.
 */
@NullMarked
package dev.rdma.spring.boot.autoconfigure.metrics;

import org.jspecify.annotations.NullMarked;
