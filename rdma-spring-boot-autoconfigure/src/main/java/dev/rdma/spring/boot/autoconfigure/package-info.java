/**
 * Spring Boot auto-configuration of RDMA devices, completion channels and completion
 * queues from {@code rdma.*} ({@link dev.rdma.spring.boot.autoconfigure.RdmaProperties})
 * and of the listener infrastructure. Internal: applications configure it with
 * properties, customizer beans and beans of their own, not by using these classes.
 */
@NullMarked
package dev.rdma.spring.boot.autoconfigure;

import org.jspecify.annotations.NullMarked;
