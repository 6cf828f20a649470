package io.breakerd.client;

import io.breakerd.v1.BreakerGrpc;
import io.grpc.CallOptions;
import io.grpc.ClientCall;
import io.grpc.ClientStreamTracer;
import io.grpc.ConnectivityState;
import io.grpc.ManagedChannel;
import io.grpc.Metadata;
import io.grpc.MethodDescriptor;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.BooleanSupplier;
import java.util.function.Consumer;

/**
 * Acquire, AcquireFirst and Report RPCs as the client sends them: through the
 * send window, timed from when the request is written, judged after the
 * connection has read what breakerd sent, and an answer that comes after its
 * caller stopped waiting handed on rather than dropped.
 *
 * <p>An {@link Rpc} is sent when the window gives it a place. Its caller waits
 * at most the decision timeout from when its request is written (the stream
 * tracer's outboundHeaders: the headers are on the socket), or from its start
 * when the channel is not connected (nothing can be written then); then the
 * answer fails DEADLINE_EXCEEDED and the place passes on. The RPC itself stays
 * open until its gRPC deadline, the decision timeout plus
 * {@value #LATE_ANSWER_SECONDS} s from its start, and a response that arrives
 * after its caller stopped waiting goes to its {@code late} handler.
 *
 * <p>Thread-safe. Callbacks run on gRPC's thread and never block.
 */
final class UnarySender {
  /**
   * How long an RPC stays open after its caller stopped waiting (its timeout,
   * or an interrupt): a permit that arrives meanwhile is reported CANCELLED, a
   * Report still lands.
   */
  static final long LATE_ANSWER_SECONDS = 1;

  // Constant after construction.
  private final ManagedChannel channel;
  private final SendWindow window;
  private final long timeoutNanos;
  /** Where timeouts run. */
  private final ScheduledExecutorService timeouts;
  /** Whether {@link #timeouts} is the connection's own I/O thread (see {@link Rpc#timeoutDue}). */
  private final boolean timeoutsOnIoThread;
  /** True when nothing may be sent: the client is closed. */
  private final BooleanSupplier closed;
  /** True while breakerd is away: only RPCs that {@code keep} are sent. */
  private final BooleanSupplier away;

  /**
   * When breakerd last answered one of these RPCs (System.nanoTime): a timeout
   * after it answered others is a late answer, not an absent breakerd.
   */
  private final AtomicLong lastAnswerNanos =
      new AtomicLong(System.nanoTime() - TimeUnit.DAYS.toNanos(1));

  UnarySender(ManagedChannel channel, SendWindow window, long timeoutNanos,
      ScheduledExecutorService timeouts, boolean timeoutsOnIoThread,
      BooleanSupplier closed, BooleanSupplier away) {
    this.channel = channel;
    this.window = window;
    this.timeoutNanos = timeoutNanos;
    this.timeouts = timeouts;
    this.timeoutsOnIoThread = timeoutsOnIoThread;
    this.closed = closed;
    this.away = away;
  }

  /**
   * An RPC of {@code method} with {@code request}, not yet sent. {@code keep}:
   * sent even while breakerd is away, and not flushed (a late permit going
   * back). {@code late} (may be null) gets a response that arrives after the
   * caller stopped waiting.
   */
  <Q, R> Rpc<Q, R> newRpc(MethodDescriptor<Q, R> method, Q request, boolean keep,
      Consumer<R> late) {
    return new Rpc<>(method, request, keep, late);
  }

  /** Whether breakerd answered one of these RPCs after {@code nanos} (a System.nanoTime()). */
  boolean answeredSince(long nanos) {
    return lastAnswerNanos.get() - nanos > 0;
  }

  /**
   * Submits {@code rpc} to the window and waits for its answer.
   *
   * <p>Not {@code interruptible}: the wait ignores the thread's interrupt flag,
   * which is kept (an interrupted caller, e.g. a task cancelled with
   * {@code Future.cancel(true)}, still gets its decision). The window and the
   * RPC's timeout bound the wait.
   *
   * <p>{@code interruptible}: an interrupt (already set, or during the wait)
   * throws InterruptedException at once, the flag cleared. An RPC still queued
   * is withdrawn, or not even submitted; one on the wire is kept and its
   * answer, if any, goes to its {@code late} handler. {@code what} names the
   * dependency (or dependencies) in the exception.
   *
   * @throws StatusRuntimeException when the RPC failed or timed out
   * @throws NotSent when the RPC was not sent (breakerd away, client closed)
   */
  <T> T await(Rpc<?, T> rpc, boolean interruptible, String what) throws InterruptedException {
    if (interruptible && Thread.interrupted()) {
      throw new InterruptedException("interrupted before the Acquire of " + what + " was sent");
    }
    window.submit(rpc);
    if (!interruptible) {
      return joinUninterruptibly(rpc.answer);
    }
    try {
      return rpc.answer.get();
    } catch (InterruptedException e) {
      if (!window.withdraw(rpc)) {
        rpc.abandon(); // on the wire: its answer goes to its late handler
      }
      throw new InterruptedException("interrupted while waiting for breakerd's answer for "
          + what + " (a permit it grants is reported CANCELLED)");
    } catch (ExecutionException e) {
      throw rpcFailure(e.getCause());
    }
  }

  /**
   * Submits {@code rpc} without waiting.
   *
   * @return completes as the RPC ends (see {@link Rpc#answer})
   */
  <T> CompletableFuture<T> send(Rpc<?, T> rpc) {
    window.submit(rpc);
    return rpc.answer;
  }

  /**
   * Waits for {@code future} without regard to the thread's interrupt flag (kept).
   *
   * @throws StatusRuntimeException when the RPC failed
   * @throws NotSent when the RPC was not sent
   */
  static <T> T joinUninterruptibly(CompletableFuture<T> future) {
    try {
      return future.join(); // join ignores interrupts and restores the flag
    } catch (CompletionException e) {
      throw rpcFailure(e.getCause());
    }
  }

  /** What a failed (or not sent) RPC throws to its waiter. */
  private static RuntimeException rpcFailure(Throwable cause) {
    if (cause instanceof StatusRuntimeException || cause instanceof NotSent) {
      return (RuntimeException) cause;
    }
    return Status.fromThrowable(cause).asRuntimeException();
  }

  /** An RPC the window did not send: breakerd is away, or the client was closed. */
  static final class NotSent extends RuntimeException {
    private static final long serialVersionUID = 1L;
    static final NotSent INSTANCE = new NotSent();

    private NotSent() {
      super("not sent", null, false, false);
    }
  }

  /** One RPC; see {@link UnarySender}. */
  final class Rpc<Q, R> implements SendWindow.Job {
    // Constant after construction.
    private final MethodDescriptor<Q, R> method;
    private final Q request;
    private final boolean keep;
    private final Consumer<R> late; // may be null

    /**
     * The response; or StatusRuntimeException (DEADLINE_EXCEEDED when the
     * caller's timeout is up); or {@link NotSent}, also when its caller gave up.
     */
    final CompletableFuture<R> answer = new CompletableFuture<>();
    private final AtomicBoolean placeHeld = new AtomicBoolean();
    private final AtomicBoolean timing = new AtomicBoolean();
    private volatile ScheduledFuture<?> timeout;
    /** When the timeout started (System.nanoTime): the request was written, or could not be. */
    private volatile long writtenNanos;

    private Rpc(MethodDescriptor<Q, R> method, Q request, boolean keep, Consumer<R> late) {
      this.method = method;
      this.request = request;
      this.keep = keep;
      this.late = late;
    }

    /** When the request was written (or the RPC started, if the channel was not connected). */
    long writtenNanos() {
      return writtenNanos;
    }

    @Override
    public boolean isReport() {
      return method == BreakerGrpc.getReportMethod();
    }

    @Override
    public boolean keep() {
      return keep;
    }

    @Override
    public void start() {
      placeHeld.set(true);
      if (closed.getAsBoolean() || (away.getAsBoolean() && !keep)) {
        leave();
        drop();
        return;
      }
      ClientCall<Q, R> call = channel.newCall(method, CallOptions.DEFAULT
          .withDeadlineAfter(timeoutNanos + TimeUnit.SECONDS.toNanos(LATE_ANSWER_SECONDS),
              TimeUnit.NANOSECONDS)
          .withStreamTracerFactory(new ClientStreamTracer.Factory() {
            @Override
            public ClientStreamTracer newClientStreamTracer(
                ClientStreamTracer.StreamInfo info, Metadata headers) {
              return new ClientStreamTracer() {
                @Override
                public void outboundHeaders() {
                  startTimeout(); // the headers are on the socket
                }
              };
            }
          })
          .withExecutor(Runnable::run)); // callbacks on gRPC's thread; they never block
      if (channel.getState(false) != ConnectivityState.READY) {
        startTimeout(); // nothing can be written before it connects: the timeout runs from now
      }
      try {
        call.start(new Listener(), new Metadata());
        call.sendMessage(request);
        call.halfClose();
        call.request(1);
      } catch (RuntimeException | Error e) {
        call.cancel("could not send", e);
        ended(Status.fromThrowable(e), null);
      }
    }

    @Override
    public void drop() {
      answer.completeExceptionally(NotSent.INSTANCE);
    }

    /** Its caller stopped waiting: an answer from now on goes to {@code late}. */
    private void abandon() {
      if (!answer.completeExceptionally(NotSent.INSTANCE) && !answer.isCompletedExceptionally()
          && late != null) {
        late.accept(answer.join()); // answered just before: nobody took it
      }
    }

    /** The request is on the connection (or cannot be): the caller waits the timeout from now. */
    private void startTimeout() {
      if (!timing.compareAndSet(false, true)) {
        return;
      }
      writtenNanos = System.nanoTime();
      try {
        timeout = timeouts.schedule(this::timeoutDue, timeoutNanos, TimeUnit.NANOSECONDS);
      } catch (RejectedExecutionException clientClosed) {
        // the channel's shutdown ends the RPC
      }
    }

    /**
     * The timeout is due. On the connection's I/O thread the verdict waits for
     * one more pass of it: Netty takes due timers once per pass, so the next
     * one first reads what breakerd sent meanwhile (the thread may have been
     * descheduled, or busy writing other requests, since it last read).
     */
    private void timeoutDue() {
      if (answer.isDone()) {
        return;
      }
      if (!timeoutsOnIoThread) {
        timedOut();
        return;
      }
      try {
        timeout = timeouts.schedule(this::timedOut, 0, TimeUnit.NANOSECONDS);
      } catch (RejectedExecutionException clientClosed) {
        timedOut();
      }
    }

    private void timedOut() {
      leave();
      answer.completeExceptionally(Status.DEADLINE_EXCEEDED
          .withDescription("no answer within " + TimeUnit.NANOSECONDS.toMillis(timeoutNanos)
              + " ms of sending")
          .asRuntimeException());
    }

    /** The RPC ended with {@code status} and, if OK, {@code response}. */
    private void ended(Status status, R response) {
      ScheduledFuture<?> t = timeout;
      if (t != null) {
        t.cancel(false);
      }
      if (status.isOk() || status.getCode() == Status.Code.INVALID_ARGUMENT) {
        long now = System.nanoTime();
        lastAnswerNanos.getAndUpdate(last -> now - last > 0 ? now : last); // breakerd answers
      }
      leave();
      if (status.isOk() && response != null) {
        if (!answer.complete(response) && late != null) {
          late.accept(response);
        }
      } else {
        answer.completeExceptionally(status.asRuntimeException());
      }
    }

    /** Gives the window place back, once. */
    private void leave() {
      if (placeHeld.compareAndSet(true, false)) {
        window.done();
      }
    }

    /** Callbacks of one call are serialized. */
    private final class Listener extends ClientCall.Listener<R> {
      private R response;

      @Override
      public void onMessage(R message) {
        response = message;
      }

      @Override
      public void onClose(Status status, Metadata trailers) {
        ended(status, response);
      }
    }
  }
}
