package io.breakerd.client;

import java.util.Objects;
import java.util.function.Function;

/**
 * Turns how a guarded call ended into the {@link Outcome} to report.
 *
 * <p>{@link #standard()} reports a returned value as a success and a thrown
 * error through {@link Outcome#fromThrowable(Throwable)}. Use
 * {@link #ofResult(Function)} when the result itself says how the call went
 * (e.g. an HTTP response's status), and {@link #withErrors(Function)} to
 * classify errors your own way. Implementations must be thread-safe when the
 * guard is shared.
 *
 * @param <T> the guarded call's result type
 */
public interface Classifier<T> {

  /** The outcome of a call that returned {@code result}. */
  Outcome onResult(T result);

  /** The outcome of a call that threw {@code error}. */
  Outcome onError(Throwable error);

  /** Returned values are successes; errors go through {@link Outcome#fromThrowable(Throwable)}. */
  @SuppressWarnings("unchecked") // it never looks at the result
  static <T> Classifier<T> standard() {
    return (Classifier<T>) StandardClassifier.INSTANCE;
  }

  /**
   * Returned values are classified by {@code onResult}; errors go through
   * {@link Outcome#fromThrowable(Throwable)}.
   */
  static <T> Classifier<T> ofResult(Function<? super T, Outcome> onResult) {
    Objects.requireNonNull(onResult, "onResult");
    return new Classifier<>() {
      @Override
      public Outcome onResult(T result) {
        return onResult.apply(result);
      }

      @Override
      public Outcome onError(Throwable error) {
        return Outcome.fromThrowable(error);
      }
    };
  }

  /** This classifier with errors classified by {@code onError} instead. */
  default Classifier<T> withErrors(Function<Throwable, Outcome> onError) {
    Objects.requireNonNull(onError, "onError");
    Classifier<T> self = this;
    return new Classifier<>() {
      @Override
      public Outcome onResult(T result) {
        return self.onResult(result);
      }

      @Override
      public Outcome onError(Throwable error) {
        return onError.apply(error);
      }
    };
  }
}

