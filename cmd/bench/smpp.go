package main

import (
	"context"
	"fmt"
	"net"
	"runtime/pprof"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard-dev/switchboard/smpp"
)

// smppESMEs is how many ESMEs (one transmitter session each) the
// smpp-ingest figure binds; together their windows keep as many submits
// in flight as the ingest figure's clients (--clients, 64).
const smppESMEs = 4

// runSMPPIngest: ESMEs bound to the node's --smpp-listen submit_sm with
// windows (--clients in flight in all, as the HTTPS clients of ingest);
// the figure is the submit_sm_resp ESME_ROK per second, each after its
// commit. The text is the ingest body's (160 GSM 7-bit characters: one
// SMS), to the same destinations.
func runSMPPIngest(o options, dir string, prof *profiler) (r runResult, err error) {
	cfg := nodeConfig("bench", dir)
	cfg.SMPPListen = "127.0.0.1:0"
	cfg.SMPPWindow = o.clients
	b, err := startNodeConfig(cfg, 4)
	if err != nil {
		return r, err
	}
	defer func() {
		if serr := b.close(b.api); serr != nil && err == nil {
			err = serr
		}
	}()
	if err := b.pullFrontend(); err != nil {
		return r, err
	}
	if err := b.route(); err != nil {
		return r, err
	}
	window := max(1, o.clients/smppESMEs)
	var phase atomic.Int32
	e := &esmes{phase: &phase}
	for i := range smppESMEs {
		if err := e.start(b.node.SMPPAddr(), i, window); err != nil {
			e.stop()
			return r, err
		}
	}
	r.window, r.cpu = measureWith(&phase, o, prof, nil, b)
	e.stop()
	e.fill(&r)
	if r.count == 0 {
		return r, fmt.Errorf("no submit_sm answered ESME_ROK in the window (%d failed; first: %s)", r.errors, r.firstErr)
	}
	r.note = fmt.Sprintf("%d ESMEs, window %d each; %s", smppESMEs, window, b.actorLoad(r.window))
	return r, nil
}

// esmes are the bench's SMPP clients.
type esmes struct {
	phase    *atomic.Int32
	sessions []*smpp.Session
	wg       sync.WaitGroup
	mu       sync.Mutex
	lat      []time.Duration // ESME_ROK answers in the window
	errs     int64
	firstErr string
}

// start binds ESME i and keeps its window full until the run is over.
func (e *esmes) start(addr string, i, window int) error {
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return err
	}
	cfg := smpp.DefaultSessionConfig(smpp.RoleESME)
	cfg.Window = window
	s, err := smpp.NewSession(nc, cfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := s.Bind(ctx, smpp.BindTransmitter, smpp.Bind{SystemID: fmt.Sprintf("bench%d", i), Password: "bench"}); err != nil {
		s.Close()
		return fmt.Errorf("bind: %w", err)
	}
	e.sessions = append(e.sessions, s)
	text := []byte(benchText(160))
	type sent struct {
		call *smpp.Call
		at   time.Time
	}
	calls := make(chan sent, window)
	e.wg.Add(2)
	go pprof.Do(context.Background(), pprof.Labels("bench", "client"), func(context.Context) {
		defer e.wg.Done()
		defer close(calls)
		for n := 0; e.phase.Load() != over; n++ {
			sm := &smpp.SM{Source: smpp.Address{Addr: "15550001"}, Dest: smpp.Address{Addr: destination(i*1_000_000 + n%1_000_000)}, ShortMessage: text}
			at := time.Now()
			c, err := s.Send(context.Background(), smpp.PDU{Command: smpp.SubmitSM, Body: sm})
			if err != nil {
				e.fail(err)
				return
			}
			calls <- sent{c, at}
		}
	})
	go pprof.Do(context.Background(), pprof.Labels("bench", "client"), func(context.Context) {
		defer e.wg.Done()
		var lat []time.Duration
		for c := range calls {
			resp, err := c.call.Result()
			d := time.Since(c.at)
			switch {
			case err != nil:
				e.fail(err)
			case resp.Status != smpp.StatusOK:
				e.fail(fmt.Errorf("submit_sm_resp %s", resp.Status))
			case e.phase.Load() == measuring:
				lat = append(lat, d)
			}
		}
		e.mu.Lock()
		e.lat = append(e.lat, lat...)
		e.mu.Unlock()
	})
	return nil
}

func (e *esmes) fail(err error) {
	if e.phase.Load() == over {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.errs++
	if e.firstErr == "" {
		e.firstErr = err.Error()
	}
}

// stop ends the run: the senders stop, the answers of what is in flight
// are awaited, then each ESME unbinds.
func (e *esmes) stop() {
	e.phase.Store(over)
	e.wg.Wait()
	for _, s := range e.sessions {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = s.Unbind(ctx)
		cancel()
	}
}

// fill sets r's count, rate and latencies.
func (e *esmes) fill(r *runResult) {
	slices.Sort(e.lat)
	r.count, r.submits = int64(len(e.lat)), int64(len(e.lat))
	r.rate = float64(r.count) / r.window.Seconds()
	r.p50, r.p99 = quantile(e.lat, 0.50), quantile(e.lat, 0.99)
	r.errors, r.firstErr = e.errs, e.firstErr
}
