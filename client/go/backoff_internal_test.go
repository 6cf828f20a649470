package breakerd

import (
	"testing"
	"time"
)

// Full jitter: before attempt n the sleep is within [0, min(max, base*2^(n-1))].
func TestRetryBackoffBounds(t *testing.T) {
	o := RetryOptions{}.withDefaults()
	if o.MaxAttempts != 3 || o.Base != 100*time.Millisecond || o.Max != 2*time.Second {
		t.Fatalf("defaults %+v", o)
	}
	for attempt, ceiling := range map[int]time.Duration{1: 100 * time.Millisecond, 2: 200 * time.Millisecond,
		4: 800 * time.Millisecond, 5: 1600 * time.Millisecond, 6: 2 * time.Second, 100: 2 * time.Second} {
		var longest time.Duration
		for i := 0; i < 2000; i++ {
			d := o.sleepBefore(attempt)
			if d < 0 || d > ceiling {
				t.Fatalf("attempt %d slept %v, outside [0, %v]", attempt, d, ceiling)
			}
			longest = max(longest, d)
		}
		if longest < ceiling/2 {
			t.Errorf("attempt %d: longest of 2000 sleeps %v, expected jitter up to %v", attempt, longest, ceiling)
		}
	}
}

func TestValidateDependency(t *testing.T) {
	long := make([]byte, 201)
	for i := range long {
		long[i] = 'a'
	}
	for _, bad := range []string{"", "a b", "a\x00", "é", string(long)} {
		if validateDependency(bad) == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	for _, good := range []string{"a", "openai/key-prod-1", "x.y_z:1@host-2", string(long[:200])} {
		if err := validateDependency(good); err != nil {
			t.Errorf("%q: %v", good, err)
		}
	}
}
