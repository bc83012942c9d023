package storetest

import (
	"errors"
	"time"

	"github.com/switchboard-dev/switchboard/persistence"
)

func lifecycleCases() []testCase {
	return []testCase{
		{"KindAndPing", lifecycleKindAndPing},
		{"TimesAreUTCMicroseconds", lifecycleTimes},
		{"CallsAfterCloseAreErrClosed", lifecycleClosed},
	}
}

func lifecycleKindAndPing(f *fixture) {
	if k := f.store.Kind(); k != "sqlite" && k != "postgres" {
		f.Errorf("Kind() = %q, want \"sqlite\" or \"postgres\"", k)
	}
	if err := f.store.Ping(f.ctx); err != nil {
		f.Errorf("Ping: %v", err)
	}
}

// lifecycleTimes feeds the store times far from UTC with nanoseconds and
// checks every time that comes back.
func lifecycleTimes(f *fixture) {
	zone := time.FixedZone("far west", -(11*3600 + 45*60))
	t0 := time.Date(2030, time.December, 31, 23, 59, 59, 999_999_999, zone)
	t1 := t0.Add(1234567 * time.Nanosecond)
	t2 := t1.Add(time.Hour + 1)
	nm := newMsg("times")
	nm.Work.DueAt = t0
	res := f.accept(t0, nm)
	f.checkMessage("Accept", res[0].Message, expected(nm, t0))

	c := f.claim(persistence.ClaimRequest{Kind: persistence.WorkDelivery, Target: feA, Owner: ownerA, Limit: 1, Now: t1, Lease: 1500 * time.Microsecond})
	if len(c.Work) != 1 {
		f.Fatalf("claimed %d rows", len(c.Work))
	}
	w := c.Work[0]
	f.wantTime("Work.DueAt", w.DueAt, t0)
	f.wantTime("Work.CreatedAt", w.CreatedAt, t0)
	f.wantTime("Work.LeaseUntil", w.LeaseUntil, t1.Add(1500*time.Microsecond))
	f.wantTime("Work.Message.CreatedAt", w.Message.CreatedAt, t0)

	f.completeOne(t1, persistence.Outcome{MessageID: "times", Result: persistence.ResultRetry, RetryAt: t2, Detail: "later"}, persistence.Applied)
	c = f.claimDelivery(feA, ownerA, t1, 1)
	f.wantTime("Claim.NextDue", c.NextDue, t2)
	f.wantOldestDue(t2, t2)
	f.deliver(t2, "times")
	m := f.get("times")
	f.wantTime("UpdatedAt", m.UpdatedAt, t2)
	for i, h := range m.History {
		f.wantTime("History.At", h.At, []time.Time{t0, t1, t2}[i])
	}
	f.wantTime("Ledger.At", f.ledger("times", feA).At, t2)
	f.wantTime("ListMessages CreatedAt", f.list(persistence.ListQuery{Limit: 1}).Messages[0].CreatedAt, t0)

	if err := f.store.PutRoute(f.ctx, persistence.Route{Prefix: "1", Frontend: feA, UpdatedAt: t1}); err != nil {
		f.Fatalf("PutRoute: %v", err)
	}
	f.wantTime("Route.UpdatedAt", f.routes()[0].UpdatedAt, t1)
	f.putFrontend(persistence.Frontend{Name: "fe", Mode: persistence.ModePull, CreatedAt: t0, UpdatedAt: t1})
	fe := f.frontends()[0]
	f.wantTime("Frontend.CreatedAt", fe.CreatedAt, t0)
	f.wantTime("Frontend.UpdatedAt", fe.UpdatedAt, t1)

	f.accept(t0, newMsg("times-x"))
	f.fail(t1, "times-x")
	rr := f.resubmit(t2, reroute("times-x", feB, t2))
	if !rr[0].Applied {
		f.Fatalf("resubmit not applied")
	}
	f.wantTime("resubmitted SubmittedAt", f.get("times-x").SubmittedAt, t2)
	exp := f.expire(persistence.ExpireRequest{Now: t2.Add(2 * day), SubmittedBefore: t2.Add(day), Limit: 10})
	if len(exp) != 1 {
		f.Fatalf("expired %d, want 1", len(exp))
	}
	f.wantTime("expired UpdatedAt", exp[0].UpdatedAt, t2.Add(2*day))
	f.wantTime("expired SubmittedAt", exp[0].SubmittedAt, t2)
}

func lifecycleClosed(f *fixture) {
	f.accept(base, newMsg("closed"))
	if err := f.store.Close(); err != nil {
		f.Fatalf("Close: %v", err)
	}
	ctx := f.ctx
	s := f.store
	calls := map[string]func() error{
		"Ping": func() error { return s.Ping(ctx) },
		"Accept": func() error {
			_, err := s.Accept(ctx, base, []persistence.NewMessage{newMsg("after-close")})
			return err
		},
		"GetMessage": func() error { _, err := s.GetMessage(ctx, "closed"); return err },
		"ListMessages": func() error {
			_, err := s.ListMessages(ctx, persistence.ListQuery{Limit: 1})
			return err
		},
		"Stats": func() error { _, err := s.Stats(ctx); return err },
		"ClaimWork": func() error {
			_, err := s.ClaimWork(ctx, persistence.ClaimRequest{Kind: persistence.WorkDelivery, Target: feA, Owner: ownerA, Limit: 1, Now: base, Lease: lease})
			return err
		},
		"CompleteWork": func() error {
			_, err := s.CompleteWork(ctx, base, []persistence.Outcome{{Kind: persistence.WorkDelivery, Target: feA, MessageID: "closed", Result: persistence.ResultDelivered}})
			return err
		},
		"ReleaseLeases": func() error { _, err := s.ReleaseLeases(ctx, ownerA); return err },
		"Ledger":        func() error { _, err := s.Ledger(ctx, persistence.WorkDelivery, "closed", feA); return err },
		"ExpireMessages": func() error {
			_, err := s.ExpireMessages(ctx, persistence.ExpireRequest{Now: base, SubmittedBefore: base, Limit: 1})
			return err
		},
		"Resubmit": func() error {
			_, err := s.Resubmit(ctx, base, []persistence.Reroute{reroute("closed", feA, base)})
			return err
		},
		"ApplyStatus": func() error {
			_, err := s.ApplyStatus(ctx, base, []persistence.StatusUpdate{status("closed", peerP, persistence.ResultDelivered)})
			return err
		},
		"QueueForwards": func() error { _, err := s.QueueForwards(ctx, base, peerP, "x", 1); return err },
		"FailForwards": func() error {
			_, err := s.FailForwards(ctx, persistence.ForwardExpiry{Now: base, QueuedBefore: base, Limit: 1})
			return err
		},
		"PeerRegistries": func() error { _, err := s.PeerRegistries(ctx); return err },
		"PutPeerRegistry": func() error {
			return s.PutPeerRegistry(ctx, persistence.PeerRegistry{Peer: peerP, Frontends: []string{"fe"}, UpdatedAt: base})
		},
		"Routes":         func() error { _, err := s.Routes(ctx); return err },
		"PutRoute":       func() error { return s.PutRoute(ctx, persistence.Route{Prefix: "1", Frontend: feA, UpdatedAt: base}) },
		"DeleteRoute":    func() error { return s.DeleteRoute(ctx, "1") },
		"Frontends":      func() error { _, err := s.Frontends(ctx); return err },
		"PutFrontend":    func() error { return s.PutFrontend(ctx, persistence.Frontend{Name: "fe", Mode: persistence.ModePull}) },
		"DeleteFrontend": func() error { return s.DeleteFrontend(ctx, "fe") },
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, persistence.ErrClosed) {
			f.Errorf("%s after Close: err %v, want one wrapping ErrClosed", name, err)
		}
	}
}
