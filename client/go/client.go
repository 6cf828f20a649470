package breakerd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	pb "github.com/breakerd/breakerd/client/go/breakerdv1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// DefaultTarget is the sidecar address used when neither WithTarget nor the
// BREAKERD_ADDR environment variable says otherwise.
const DefaultTarget = "127.0.0.1:50051"

// FailMode says what Acquire answers when breakerd cannot be asked.
type FailMode int

const (
	// FailOpen (the default) allows the call, with source SourceFailOpen.
	FailOpen FailMode = iota
	// FailClosed refuses the call, with source SourceFailClosed.
	FailClosed
)

type config struct {
	target            string
	decisionTimeout   time.Duration
	failMode          FailMode
	watch             bool
	localDecisions    bool
	flushInterval     time.Duration
	backoffBase       time.Duration
	backoffMax        time.Duration
	awayProbeInterval time.Duration
	logger            *slog.Logger
	classifier        Classifier
	dialOptions       []grpc.DialOption
	logClock          logClock // the change logs' clock; replaced in tests
}

// Option configures a Client; see New.
type Option func(*config)

// WithTarget sets breakerd's address: "host:port", "unix:/path/to.sock" or
// any gRPC target. Default: $BREAKERD_ADDR if set, else DefaultTarget.
func WithTarget(target string) Option { return func(c *config) { c.target = target } }

// WithDecisionTimeout sets the deadline of each Acquire, AcquireFirst and
// Report RPC. Default 20 ms.
func WithDecisionTimeout(d time.Duration) Option { return func(c *config) { c.decisionTimeout = d } }

// WithFailMode sets what Acquire answers when breakerd is unreachable or
// too slow. Default FailOpen.
func WithFailMode(m FailMode) Option { return func(c *config) { c.failMode = m } }

// WithWatch turns the Watch stream and its local-refusal cache on or off.
// Default on.
func WithWatch(on bool) Option { return func(c *config) { c.watch = on } }

// WithLocalDecisions turns local decisions on or off (default on; they
// need the Watch stream, WithWatch): while the Watch cache holds a
// dependency's breaker CLOSED with local decisions allowed by its policy,
// first attempts are granted in the client with no RPC (Decision.Source
// SourceLocal, Permit 0), and their outcomes, the chain decisions and the
// decisions made without breakerd (local refusals, fail-open, fail-closed)
// go to breakerd in batches (ReportBatch). Off, every decision that the
// cache does not refuse goes to breakerd, as before.
func WithLocalDecisions(on bool) Option { return func(c *config) { c.localDecisions = on } }

// WithFlushInterval sets how often the batch of local decisions is sent
// while something is pending (nothing runs while nothing is). Default 5 ms.
// It bounds how long a trip caused by locally granted calls waits before
// breakerd sees their outcomes.
func WithFlushInterval(d time.Duration) Option { return func(c *config) { c.flushInterval = d } }

// WithWatchBackoff sets the Watch reconnect backoff: full jitter over base
// doubling up to max. Default 100 ms to 5 s.
func WithWatchBackoff(base, max time.Duration) Option {
	return func(c *config) { c.backoffBase, c.backoffMax = base, max }
}

// WithAwayProbeInterval sets how often, while the sidecar is away (an
// Acquire timed out or found it unavailable), a Health/Check asks whether it
// is back. Nothing is sent while it is present. Default 100 ms.
func WithAwayProbeInterval(d time.Duration) Option {
	return func(c *config) { c.awayProbeInterval = d }
}

// WithLogger sets where the client logs (sidecar unreachable / back, Report
// failures starting / stopping, Watch stream lost). Default slog.Default().
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// WithClassifier sets how Do, Guard, Retry and First turn the call's error
// into an Outcome. Default FromError.
func WithClassifier(f Classifier) Option { return func(c *config) { c.classifier = f } }

// WithDialOptions adds gRPC dial options (the default is plaintext, which is
// what a sidecar on loopback or a unix socket needs, reconnectParams, and a
// stats handler that notes when breakerd answers: another stats handler
// adds to it). They apply after the defaults, so they can replace them.
func WithDialOptions(opts ...grpc.DialOption) Option {
	return func(c *config) { c.dialOptions = append(c.dialOptions, opts...) }
}

// reconnectParams cap the channel's reconnect backoff at 1 s (+-20% jitter).
// gRPC's default grows to 120 s, so after a long sidecar outage a client
// would go on failing open for up to two minutes once the sidecar is back;
// capped, it is back within about a second. MinConnectTimeout is gRPC's
// default, given because ConnectParams has none: a connection attempt to a
// CPU-throttled sidecar is not cut short.
var reconnectParams = grpc.ConnectParams{
	Backoff: backoff.Config{
		BaseDelay:  100 * time.Millisecond,
		Multiplier: 1.6,
		Jitter:     0.2,
		MaxDelay:   time.Second,
	},
	MinConnectTimeout: 20 * time.Second,
}

// ErrClosed is returned (errors.Is) by Acquire, AcquireFirst, Do, Guard,
// Retry, First and WaitReady once Close was called: at once, with no RPC,
// and not counted as a fail-open decision.
var ErrClosed = errors.New("breakerd client is closed")

// Stats is a snapshot of the client's counters since New.
type Stats struct {
	// FailOpen counts decisions allowed because breakerd could not be asked.
	FailOpen uint64
	// FailClosed counts decisions refused because breakerd could not be asked.
	FailClosed uint64
	// LocalRejections counts decisions refused from the Watch cache.
	LocalRejections uint64
	// ReportErrors counts Report RPCs that failed.
	ReportErrors uint64
	// WatchReconnects counts Watch streams opened after the first one.
	WatchReconnects uint64
	// AwayDecisions counts decisions made with no RPC while the sidecar was
	// away (each is also counted in FailOpen or FailClosed).
	AwayDecisions uint64
	// DroppedOutcomes counts outcomes of locally granted calls that never
	// reached breakerd: past 10,000 held and not yet acknowledged, made while
	// the sidecar was away or after Close, or in a ReportBatch given up after
	// three failed sends.
	DroppedOutcomes uint64
}

// Client talks to one breakerd. Make one per process and share it: all
// methods are safe for concurrent use. It owns one gRPC channel and (with
// watch on) one Watch stream; Close releases both.
type Client struct {
	// Constant after New.
	cfg       config
	conn      *grpc.ClientConn
	rpc       pb.BreakerClient
	health    healthpb.HealthClient
	probeWake chan struct{} // capacity 1: starts probeLoop's work when away begins
	window    *sendWindow   // Acquire, AcquireFirst and Report RPCs on the wire
	answers   *answerClock  // when breakerd last answered an RPC
	// The availability logs (rate limited, see changeLog); each owns its
	// condition's state.
	sidecarLog *changeLog // unreachable or away / back
	lateLog    *changeLog // a decision answered late while breakerd answers others / in time again
	reportLog  *changeLog // Reports failing / accepted again
	watchLog   *changeLog // Watch stream lost / back

	cache cache
	held  heldReports // Reports made while away
	// batch is the pending ReportBatch; nil with local decisions off (or
	// the Watch off). Its flusher ends when batchStop is closed, within
	// batchCtx, which Close ends a decision timeout later.
	batch       *batcher
	batchStop   chan struct{}
	batchDone   chan struct{}
	batchCtx    context.Context
	batchCancel context.CancelFunc

	failOpen, failClosed, localRejections, reportErrors, watchReconnects, awayDecisions atomic.Uint64

	away   atomic.Bool // decide with no RPC until a probe or the Watch stream answers
	closed atomic.Bool // set first thing in Close

	stopBackground context.CancelFunc // ends watchLoop and probeLoop
	background     sync.WaitGroup
	closeOnce      sync.Once
}

// New makes a Client. It does not wait for breakerd: the channel starts
// connecting in the background, and a decision that finds it not up within
// the decision timeout fails open (or closed). The error is only for an
// unusable target or option.
func New(opts ...Option) (*Client, error) {
	cfg := config{
		target:            DefaultTarget,
		decisionTimeout:   20 * time.Millisecond,
		watch:             true,
		localDecisions:    true,
		flushInterval:     5 * time.Millisecond,
		backoffBase:       100 * time.Millisecond,
		backoffMax:        5 * time.Second,
		awayProbeInterval: 100 * time.Millisecond,
		classifier:        FromError,
		logClock:          realClock,
	}
	if env := os.Getenv("BREAKERD_ADDR"); env != "" {
		cfg.target = env
	}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.logger == nil {
		cfg.logger = slog.Default()
	}
	if cfg.classifier == nil {
		cfg.classifier = FromError
	}
	if cfg.decisionTimeout <= 0 || cfg.backoffBase <= 0 || cfg.backoffMax < cfg.backoffBase || cfg.awayProbeInterval <= 0 ||
		cfg.flushInterval <= 0 {
		return nil, errors.New("breakerd: decision timeout, watch backoff, away probe interval and flush interval must be positive, max >= base")
	}
	answers := newAnswerClock()
	dial := append([]grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(reconnectParams),
		grpc.WithStatsHandler(progressHandler{answers}),
	}, cfg.dialOptions...)
	conn, err := grpc.NewClient(cfg.target, dial...)
	if err != nil {
		return nil, fmt.Errorf("breakerd: target %q: %w", cfg.target, err)
	}
	conn.Connect()
	c := &Client{cfg: cfg, conn: conn, rpc: pb.NewBreakerClient(conn), health: healthpb.NewHealthClient(conn),
		probeWake: make(chan struct{}, 1), window: newSendWindow(sendWindowLimit), answers: answers,
		sidecarLog: newChangeLog(cfg.logger, cfg.logClock), lateLog: newChangeLog(cfg.logger, cfg.logClock),
		reportLog: newChangeLog(cfg.logger, cfg.logClock), watchLog: newChangeLog(cfg.logger, cfg.logClock)}
	c.cache.entries = make(map[string]*cacheEntry)
	ctx, cancel := context.WithCancel(context.Background())
	c.stopBackground = cancel
	c.background.Go(func() { c.probeLoop(ctx) })
	if cfg.watch {
		c.background.Go(func() { c.watchLoop(ctx) })
	}
	if cfg.watch && cfg.localDecisions {
		c.batch = newBatcher(newClientID())
		c.batchStop, c.batchDone = make(chan struct{}), make(chan struct{})
		c.batchCtx, c.batchCancel = context.WithCancel(context.Background())
		go func() {
			defer close(c.batchDone)
			c.flushLoop(c.batchCtx, c.batchStop)
		}()
	}
	return c, nil
}

// Close sends the pending batch of local decisions (within the decision
// timeout; what is left is dropped, counted in DroppedOutcomes), then ends
// the Watch stream, the away probe and the channel. Safe to call
// more than once. Afterwards Acquire, AcquireFirst, Do, Guard, Retry, First
// and WaitReady return ErrClosed at once, and Report drops its report
// (counted in Stats.ReportErrors), as Close does with the Reports held
// while away.
func (c *Client) Close() error {
	var err error
	c.closeOnce.Do(func() {
		c.closed.Store(true)
		c.window.close()
		c.dropHeld()
		if c.batch != nil {
			deadline := time.AfterFunc(c.cfg.decisionTimeout, c.batchCancel)
			close(c.batchStop)
			<-c.batchDone
			deadline.Stop()
			c.batchCancel()
		}
		c.stopBackground()
		c.background.Wait()
		for _, l := range []*changeLog{c.sidecarLog, c.lateLog, c.reportLog, c.watchLog} {
			l.close()
		}
		err = c.conn.Close()
	})
	return err
}

// WaitReady blocks until the channel to breakerd is connected, or until ctx
// ends (then it returns ctx's error). Optional: call it at startup so the
// first decisions do not fail open while the connection is being set up (a
// fresh connection can take longer than the decision timeout). Decisions
// themselves never wait for the connection. ErrClosed after Close.
func (c *Client) WaitReady(ctx context.Context) error {
	for {
		if c.closed.Load() {
			return ErrClosed
		}
		state := c.conn.GetState()
		switch state {
		case connectivity.Ready:
			return nil
		case connectivity.Shutdown:
			return ErrClosed
		case connectivity.Idle:
			c.conn.Connect()
		}
		if !c.conn.WaitForStateChange(ctx, state) {
			return ctx.Err()
		}
	}
}

// Stats returns a snapshot of the counters.
func (c *Client) Stats() Stats {
	return Stats{
		FailOpen:        c.failOpen.Load(),
		FailClosed:      c.failClosed.Load(),
		LocalRejections: c.localRejections.Load(),
		ReportErrors:    c.reportErrors.Load(),
		WatchReconnects: c.watchReconnects.Load(),
		AwayDecisions:   c.awayDecisions.Load(),
		DroppedOutcomes: c.droppedOutcomes(),
	}
}

// Acquire asks whether dependency may be called now; attempt is 0 for a
// first try and 1, 2, ... for retries. A refusal is not an error: it is a
// Decision with Allowed false. With local decisions (WithLocalDecisions) a
// first attempt on a breaker the Watch cache holds closed is granted in
// the client with no RPC (SourceLocal, Permit 0): report it with
// ReportDecision. The error is for a bad dependency name
// (INVALID_ARGUMENT), ErrClosed after Close, or ctx's own error when ctx
// ended first; breakerd being unreachable or slower than the decision
// timeout gives a fail-open (or fail-closed) Decision instead, and so does,
// with no RPC, breakerd being away (see WithAwayProbeInterval).
//
// At most 32 Acquire, AcquireFirst and Report RPCs are on the wire at once;
// beyond that a call waits its turn, and the decision timeout runs from
// when its RPC is sent. If ctx ends while the RPC is in flight, Acquire
// returns ctx's error at once but the RPC is not cancelled: it stays open up
// to a second more, and a permit breakerd grants meanwhile is reported
// cancelled (so is one that comes after the decision timeout).
func (c *Client) Acquire(ctx context.Context, dependency string, attempt uint32) (Decision, error) {
	if c.closed.Load() {
		return Decision{}, ErrClosed
	}
	e, cached := c.cache.get(dependency)
	if !cached { // a name breakerd sent on the Watch stream is valid
		if err := validateDependency(dependency); err != nil {
			return Decision{}, err
		}
	}
	if err := ctx.Err(); err != nil {
		return Decision{}, err
	}
	if cached {
		if d, refused := e.refusal(dependency, time.Now); refused {
			c.refusedLocally(dependency)
			return d, nil
		}
		if attempt == 0 {
			if d, granted := c.grantLocally(dependency, e); granted {
				return d, nil
			}
		}
	}
	if c.away.Load() {
		return c.awayDecision(dependency), nil
	}
	req := &pb.AcquireRequest{Dependency: dependency, Attempt: attempt}
	resp, err := decide(c, ctx,
		func(rctx context.Context) (*pb.AcquireResponse, error) { return c.rpc.Acquire(rctx, req) },
		func(late *pb.AcquireResponse) {
			c.returnPermit(Decision{Allowed: late.Allowed, Permit: late.Permit, Dependency: dependency})
		})
	if err != nil {
		return c.unreachable(ctx, dependency, err)
	}
	c.reachable()
	return Decision{
		Allowed: resp.Allowed, Permit: resp.Permit, Probe: resp.Probe, State: resp.State,
		Reason: resp.Reason, RetryAfter: resp.RetryAfter.AsDuration(), Dependency: dependency,
		Source: SourceSidecar,
	}, nil
}

// AcquireFirst asks for the first of dependencies (in order of preference)
// that may be called now, in one round trip; Decision.Dependency is the one
// granted. Dependencies the Watch cache refuses are dropped before the RPC;
// if none is left the refusal is local. On fail-open the first remaining
// dependency is granted (without a permit). Errors as for Acquire, plus an
// empty list; the send window and cancellation as for Acquire. With local
// decisions, a first attempt whose first remaining dependency (with
// WithChain: the list's first) the cache allows is granted in the client
// (SourceLocal, Permit 0; report it with ReportDecision).
//
// With WithChain (and WithFirstTier for a list that does not start the
// chain), breakerd counts the decision for the chain, and every candidate
// is sent to it, those the Watch cache holds open too (but while the
// sidecar is away, or when the RPC fails, the decision is made as without
// a name). A grant carries Decision.Chain and Decision.Tier: report it
// with ReportDecision, which sends them with the outcome. An invalid chain
// name is an INVALID_ARGUMENT error naming chain, before any RPC.
func (c *Client) AcquireFirst(ctx context.Context, dependencies []string, attempt uint32, opts ...FirstOption) (Decision, error) {
	return c.acquireFirst(ctx, dependencies, attempt, firstOptionsOf(opts))
}

func (c *Client) acquireFirst(ctx context.Context, dependencies []string, attempt uint32, o firstOptions) (Decision, error) {
	if c.closed.Load() {
		return Decision{}, ErrClosed
	}
	if len(dependencies) == 0 {
		return Decision{}, status.Error(codes.InvalidArgument, "dependencies: must not be empty")
	}
	if err := o.validate(len(dependencies)); err != nil {
		return Decision{}, err
	}
	now := time.Now()
	remaining := make([]string, 0, len(dependencies))
	var local Decision
	for _, dep := range dependencies {
		if err := validateDependency(dep); err != nil {
			return Decision{}, err
		}
		if d, refused := c.cache.refuse(dep, now); refused {
			if local.Source != SourceLocal || d.RetryAfter < local.RetryAfter {
				local.RetryAfter = d.RetryAfter
			}
			local.State, local.Reason, local.Source = d.State, d.Reason, SourceLocal
			continue
		}
		remaining = append(remaining, dep)
	}
	if err := ctx.Err(); err != nil {
		return Decision{}, err
	}
	away := c.away.Load()
	if len(remaining) == 0 && (!o.named || away) {
		c.refusedChainLocally(dependencies, o)
		return local, nil
	}
	// Local decisions: the first remaining candidate (with a chain name the
	// first of the list: a named chain skips none) may be granted in the
	// client; if it may not, breakerd decides over them all.
	if attempt == 0 && len(remaining) > 0 && !away && (!o.named || remaining[0] == dependencies[0]) {
		if e, ok := c.cache.get(remaining[0]); ok {
			if d, ok := c.grantLocally(remaining[0], e); ok {
				if o.named {
					d.Chain, d.Tier = o.chain, o.firstTier
					c.batch.chainDecided(o.chain, o.firstTier, false)
				}
				return d, nil
			}
		}
	}
	// A named chain asks breakerd about every candidate (a copy: the tier
	// of a late permit is found after the caller has its answer), so that it
	// counts every decision, the ultimate fallback ("none") too.
	sent := remaining
	if o.named {
		sent = slices.Clone(dependencies)
	}
	// granted gives a decision granted through a named chain its tier.
	granted := func(d Decision) Decision {
		if o.named && d.Allowed {
			d.Chain, d.Tier = o.chain, tierOf(sent, d.Dependency, o.firstTier)
		}
		return d
	}
	if away {
		return granted(c.awayDecision(remaining[0])), nil
	}
	req := &pb.AcquireFirstRequest{Dependencies: sent, Attempt: attempt}
	if o.named {
		req.Chain, req.FirstTier = o.chain, o.firstTier
	}
	resp, err := decide(c, ctx,
		func(rctx context.Context) (*pb.AcquireFirstResponse, error) { return c.rpc.AcquireFirst(rctx, req) },
		func(late *pb.AcquireFirstResponse) {
			c.returnPermit(granted(Decision{Allowed: late.Allowed, Permit: late.Permit, Dependency: late.Dependency}))
		})
	if err != nil {
		notSent, err := c.noAnswer(ctx, err)
		if err != nil {
			return Decision{}, err
		}
		if len(remaining) == 0 { // a named chain, every candidate known open: as without a name
			c.refusedChainLocally(dependencies, o)
			return local, nil
		}
		var d Decision
		if notSent {
			d = c.awayDecision(remaining[0])
		} else {
			d = c.failDecision(remaining[0])
		}
		if !d.Allowed {
			d.Dependency = "" // none granted
		}
		return granted(d), nil
	}
	c.reachable()
	return granted(Decision{
		Allowed: resp.Allowed, Permit: resp.Permit, Probe: resp.Probe, State: resp.State,
		Reason: resp.Reason, RetryAfter: resp.RetryAfter.AsDuration(), Dependency: resp.Dependency,
		Source: SourceSidecar,
	}), nil
}

// Report tells breakerd how the call allowed with permit went. A permit of
// 0 (fail-open) is not sent. Report never fails the caller: errors are
// counted (Stats.ReportErrors) and logged (rate limited, see the client
// README), and so are Reports made after Close. A Report made while the
// sidecar is away is held (up to 1,024; past that the oldest is dropped,
// counted) and sent from the background once breakerd is back. It is not cut short by ctx's cancellation (only by the
// decision timeout, from when it is sent), so it can be called after the
// caller gave up.
func (c *Client) Report(ctx context.Context, dependency string, permit uint64, outcome Outcome) {
	c.ReportDecision(ctx, Decision{Allowed: true, Permit: permit, Dependency: dependency}, outcome)
}

// ReportDecision is Report for the permit of d (d.Dependency, d.Permit),
// plus, for a decision granted through a named chain (AcquireFirst with
// WithChain), d.Chain and d.Tier: breakerd counts the outcome in
// breakerd_chain_outcomes_total{chain,tier,class}. A refused decision
// sends nothing.
//
// For a local grant (Source SourceLocal, Allowed) it sends no RPC: the
// outcome, classified as a Report would be, is queued for the next
// ReportBatch (with the grant's generation, and its chain and tier) and
// ReportDecision returns at once; there is no effect to learn, here as for
// any Report. An outcome that cannot be queued (10,000 held, the sidecar
// away, the client closed) is dropped, counted in Stats.DroppedOutcomes.
// Report with a permit of 0 (what a local grant carries) sends nothing.
func (c *Client) ReportDecision(ctx context.Context, d Decision, outcome Outcome) {
	c.report(ctx, d, outcome, false)
}

// returnPermit reports a permit that arrived after its caller stopped
// waiting: the call was never made. Sent even while away.
func (c *Client) returnPermit(d Decision) {
	c.report(context.Background(), d, Explicit(ClassCancelled), true)
}

// report is ReportDecision; keep sends it even while away (a late permit
// going back).
func (c *Client) report(ctx context.Context, d Decision, outcome Outcome, keep bool) {
	if d.localGrant() {
		c.reportLocal(d, outcome)
		return
	}
	if !d.Allowed || d.Permit == 0 {
		return
	}
	req := outcome.request(d.Dependency, d.Permit)
	req.Chain, req.Tier = d.Chain, d.Tier
	c.sendReport(ctx, d.Dependency, req, keep)
}

// sendReport sends req through the window's report lane. While away (unless
// keep) it is held and sent once breakerd is back (heldReports), and so is
// one dropped from the window's queue because breakerd went away meanwhile.
// After Close it is dropped, counted in report_errors.
func (c *Client) sendReport(ctx context.Context, dependency string, req *pb.ReportRequest, keep bool) {
	if c.closed.Load() {
		c.reportErrors.Add(1)
		return
	}
	if c.away.Load() && !keep {
		c.hold(dependency, req)
		return
	}
	_, err := send(c, context.WithoutCancel(ctx), laneReport, keep,
		func(rctx context.Context) (*pb.ReportResponse, error) { return c.rpc.Report(rctx, req) },
		func(_ *pb.ReportResponse, err error, _ bool) { c.reported(dependency, err) })
	if errors.Is(err, errNotSent) {
		c.hold(dependency, req) // flushed from the queue: away (or closed: then counted)
	}
}

// reported counts and logs how a Report RPC ended (late ones too).
func (c *Client) reported(dependency string, err error) {
	if err != nil {
		c.reportErrors.Add(1)
		if c.closed.Load() {
			return // cut short by Close: nothing to tell
		}
		c.reportLog.wrong(slog.LevelWarn, "breakerd: Report failing, counting report errors until one is accepted",
			"target", c.cfg.target, "dependency", dependency, "error", err)
		return
	}
	if c.reportLog.isWrong() {
		c.reportLog.right(slog.LevelInfo, "breakerd: Reports accepted again", "target", c.cfg.target)
	}
}

// CachedState is what the Watch cache knows about dependency (false when
// nothing, e.g. with watch off or while the stream is down). For
// diagnostics and tests; Acquire consults the cache itself.
func (c *Client) CachedState(dependency string) (State, bool) {
	return c.cache.state(dependency)
}

// unreachable turns an RPC error into a fail-open/closed decision for
// dependency, except INVALID_ARGUMENT (the caller's bug), the caller's own
// ctx ending and the client closing, which are returned (see noAnswer). A
// call dropped from the send window because the sidecar went away
// meanwhile is an away decision.
func (c *Client) unreachable(ctx context.Context, dependency string, err error) (Decision, error) {
	notSent, err := c.noAnswer(ctx, err)
	switch {
	case err != nil:
		return Decision{}, err
	case notSent:
		return c.awayDecision(dependency), nil
	}
	return c.failDecision(dependency), nil
}

// noAnswer takes in a decision RPC's error: INVALID_ARGUMENT (the caller's
// bug), the caller's own ctx ending and the client closing are returned;
// otherwise the caller decides from its fail mode. UNAVAILABLE, or a timeout
// with nothing answered by breakerd after the RPC was sent, marks the
// sidecar away; a timeout while breakerd answered other RPCs is one late
// answer (answers.go). notSent: the call was dropped from the send window
// because the sidecar went away meanwhile.
func (c *Client) noAnswer(ctx context.Context, err error) (notSent bool, _ error) {
	if status.Code(err) == codes.InvalidArgument {
		return false, err
	}
	if ctxErr := ctx.Err(); ctxErr != nil {
		return false, ctxErr
	}
	if c.closed.Load() {
		return false, ErrClosed
	}
	var late *lateError
	switch {
	case errors.Is(err, errNotSent):
		return true, nil
	case errors.As(err, &late) && c.answers.answeredSince(late.sentAt):
		if !c.lateLog.isWrong() {
			c.lateLog.wrong(slog.LevelWarn, "breakerd: late with a decision while answering others; that decision failed "+
				c.failWord()+", and breakerd is not marked away", "target", c.cfg.target, "error", err)
		}
	case marksAway(err):
		c.markAway(err)
	case !c.sidecarLog.isWrong():
		c.sidecarLog.wrong(slog.LevelWarn, "breakerd: sidecar unreachable, failing "+c.failWord(),
			"target", c.cfg.target, "error", err)
	}
	return false, nil
}

// failDecision is the fail mode's answer for dependency, counted.
func (c *Client) failDecision(dependency string) Decision {
	if c.cfg.failMode == FailClosed {
		c.failClosed.Add(1)
		c.decidedWithoutSidecar(dependency, decidedFailClosed)
		return Decision{Dependency: dependency, Source: SourceFailClosed}
	}
	c.failOpen.Add(1)
	c.decidedWithoutSidecar(dependency, decidedFailOpen)
	return Decision{Allowed: true, Dependency: dependency, Source: SourceFailOpen}
}

// reachable: breakerd answered an Acquire in time (cheap when nothing
// changed).
func (c *Client) reachable() {
	if c.sidecarLog.isWrong() {
		c.sidecarLog.right(slog.LevelInfo, "breakerd: sidecar reachable again", "target", c.cfg.target)
	}
	if c.lateLog.isWrong() {
		c.lateLog.right(slog.LevelInfo, "breakerd: answers decisions in time again", "target", c.cfg.target)
	}
}

func (c *Client) failWord() string {
	if c.cfg.failMode == FailClosed {
		return "closed"
	}
	return "open"
}

// validateDependency applies the wire rule (1-200 bytes of
// [A-Za-z0-9._:/@-]) so a bad name is an error even while breakerd is down;
// the error is an INVALID_ARGUMENT status, as breakerd's would be.
func validateDependency(dep string) error { return validateName("dependency", dep) }

// validateName applies the rule of dependency names to the value of field
// (a dependency, a chain), naming the field in the error.
func validateName(field, name string) error {
	if len(name) == 0 || len(name) > 200 {
		return status.Errorf(codes.InvalidArgument, "%s: must be 1-200 bytes (got %d)", field, len(name))
	}
	for i := 0; i < len(name); i++ {
		b := name[i]
		ok := b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' ||
			b == '.' || b == '_' || b == ':' || b == '/' || b == '@' || b == '-'
		if !ok {
			return status.Errorf(codes.InvalidArgument, "%s %q: byte %d (%q) is not in [A-Za-z0-9._:/@-]", field, name, i, b)
		}
	}
	return nil
}
