/**
 * Client of the breakerd circuit-breaker sidecar.
 *
 * <p>Build one {@link io.breakerd.client.BreakerdClient} per process and share it.
 * Before each call to an upstream dependency, {@code acquire} (or use the guards
 * {@code call}, {@code retry}, {@code first}); by hand, make the call through
 * {@link io.breakerd.client.Permit#call(java.util.concurrent.Callable)} (an
 * exception is reported by its class) and report what its result says. A
 * refusal is a {@link io.breakerd.client.BreakerOpenException}: do not make the
 * call.
 */
package io.breakerd.client;
