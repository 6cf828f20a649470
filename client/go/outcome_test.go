package breakerd_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/breakerd/breakerd/client/go"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

type statusErr int

func (e statusErr) Error() string   { return "custom" }
func (e statusErr) HTTPStatus() int { return int(e) }

func TestFromErrorClasses(t *testing.T) {
	dnsErr := &net.DNSError{Err: "no such host", Name: "x"}
	cases := []struct {
		err  error
		want breakerd.Class
	}{
		{nil, breakerd.ClassSuccess},
		{&breakerd.HTTPError{StatusCode: 200}, breakerd.ClassSuccess},
		{&breakerd.HTTPError{StatusCode: 503}, breakerd.ClassServerError},
		{&breakerd.HTTPError{StatusCode: 504}, breakerd.ClassTimeout},
		{&breakerd.HTTPError{StatusCode: 408}, breakerd.ClassTimeout},
		{&breakerd.HTTPError{StatusCode: 429}, breakerd.ClassRateLimited},
		{&breakerd.HTTPError{StatusCode: 403}, breakerd.ClassAuthError},
		{&breakerd.HTTPError{StatusCode: 404}, breakerd.ClassBadRequest},
		{&breakerd.HTTPError{StatusCode: 999}, breakerd.ClassServerError},
		{fmt.Errorf("x: %w", statusErr(401)), breakerd.ClassAuthError},
		{status.Error(codes.Canceled, ""), breakerd.ClassCancelled},
		{status.Error(codes.Aborted, ""), breakerd.ClassBadRequest},
		{status.Error(codes.Unauthenticated, ""), breakerd.ClassAuthError},
		{status.Error(codes.DataLoss, ""), breakerd.ClassServerError},
		{context.DeadlineExceeded, breakerd.ClassTimeout},
		{os.ErrDeadlineExceeded, breakerd.ClassTimeout},
		{fmt.Errorf("x: %w", context.Canceled), breakerd.ClassCancelled},
		{syscall.ECONNRESET, breakerd.ClassConnectionError},
		{dnsErr, breakerd.ClassConnectionError},
		{errors.New("other"), breakerd.ClassServerError},
		{breakerd.Classified(errors.New("refusal"), breakerd.Explicit(breakerd.ClassSoftFailure)), breakerd.ClassSoftFailure},
	}
	for _, tc := range cases {
		if got := breakerd.FromError(tc.err).Class(); got != tc.want {
			t.Errorf("FromError(%v).Class() = %v, want %v", tc.err, got, tc.want)
		}
	}
	if got := breakerd.GRPCCode(codes.OK).Class(); got != breakerd.ClassSuccess {
		t.Errorf("GRPCCode(OK) = %v", got)
	}
	if got := breakerd.FromError(&breakerd.HTTPError{StatusCode: 429, RetryAfter: 3 * time.Second}).RetryAfter(); got != 3*time.Second {
		t.Errorf("HTTPError RetryAfter carried as %v", got)
	}
}

func TestHTTPHelpers(t *testing.T) {
	for in, want := range map[string]time.Duration{"120": 120 * time.Second, " 5 ": 5 * time.Second, "": 0,
		"Wed, 21 Oct 2015 07:28:00 GMT": 0, "-1": 0} {
		if got := breakerd.ParseRetryAfter(in); got != want {
			t.Errorf("ParseRetryAfter(%q) = %v, want %v", in, got, want)
		}
	}
	resp := &http.Response{StatusCode: 503, Header: http.Header{"Retry-After": {"7"}}}
	var he *breakerd.HTTPError
	if err := breakerd.CheckHTTP(resp); !errors.As(err, &he) || he.StatusCode != 503 || he.RetryAfter != 7*time.Second {
		t.Errorf("CheckHTTP(503) = %v", err)
	}
	if o := breakerd.FromHTTPResponse(resp); o.Class() != breakerd.ClassServerError || o.RetryAfter() != 7*time.Second {
		t.Errorf("FromHTTPResponse = %v", o)
	}
	if err := breakerd.CheckHTTP(&http.Response{StatusCode: 302}); err != nil {
		t.Errorf("CheckHTTP(302) = %v", err)
	}
}
