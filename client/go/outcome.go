package breakerd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	pb "github.com/breakerd/breakerd/client/go/breakerdv1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

// Class is an explicit outcome class, as breakerd counts it.
type Class = pb.Outcome

// Outcome classes. ClassUnspecified means "breakerd classifies the HTTP
// status or gRPC code".
const (
	ClassUnspecified     = pb.Outcome_OUTCOME_UNSPECIFIED
	ClassSuccess         = pb.Outcome_OUTCOME_SUCCESS
	ClassTimeout         = pb.Outcome_OUTCOME_TIMEOUT
	ClassConnectionError = pb.Outcome_OUTCOME_CONNECTION_ERROR
	ClassServerError     = pb.Outcome_OUTCOME_SERVER_ERROR
	ClassRateLimited     = pb.Outcome_OUTCOME_RATE_LIMITED
	ClassBadRequest      = pb.Outcome_OUTCOME_BAD_REQUEST
	ClassAuthError       = pb.Outcome_OUTCOME_AUTH_ERROR
	ClassCancelled       = pb.Outcome_OUTCOME_CANCELLED
	ClassSoftFailure     = pb.Outcome_OUTCOME_SOFT_FAILURE
)

// Outcome is how a guarded call ended, as sent in a Report: an explicit
// class, an HTTP status or a gRPC code (breakerd classifies those two), plus
// an optional Retry-After and the call's latency. Build one with Success,
// Explicit, HTTPStatus, GRPCCode, FromError or FromHTTPResponse. The zero
// value is not a valid outcome. Outcome is a small immutable value.
type Outcome struct {
	class      Class
	httpStatus int
	grpcCode   codes.Code
	hasGRPC    bool
	retryAfter time.Duration
	latency    time.Duration
}

// Success is the outcome of a call that worked.
func Success() Outcome { return Explicit(ClassSuccess) }

// Explicit is an outcome of the given class (e.g. ClassSoftFailure).
func Explicit(c Class) Outcome { return Outcome{class: c} }

// HTTPStatus is the outcome of an HTTP call that answered with code
// (breakerd classifies it: 1xx-3xx success, 408/504 timeout, 429 rate
// limited, 401/403 auth error, other 4xx bad request, 5xx server error).
// A code outside 100..599 is a server error.
func HTTPStatus(code int) Outcome {
	if code < 100 || code > 599 {
		return Explicit(ClassServerError)
	}
	return Outcome{httpStatus: code}
}

// GRPCCode is the outcome of a gRPC call that ended with code (breakerd
// classifies it). A code outside 0..16 is a server error.
func GRPCCode(code codes.Code) Outcome {
	if code > 16 {
		return Explicit(ClassServerError)
	}
	return Outcome{grpcCode: code, hasGRPC: true}
}

// FromHTTPResponse is HTTPStatus(resp.StatusCode) with the Retry-After
// header (seconds form) when present.
func FromHTTPResponse(resp *http.Response) Outcome {
	return HTTPStatus(resp.StatusCode).WithRetryAfter(ParseRetryAfter(resp.Header.Get("Retry-After")))
}

// WithRetryAfter returns o carrying the upstream's Retry-After: a cooldown
// opened by this outcome lasts at least that long.
func (o Outcome) WithRetryAfter(d time.Duration) Outcome { o.retryAfter = d; return o }

// WithLatency returns o carrying how long the call took (the guards set it).
func (o Outcome) WithLatency(d time.Duration) Outcome { o.latency = d; return o }

// RetryAfter is the upstream's Retry-After carried by o, or 0.
func (o Outcome) RetryAfter() time.Duration { return o.retryAfter }

// Class is o's class: the explicit one, or the one breakerd derives from the
// HTTP status or gRPC code (the same table as the server).
func (o Outcome) Class() Class {
	switch {
	case o.class != ClassUnspecified:
		return o.class
	case o.httpStatus != 0:
		return classifyHTTP(o.httpStatus)
	case o.hasGRPC:
		return classifyGRPC(o.grpcCode)
	}
	return ClassServerError
}

func (o Outcome) String() string {
	switch {
	case o.class != ClassUnspecified:
		return o.class.String()
	case o.httpStatus != 0:
		return fmt.Sprintf("http_status=%d", o.httpStatus)
	case o.hasGRPC:
		return "grpc_code=" + o.grpcCode.String()
	}
	return "OUTCOME_UNSET"
}

// retryable: a failure another attempt may fix. Success, bad request, auth
// error, cancelled and soft failure are not retried.
func (o Outcome) retryable() bool {
	switch o.Class() {
	case ClassTimeout, ClassConnectionError, ClassServerError, ClassRateLimited:
		return true
	}
	return false
}

func (o Outcome) request(dependency string, permit uint64) *pb.ReportRequest {
	req := &pb.ReportRequest{Dependency: dependency, Permit: permit, Outcome: o.class}
	switch {
	case o.class != ClassUnspecified:
	case o.httpStatus != 0:
		req.HttpStatus = uint32(o.httpStatus)
	case o.hasGRPC:
		code := int32(o.grpcCode)
		req.GrpcCode = &code
	default:
		req.Outcome = ClassServerError
	}
	if o.latency > 0 {
		req.Latency = durationpb.New(o.latency)
	}
	if o.retryAfter > 0 {
		req.RetryAfter = durationpb.New(o.retryAfter)
	}
	return req
}

func classifyHTTP(code int) Class {
	switch {
	case code < 400:
		return ClassSuccess
	case code == 408 || code == 504:
		return ClassTimeout
	case code == 429:
		return ClassRateLimited
	case code == 401 || code == 403:
		return ClassAuthError
	case code < 500:
		return ClassBadRequest
	}
	return ClassServerError
}

func classifyGRPC(code codes.Code) Class {
	switch code {
	case codes.OK:
		return ClassSuccess
	case codes.Canceled:
		return ClassCancelled
	case codes.DeadlineExceeded:
		return ClassTimeout
	case codes.Unavailable:
		return ClassConnectionError
	case codes.ResourceExhausted:
		return ClassRateLimited
	case codes.Unauthenticated, codes.PermissionDenied:
		return ClassAuthError
	case codes.InvalidArgument, codes.NotFound, codes.AlreadyExists, codes.FailedPrecondition,
		codes.Aborted, codes.OutOfRange, codes.Unimplemented:
		return ClassBadRequest
	}
	return ClassServerError
}

// ParseRetryAfter reads a Retry-After header value in its seconds form
// ("120"); anything else (empty, an HTTP date, garbage) gives 0.
func ParseRetryAfter(value string) time.Duration {
	n, err := strconv.ParseUint(strings.TrimSpace(value), 10, 32)
	if err != nil {
		return 0
	}
	return time.Duration(n) * time.Second
}

// HTTPError is an HTTP answer the caller treats as a failure. A guarded
// call returns it (see CheckHTTP) so FromError reports its status.
type HTTPError struct {
	StatusCode int
	// RetryAfter from the response's Retry-After header, 0 if none.
	RetryAfter time.Duration
}

func (e *HTTPError) Error() string {
	return fmt.Sprintf("http status %d %s", e.StatusCode, http.StatusText(e.StatusCode))
}

// HTTPStatus returns the status code (FromError looks for this method).
func (e *HTTPError) HTTPStatus() int { return e.StatusCode }

// CheckHTTP returns nil for a 1xx-3xx response and an *HTTPError (with the
// Retry-After header) otherwise. It does not read or close the body.
func CheckHTTP(resp *http.Response) error {
	if resp.StatusCode < 400 {
		return nil
	}
	return &HTTPError{StatusCode: resp.StatusCode, RetryAfter: ParseRetryAfter(resp.Header.Get("Retry-After"))}
}

// Classified wraps err so that FromError reports o for it (errors.Is/As and
// Unwrap still see err). Use it for what only the caller can tell, e.g. a
// model refusal: Classified(err, Explicit(ClassSoftFailure)).
func Classified(err error, o Outcome) error { return &classifiedError{err: err, outcome: o} }

type classifiedError struct {
	err     error
	outcome Outcome
}

func (e *classifiedError) Error() string {
	if e.err == nil {
		return "breakerd: classified " + e.outcome.String()
	}
	return e.err.Error()
}
func (e *classifiedError) Unwrap() error { return e.err }

// Classifier maps a guarded call's error (nil on success) to an Outcome.
type Classifier func(error) Outcome

// FromError is the default Classifier. In order:
//
//   - nil: success;
//   - an error wrapped by Classified: its outcome;
//   - an error with an HTTPStatus() int method (like *HTTPError): that status
//     (with *HTTPError's RetryAfter);
//   - a gRPC status error (GRPCStatus() method): its code;
//   - context.DeadlineExceeded, os.ErrDeadlineExceeded or a net.Error whose
//     Timeout() is true: timeout;
//   - context.Canceled: cancelled;
//   - *net.OpError, *net.DNSError, ECONNREFUSED/ECONNRESET/EPIPE: connection error;
//   - anything else: server error.
func FromError(err error) Outcome {
	if err == nil {
		return Success()
	}
	var ce *classifiedError
	if errors.As(err, &ce) {
		return ce.outcome
	}
	var he *HTTPError
	if errors.As(err, &he) {
		return HTTPStatus(he.StatusCode).WithRetryAfter(he.RetryAfter)
	}
	var hs interface{ HTTPStatus() int }
	if errors.As(err, &hs) {
		return HTTPStatus(hs.HTTPStatus())
	}
	var gs interface{ GRPCStatus() *status.Status }
	if errors.As(err, &gs) {
		return GRPCCode(gs.GRPCStatus().Code())
	}
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded),
		errors.As(err, &ne) && ne.Timeout():
		return Explicit(ClassTimeout)
	case errors.Is(err, context.Canceled):
		return Explicit(ClassCancelled)
	}
	var opErr *net.OpError
	var dnsErr *net.DNSError
	if errors.As(err, &opErr) || errors.As(err, &dnsErr) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) {
		return Explicit(ClassConnectionError)
	}
	return Explicit(ClassServerError)
}
