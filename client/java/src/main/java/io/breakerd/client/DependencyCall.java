package io.breakerd.client;

/**
 * A call to one dependency of a fallback chain; see
 * {@link BreakerdClient#first(java.util.List, DependencyCall)}.
 *
 * @param <T> the call's result type
 */
@FunctionalInterface
public interface DependencyCall<T> {
  /** Calls {@code dependency} (the one breakerd granted) and returns its result. */
  T call(String dependency) throws Exception;
}
