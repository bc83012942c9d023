package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/google/uuid"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
	"github.com/switchboard-dev/switchboard/persistence/sqlite"
)

// The figures of the storage life cycle: storage (bytes on disk per
// retained message) and ingest-retention (ingest while the cleaner purges
// a backlog of messages past their retention).

// fillBatch is the messages of one bulk-fill transaction.
const fillBatch = 1000

// fillDelivered stores n delivered messages straight into the embedded
// store at path, message i as if accepted and delivered at at(i) (a
// message's raw content, id, numbers and body, is what a submission gives
// us). It returns the mean of that raw content in bytes per message.
func fillDelivered(path string, n int64, bodySize int, at func(i int64) time.Time) (raw float64, err error) {
	ctx := context.Background()
	cfg := sqlite.DefaultConfig()
	cfg.Path = path
	st, err := sqlite.Open(ctx, cfg)
	if err != nil {
		return 0, err
	}
	defer func() { err = errors.Join(err, st.Close()) }()
	t0 := at(0)
	if err := st.PutFrontend(ctx, persistence.Frontend{Name: frontendName, Mode: persistence.ModePull, CreatedAt: t0, UpdatedAt: t0}); err != nil {
		return 0, err
	}
	if err := st.PutRoute(ctx, persistence.Route{Prefix: routePrefix, Frontend: frontendName, UpdatedAt: t0}); err != nil {
		return 0, err
	}
	var sub messages.Submission
	if err := json.Unmarshal(newBody(0, bodySize), &sub); err != nil {
		return 0, err
	}
	var rawTotal int64
	batch := make([]persistence.NewMessage, 0, fillBatch)
	outcomes := make([]persistence.Outcome, 0, fillBatch)
	for i := int64(0); i < n; {
		batch, outcomes = batch[:0], outcomes[:0]
		when := at(i) // a batch shares its time: at(i) moves by a few ms a batch
		for ; i < n && len(batch) < fillBatch; i++ {
			m := persistence.NewMessage{
				ID: uuid.Must(uuid.NewV7()).String(), SourceMSISDN: sub.SourceMSISDN, DestinationMSISDN: destination(int(i)),
				Body: sub.Body, SourceSMSC: "bench", DestSMSC: "bench", Frontend: frontendName,
				State: messages.StatePending, Detail: "accepted for frontend " + frontendName,
				Work: &persistence.WorkSpec{Kind: persistence.WorkDelivery, Target: frontendName, DueAt: when},
			}
			rawTotal += int64(len(m.ID) + len(m.SourceMSISDN) + len(m.DestinationMSISDN) + len(m.Body))
			batch = append(batch, m)
			outcomes = append(outcomes, persistence.Outcome{Kind: persistence.WorkDelivery, Target: frontendName,
				MessageID: m.ID, Result: persistence.ResultDelivered, Detail: "delivered"})
		}
		if _, err := st.Accept(ctx, when, batch); err != nil {
			return 0, fmt.Errorf("fill: %w", err)
		}
		if _, err := st.CompleteWork(ctx, when, outcomes); err != nil {
			return 0, fmt.Errorf("fill: %w", err)
		}
	}
	return float64(rawTotal) / float64(n), nil
}

// storageResult is the storage figure: bytes on disk per retained
// (delivered) message, and the raw content of one.
type storageResult struct {
	messages     int64
	fileBytes    int64
	perMessage   float64
	rawPerMsg    float64
	fill, closed time.Duration
}

func (s storageResult) summary() string {
	return fmt.Sprintf("%d delivered messages (each with its history of two entries, its ledger entry and its indexes) in %d bytes on disk = %.0f B/msg "+
		"against %.0f B of raw content (id, numbers, body) = %.2fx; filled in %v",
		s.messages, s.fileBytes, s.perMessage, s.rawPerMsg, s.perMessage/s.rawPerMsg, s.fill.Round(100*time.Millisecond))
}

// runStorage fills a store with delivered messages and measures it on disk
// once its write-ahead log is checkpointed into it (the store closed).
func runStorage(o options, dir string) (storageResult, error) {
	r := storageResult{messages: o.storageCount}
	path := filepath.Join(dir, "switchboard.db")
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return r, err
	}
	t := time.Now()
	raw, err := fillDelivered(path, r.messages, o.bodySize, func(int64) time.Time { return t })
	r.fill = time.Since(t)
	if err != nil {
		return r, err
	}
	for _, p := range []string{path, path + "-wal"} {
		if fi, err := os.Stat(p); err == nil {
			r.fileBytes += fi.Size()
		}
	}
	r.rawPerMsg = raw
	r.perMessage = float64(r.fileBytes) / float64(r.messages)
	return r, nil
}

// runIngestRetention: the ingest figure on a node whose cleaner purges at
// the intake's rate (rate, the ingest figure's of the same repeat), as in
// a node running for longer than its retention, where messages come to
// the end of their retention as fast as they came in. Its store is
// bulk-loaded with delivered messages that came to rest one after the
// other at that rate, and its retention set so that one second's worth of
// them is past it when it starts and the rest passes it, at that rate,
// through the warm-up and the window (the # line tells how fast the
// cleaner purged). The retention is short (seconds), so that the cleaner's
// passes come every few hundred milliseconds as they come every minute on
// a node with the default day: each pass purges what came to the end of
// its retention since the last one.
func runIngestRetention(o options, bodies [][]byte, dir string, prof *profiler, rate float64) (r runResult, err error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return r, err
	}
	rate = max(rate, 100)
	span := o.warmup + o.window + 2*time.Second
	backlog := int64(rate * (span + time.Second).Seconds())
	base := time.Now().Add(-10 * time.Second)
	step := time.Duration(float64(time.Second) / rate)
	t := time.Now()
	if _, err := fillDelivered(filepath.Join(dir, "switchboard.db"), backlog, o.bodySize,
		func(i int64) time.Time { return base.Add(time.Duration(i) * step) }); err != nil {
		return r, err
	}
	filled := time.Since(t)
	cfg := nodeConfig("bench", dir)
	// One second's worth is past its retention at the start (the node
	// starts at about now).
	cfg.Retention = time.Since(base) - time.Second
	cfg.RetentionFailed = cfg.Retention
	// The short retention needs a short redelivery horizon (this node does
	// not federate).
	cfg.ForwardMaxRetries, cfg.ForwardRetryInterval, cfg.HTTPTimeout = 1, 100*time.Millisecond, 100*time.Millisecond
	b, err := startNodeConfig(cfg, len(bodies))
	if err != nil {
		return r, err
	}
	client := b.api
	defer func() {
		if serr := b.close(client); serr != nil && err == nil {
			err = serr
		}
	}()
	if err := b.pullFrontend(); err != nil {
		return r, err
	}
	if err := b.route(); err != nil {
		return r, err
	}
	var inWindow [2]float64
	submitWindow(b, client, o, bodies, prof, func(i int) { inWindow[i] = b.purged() }, &r)
	purgeRate := (inWindow[1] - inWindow[0]) / r.window.Seconds()
	r.note = fmt.Sprintf("the cleaner purged %.0f msg/s in the window, messages came to the end of their retention at %.0f msg/s (the ingest run's rate; %d bulk-loaded in %v); %s",
		purgeRate, rate, backlog, filled.Round(100*time.Millisecond), b.actorLoad(r.window))
	if purgeRate < 0.9*rate {
		r.note += "; THE CLEANER FELL BEHIND"
	}
	if r.count == 0 {
		return r, fmt.Errorf("no submit completed in the window (%d failed; first: %s)", r.errors, r.firstErr)
	}
	return r, nil
}

// purged is the node's switchboard_retention_purged_total, all states.
func (b *benchNode) purged() float64 { return b.counters("switchboard_retention_purged_total", "")[""] }
