package breakerd

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"
)

// Do guards one call to dependency: Acquire; if refused, return an
// *OpenError (errors.Is(err, ErrBreakerOpen)) without calling fn. Otherwise
// run fn, Report its outcome (the client's Classifier applied to fn's error,
// with the measured latency) and return fn's error unchanged. The permit is
// reported exactly once:
//
//   - fn failed after the caller cancelled ctx: cancelled (the caller gave
//     up; the classifier is not asked);
//   - fn panics: cancelled, and the panic goes on;
//   - the classifier panics: what FromError makes of fn's error, and the
//     classifier's panic goes on to the caller.
//
// If ctx ends while the Acquire is in flight, Do returns ctx's error at once
// without calling fn (a permit that arrives later is reported cancelled; see
// Acquire). After Close it returns ErrClosed without calling fn.
func (c *Client) Do(ctx context.Context, dependency string, fn func(context.Context) error) error {
	_, _, err := c.try(ctx, dependency, 0, fn)
	return err
}

// Guard is Do for a call that returns a value: the zero T when refused.
func Guard[T any](ctx context.Context, c *Client, dependency string, fn func(context.Context) (T, error)) (T, error) {
	var v T
	err := c.Do(ctx, dependency, func(ctx context.Context) error {
		var err error
		v, err = fn(ctx)
		return err
	})
	return v, err
}

// try is one guarded attempt; ran says whether fn was called.
func (c *Client) try(ctx context.Context, dep string, attempt uint32, fn func(context.Context) error) (ran bool, o Outcome, err error) {
	d, err := c.Acquire(ctx, dep, attempt)
	if err != nil {
		return false, o, err
	}
	if !d.Allowed {
		return false, o, openError(d)
	}
	o, err = c.runGranted(ctx, d, fn)
	return true, o, err
}

// runGranted runs fn under an allowed decision and reports it exactly once
// (see Do).
func (c *Client) runGranted(ctx context.Context, d Decision, fn func(context.Context) error) (Outcome, error) {
	start := monoNow()
	var (
		err             error
		latency         time.Duration
		ran, classified bool
	)
	defer func() {
		switch {
		case classified:
		case ran: // the classifier panicked (or called runtime.Goexit)
			c.ReportDecision(ctx, d, c.outcomeOf(ctx, err, FromError).WithLatency(latency))
		default: // fn panicked or called runtime.Goexit
			c.ReportDecision(ctx, d, Explicit(ClassCancelled).WithLatency(monoNow()-start))
		}
	}()
	err = fn(ctx)
	latency, ran = monoNow()-start, true
	o := c.outcomeOf(ctx, err, c.cfg.classifier).WithLatency(latency)
	classified = true
	c.ReportDecision(ctx, d, o)
	return o, err
}

// outcomeOf classifies fn's error: cancelled when fn failed after the
// caller cancelled ctx (whatever error the upstream call made of that), else
// what classify says.
func (c *Client) outcomeOf(ctx context.Context, err error, classify Classifier) Outcome {
	if err != nil && errors.Is(ctx.Err(), context.Canceled) {
		return Explicit(ClassCancelled)
	}
	return classify(err)
}

// monoEpoch and monoNow time calls on the monotonic clock alone (one clock
// read, where time.Now reads the wall clock too).
var monoEpoch = time.Now()

func monoNow() time.Duration { return time.Since(monoEpoch) }

// RetryOptions configures Retry. Zero fields take the defaults.
type RetryOptions struct {
	// MaxAttempts counts the first try too. Default 3.
	MaxAttempts int
	// Base and Max bound the full-jitter backoff: before attempt n >= 1 the
	// helper sleeps uniform(0, min(Max, Base * 2^(n-1))). Defaults 100 ms, 2 s.
	Base, Max time.Duration
}

func (o RetryOptions) withDefaults() RetryOptions {
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = 3
	}
	if o.Base <= 0 {
		o.Base = 100 * time.Millisecond
	}
	if o.Max <= 0 {
		o.Max = 2 * time.Second
	}
	return o
}

func (o RetryOptions) sleepBefore(attempt int) time.Duration {
	ceiling := o.Base
	for i := 1; i < attempt && ceiling < o.Max; i++ {
		ceiling *= 2
	}
	return rand.N(min(ceiling, o.Max) + 1)
}

// Retry runs fn as a guarded call up to opts.MaxAttempts times, each
// attempt a Do with Acquire(dependency, attempt) so breakerd's retry budget
// applies. It stops at once, without sleeping, when an attempt is refused
// (returning the *OpenError), and when an outcome is not worth retrying
// (success, bad request, auth error, cancelled, soft failure: fn's error is
// returned). Otherwise it returns the last attempt's error. If ctx ends
// during a backoff sleep, ctx's error is returned joined with the last one.
// After Close it returns ErrClosed without calling fn.
func (c *Client) Retry(ctx context.Context, dependency string, opts RetryOptions, fn func(context.Context) error) error {
	opts = opts.withDefaults()
	var last error
	for attempt := 0; attempt < opts.MaxAttempts; attempt++ {
		if attempt > 0 {
			timer := time.NewTimer(opts.sleepBefore(attempt))
			select {
			case <-ctx.Done():
				timer.Stop()
				return errors.Join(ctx.Err(), last)
			case <-timer.C:
			}
		}
		ran, o, err := c.try(ctx, dependency, uint32(attempt), fn)
		if !ran || !o.retryable() {
			return err
		}
		last = err
	}
	return last
}

// First runs fn with the first dependency breakerd grants (AcquireFirst),
// as a guarded call. If that call fails with an outcome worth retrying
// (timeout, connection error, server error, rate limited), it goes on with
// the dependencies after the granted one (a new AcquireFirst); after one
// that is not (bad request, auth error, cancelled, soft failure) it stops
// and returns that call's error. It returns nil at the first success. When
// no dependency is granted it returns the *OpenError of that answer (joined
// with the previous call's error, if one failed); when the list runs out
// after a failure, that failure. On fail-open the first remaining
// dependency runs. It stops early if ctx ends. After Close it returns
// ErrClosed without calling fn.
//
// With WithChain(name), breakerd counts the chain: each AcquireFirst sends
// every remaining dependency (those the Watch cache holds open too, so that
// breakerd counts the decision even when none is granted: tier "none"),
// with the chain's name and the tier of the first (after a failed call,
// the tier after the one that failed), and each call's Report carries the
// chain and its tier (see WithChain; WithFirstTier shifts every tier). An
// invalid name is an INVALID_ARGUMENT error naming chain, returned before
// any RPC. Without a name the Watch cache leaves out what it holds open,
// and breakerd counts no chain.
func (c *Client) First(ctx context.Context, dependencies []string, fn func(ctx context.Context, dependency string) error, opts ...FirstOption) error {
	o := firstOptionsOf(opts)
	if err := o.validate(len(dependencies)); err != nil {
		return err
	}
	remaining, step := dependencies, o
	var callErr error
	for len(remaining) > 0 {
		d, err := c.acquireFirst(ctx, remaining, 0, step)
		if err != nil {
			return err
		}
		if !d.Allowed {
			if callErr != nil {
				return errors.Join(openError(d), callErr)
			}
			return openError(d)
		}
		outcome, err := c.runGranted(ctx, d, func(ctx context.Context) error { return fn(ctx, d.Dependency) })
		if err == nil {
			return nil
		}
		callErr = err
		if ctx.Err() != nil || !outcome.retryable() {
			return err
		}
		next := indexOf(remaining, d.Dependency) + 1
		remaining, step.firstTier = remaining[next:], step.firstTier+uint32(next)
	}
	return callErr
}
