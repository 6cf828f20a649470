// Command example guards calls to an HTTP upstream with breakerd.
//
//	go run ./example -addr 127.0.0.1:50051 [-dep example/upstream] [-calls 5] [-fail]
//
// It serves its own upstream on loopback (answering 503 with -fail, else
// 200), calls it -calls times through Client.Do, prints each result and the
// client's counters, then shows a fallback chain with First.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/breakerd/breakerd/client/go"
)

func main() {
	addr := flag.String("addr", breakerd.DefaultTarget, "breakerd gRPC address (host:port or unix:/path)")
	dep := flag.String("dep", "example/upstream", "dependency name")
	calls := flag.Int("calls", 5, "number of guarded calls")
	fail := flag.Bool("fail", false, "make the upstream answer 503")
	flag.Parse()

	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if *fail {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer upstream.Close()

	c, err := breakerd.New(breakerd.WithTarget(*addr), breakerd.WithDecisionTimeout(200*time.Millisecond))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	// Optional: so the first decisions do not fail open while connecting.
	ready, cancel := context.WithTimeout(ctx, 2*time.Second)
	if err := c.WaitReady(ready); err != nil {
		log.Printf("breakerd not connected yet (%v): the first calls may fail open", err)
	}
	cancel()

	get := func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, upstream.URL, nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		return breakerd.CheckHTTP(resp)
	}

	for i := 1; i <= *calls; i++ {
		err := c.Do(ctx, *dep, get)
		var open *breakerd.OpenError
		switch {
		case errors.As(err, &open):
			fmt.Printf("call %d: refused (%s, source %s, retry after %s)\n", i, open.Reason, open.Source, open.RetryAfter.Round(time.Millisecond))
		case err != nil:
			fmt.Printf("call %d: failed: %v\n", i, err)
		default:
			fmt.Printf("call %d: ok\n", i)
		}
	}

	// A fallback chain: the first dependency breakerd allows runs. Named, so
	// breakerd counts which tier served (breakerd_chain_decisions_total).
	err = c.First(ctx, []string{*dep, *dep + "-backup"}, func(ctx context.Context, d string) error {
		fmt.Printf("fallback chain: calling %s\n", d)
		return nil
	}, breakerd.WithChain("example"))
	if err != nil {
		fmt.Printf("fallback chain: %v\n", err)
	}
	fmt.Printf("stats: %+v\n", c.Stats())
}
