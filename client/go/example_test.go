package breakerd_test

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The example builds and, against a real breakerd with a failing upstream,
// is refused after the breaker opens.
func TestExampleRuns(t *testing.T) {
	s := startSidecar(t)
	bin := filepath.Join(t.TempDir(), "example")
	if out, err := exec.Command("go", "build", "-o", bin, "./example").CombinedOutput(); err != nil {
		t.Fatalf("go build ./example: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "-addr", s.addr, "-dep", "example/up", "-calls", "4", "-fail").CombinedOutput()
	if err != nil {
		t.Fatalf("example: %v\n%s", err, out)
	}
	text := string(out)
	for _, want := range []string{"call 1: failed: http status 503", "call 4: refused (REJECT_REASON_OPEN, source ", "fallback chain: calling example/up-backup"} {
		if !strings.Contains(text, want) {
			t.Errorf("example output lacks %q:\n%s", want, text)
		}
	}
	if got := s.reports("example/up", "server_error", "counted_failure"); got != 3 {
		t.Errorf("example reported %v server errors, want 3", got)
	}
}
