/**
 * Auto-configuration of the {@code rdma} health indicator.
 */
@NullMarked
package dev.rdma.spring.boot.autoconfigure.health;

import org.jspecify.annotations.NullMarked;
