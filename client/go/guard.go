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
// with the measured latency) and return fn's error unchanged. If fn panics
// the permit is reported as cancelled and the panic goes on.
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

// runGranted runs fn under an allowed decision and reports it exactly once.
func (c *Client) runGranted(ctx context.Context, d Decision, fn func(context.Context) error) (Outcome, error) {
	start := time.Now()
	reported := false
	defer func() {
		if !reported { // fn panicked or called runtime.Goexit
			c.Report(ctx, d.Dependency, d.Permit, Explicit(ClassCancelled).WithLatency(time.Since(start)))
		}
	}()
	err := fn(ctx)
	o := c.cfg.classifier(err).WithLatency(time.Since(start))
	reported = true
	c.Report(ctx, d.Dependency, d.Permit, o)
	return o, err
}

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
// as a guarded call. If that call fails, it goes on with the dependencies
// after the granted one (a new AcquireFirst); it returns nil at the first
// success. When no dependency is granted it returns the *OpenError of that
// answer (joined with the previous call's error, if one failed); when the
// list runs out after a failure, that failure. On fail-open the first
// remaining dependency runs. It stops early if ctx ends.
func (c *Client) First(ctx context.Context, dependencies []string, fn func(ctx context.Context, dependency string) error) error {
	remaining := dependencies
	var callErr error
	for len(remaining) > 0 {
		d, err := c.AcquireFirst(ctx, remaining, 0)
		if err != nil {
			return err
		}
		if !d.Allowed {
			if callErr != nil {
				return errors.Join(openError(d), callErr)
			}
			return openError(d)
		}
		_, err = c.runGranted(ctx, d, func(ctx context.Context) error { return fn(ctx, d.Dependency) })
		if err == nil {
			return nil
		}
		callErr = err
		if ctx.Err() != nil {
			return err
		}
		remaining = remaining[indexOf(remaining, d.Dependency)+1:]
	}
	return callErr
}

func indexOf(list []string, s string) int {
	for i, v := range list {
		if v == s {
			return i
		}
	}
	return 0
}
