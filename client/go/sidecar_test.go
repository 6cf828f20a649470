package breakerd_test

// Test helpers: a real breakerd child process, its Admin service, GetState
// and /metrics.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	pb "github.com/breakerd/breakerd/client/go/breakerdv1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
)

// testConfig is the config every client's suite starts breakerd with
// (client/conformance/breakerd.yaml; go test runs in the package folder).
var testConfig = func() string {
	b, err := os.ReadFile(filepath.Join("..", "conformance", "breakerd.yaml"))
	if err != nil {
		panic(fmt.Sprintf("the shared test config: %v", err))
	}
	return string(b)
}()

const adminToken = "go-client-test-token"

func TestMain(m *testing.M) {
	bin := os.Getenv("BREAKERD_BIN")
	if st, err := os.Stat(bin); bin == "" || err != nil || st.Mode()&0o111 == 0 {
		fmt.Fprintf(os.Stderr, "BREAKERD_BIN must name the breakerd executable (got %q)\n", bin)
		os.Exit(2)
	}
	os.Exit(m.Run())
}

// sidecar is one running breakerd.
type sidecar struct {
	t       *testing.T
	dir     string
	cmd     *exec.Cmd
	exited  chan struct{}
	addr    string // gRPC host:port
	metrics string // HTTP host:port
	admin   pb.AdminClient
	breaker pb.BreakerClient
	conn    *grpc.ClientConn

	mu  sync.Mutex
	log strings.Builder // its stderr, for failure messages
}

// startSidecar starts breakerd on a free loopback port.
func startSidecar(t *testing.T) *sidecar {
	t.Helper()
	return startSidecarAt(t, "127.0.0.1:0")
}

// startSidecarAt starts breakerd listening on addr.
func startSidecarAt(t *testing.T, addr string) *sidecar {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(testConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "token"), []byte(adminToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := launch(t, dir, addr)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// restart starts a new breakerd with the same files on the same address
// (retrying for a few seconds while the port is not yet free).
func (s *sidecar) restart() *sidecar {
	s.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, err := launch(s.t, s.dir, s.addr)
		if err == nil {
			return n
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("restart on %s: %v", s.addr, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func launch(t *testing.T, dir, listen string) (*sidecar, error) {
	cmd := exec.Command(os.Getenv("BREAKERD_BIN"),
		"--listen="+listen, "--metrics-listen=127.0.0.1:0",
		"--config="+filepath.Join(dir, "config.yaml"),
		"--admin-token-file="+filepath.Join(dir, "token"))
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &sidecar{t: t, dir: dir, cmd: cmd, exited: make(chan struct{})}
	serving := make(chan map[string]any, 1)
	go func() { // drain stderr for the process's whole life
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			s.mu.Lock()
			s.log.WriteString(line + "\n")
			s.mu.Unlock()
			var ev map[string]any
			if json.Unmarshal([]byte(line), &ev) == nil && ev["event"] == "serving" {
				select {
				case serving <- ev:
				default:
				}
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
		_ = cmd.Wait()
		close(s.exited)
	}()
	select {
	case ev := <-serving:
		s.addr = strings.Split(fmt.Sprint(ev["grpc"]), ",")[0]
		s.metrics = fmt.Sprint(ev["metrics"])
	case <-s.exited:
		return nil, fmt.Errorf("breakerd exited before serving:\n%s", s.stderr())
	case <-time.After(10 * time.Second):
		s.kill()
		return nil, fmt.Errorf("breakerd did not log serving within 10 s:\n%s", s.stderr())
	}
	conn, err := grpc.NewClient(s.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		s.kill()
		return nil, err
	}
	s.conn, s.admin, s.breaker = conn, pb.NewAdminClient(conn), pb.NewBreakerClient(conn)
	t.Cleanup(s.stop)
	return s, nil
}

func (s *sidecar) stderr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.log.String()
}

// stop: SIGTERM, then SIGKILL after 5 s. SIGCONT first, in case a failed
// test left it paused.
func (s *sidecar) stop() {
	if s.conn != nil {
		_ = s.conn.Close()
	}
	_ = s.cmd.Process.Signal(syscall.SIGCONT)
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(5 * time.Second):
		s.kill()
	}
}

// kill: SIGKILL and wait, as a crash.
func (s *sidecar) kill() {
	_ = s.cmd.Process.Kill()
	<-s.exited
}

// portHolder keeps a crashed sidecar's address bound until release, so
// nothing else takes it before the restart, and stands in for the dead
// sidecar: it accepts each connection and closes it at once (to a gRPC
// client, a failed connection attempt), noting when, so a test can restart
// breakerd right after one of the client's attempts.
type portHolder struct {
	ln       net.Listener
	attempts chan time.Time // buffered; one per connection accepted
	done     chan struct{}  // closed when the accept loop has returned
}

// crash kills breakerd (SIGKILL) and holds its address (see portHolder);
// restart after release. The test's cleanup releases it too.
func (s *sidecar) crash() *portHolder {
	s.t.Helper()
	s.kill()
	_ = s.conn.Close() // the helper's own channel must not add attempts
	var ln net.Listener
	eventually(s.t, "the crashed sidecar's port to be free", func() bool {
		var err error
		ln, err = net.Listen("tcp", s.addr)
		return err == nil
	})
	h := &portHolder{ln: ln, attempts: make(chan time.Time, 1024), done: make(chan struct{})}
	go func() {
		defer close(h.done)
		for {
			conn, err := ln.Accept()
			if err != nil {
				return // released
			}
			_ = conn.Close()
			select {
			case h.attempts <- time.Now():
			default:
			}
		}
	}()
	s.t.Cleanup(h.release)
	return h
}

// release frees the address (idempotent).
func (h *portHolder) release() {
	_ = h.ln.Close()
	<-h.done
}

// pause sends SIGSTOP and waits until every thread of breakerd is stopped
// (the signal is delivered asynchronously: a running thread may still
// answer): connections stay open and nothing answers, as with a hung or
// throttled sidecar. The test's cleanup resumes it whatever happens.
func (s *sidecar) pause() {
	s.t.Helper()
	s.t.Cleanup(s.resume)
	if err := s.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		s.t.Fatalf("SIGSTOP: %v", err)
	}
	eventually(s.t, "every breakerd thread to stop", func() bool { return allThreadsStopped(s.cmd.Process.Pid) })
}

// resume sends SIGCONT (harmless when not paused).
func (s *sidecar) resume() { _ = s.cmd.Process.Signal(syscall.SIGCONT) }

// allThreadsStopped reads each thread's state from /proc: T is stopped.
func allThreadsStopped(pid int) bool {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return false
	}
	for _, task := range tasks {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/stat", pid, task.Name()))
		if err != nil {
			return false
		}
		// The state follows the command name, which is in parentheses.
		i := strings.LastIndexByte(string(stat), ')')
		if i < 0 || i+2 >= len(stat) || stat[i+2] != 'T' {
			return false
		}
	}
	return true
}

func (s *sidecar) adminCtx() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+adminToken), cancel
}

func (s *sidecar) forceOpen(dep string) {
	s.t.Helper()
	ctx, cancel := s.adminCtx()
	defer cancel()
	if _, err := s.admin.ForceOpen(ctx, &pb.ForceOpenRequest{Dependency: dep}); err != nil {
		s.t.Fatalf("ForceOpen(%s): %v", dep, err)
	}
}

func (s *sidecar) state(dep string) *pb.BreakerStatus {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := s.breaker.GetState(ctx, &pb.GetStateRequest{Dependency: dep})
	if err != nil {
		s.t.Fatalf("GetState(%s): %v", dep, err)
	}
	return st
}

// metric sums the samples of name whose labels include all of want.
func (s *sidecar) metric(name string, want map[string]string) float64 {
	s.t.Helper()
	resp, err := http.Get("http://" + s.metrics + "/metrics")
	if err != nil {
		s.t.Fatalf("scrape: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		s.t.Fatalf("scrape: %v", err)
	}
	var sum float64
	for _, line := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(line, name+"{") {
			continue
		}
		end := strings.LastIndex(line, "}")
		labels := parseLabels(line[len(name)+1 : end])
		match := true
		for k, v := range want {
			if labels[k] != v {
				match = false
			}
		}
		if match {
			v, err := strconv.ParseFloat(strings.TrimSpace(line[end+1:]), 64)
			if err != nil {
				s.t.Fatalf("metric line %q: %v", line, err)
			}
			sum += v
		}
	}
	return sum
}

// parseLabels reads `a="x",b="y"` (label values here never hold quotes).
func parseLabels(s string) map[string]string {
	out := map[string]string{}
	for _, pair := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(pair, "=")
		if ok {
			out[k] = strings.Trim(v, `"`)
		}
	}
	return out
}

// reports is breakerd_reports_total for dep, class and effect.
func (s *sidecar) reports(dep, class, effect string) float64 {
	return s.metric("breakerd_reports_total", map[string]string{"dependency": dep, "class": class, "effect": effect})
}

// acquires is breakerd_acquire_total for dep, every decision.
func (s *sidecar) acquires(dep string) float64 {
	return s.metric("breakerd_acquire_total", map[string]string{"dependency": dep})
}

// freeAddr is a loopback address nothing listens on (a port just freed).
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

// everyPermitReported waits up to 3 s for breakerd's reports of dep to
// equal its granted permits (allowed and probe Acquires).
func everyPermitReported(t *testing.T, s *sidecar, dep string) {
	t.Helper()
	var granted, reported float64
	deadline := time.Now().Add(3 * time.Second)
	for {
		granted = s.metric("breakerd_acquire_total", map[string]string{"dependency": dep, "decision": "allowed"}) +
			s.metric("breakerd_acquire_total", map[string]string{"dependency": dep, "decision": "probe"})
		reported = s.metric("breakerd_reports_total", map[string]string{"dependency": dep})
		if granted == reported || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if granted != reported {
		t.Errorf("%s: breakerd granted %v permits and received %v reports; want every permit reported", dep, granted, reported)
	}
}

// clockTicks is the unit of /proc's CPU times (getconf CLK_TCK; 100 where
// it cannot be asked).
var clockTicks = sync.OnceValue(func() float64 {
	out, err := exec.Command("getconf", "CLK_TCK").Output()
	if err != nil {
		return 100
	}
	if n, err := strconv.ParseFloat(strings.TrimSpace(string(out)), 64); err == nil && n > 0 {
		return n
	}
	return 100
})

// busyTicks is the CPU time the whole machine has spent busy (/proc/stat:
// every field but idle and iowait).
func busyTicks(t *testing.T) float64 {
	t.Helper()
	stat, err := os.ReadFile("/proc/stat")
	if err != nil {
		t.Fatal(err)
	}
	line, _, _ := strings.Cut(string(stat), "\n")
	fields := strings.Fields(line)[1:]
	var busy float64
	for i, f := range fields[:min(8, len(fields))] { // user nice system idle iowait irq softirq steal
		if v, err := strconv.ParseFloat(f, 64); err == nil && i != 3 && i != 4 {
			busy += v
		}
	}
	return busy
}

// processTicks is the CPU time process pid has used, all its threads.
func processTicks(t *testing.T, pid int) float64 {
	t.Helper()
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+2:]))
	utime, _ := strconv.ParseFloat(fields[11], 64)
	stime, _ := strconv.ParseFloat(fields[12], 64)
	return utime + stime
}

// cpuOfOthers starts measuring how many CPUs processes other than this test
// and pids keep busy; the function returned gives their average since. On a
// shared machine other programs' work delays every process now and then by
// tens of milliseconds, whatever the client does (the Node client's
// cpuOfOthers, Python's cpu_of_others).
func cpuOfOthers(t *testing.T, pids ...int) func() float64 {
	t.Helper()
	ours := append([]int{os.Getpid()}, pids...)
	oursTicks := func() float64 {
		var sum float64
		for _, pid := range ours {
			sum += processTicks(t, pid)
		}
		return sum
	}
	busy, mine, started := busyTicks(t), oursTicks(), time.Now()
	return func() float64 {
		elapsed := max(time.Since(started).Seconds(), 1/clockTicks())
		theirs := busyTicks(t) - busy - (oursTicks() - mine)
		return max(0, theirs) / clockTicks() / elapsed
	}
}

// eventually polls cond every 10 ms for up to 10 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
