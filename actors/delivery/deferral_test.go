package delivery

import (
	"context"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/actors/smppout"
	"github.com/switchboard-dev/switchboard/actors/smppout/smsctest"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
	"github.com/switchboard-dev/switchboard/persistence/sqlite"
	"github.com/switchboard-dev/switchboard/persistence/sqlite/sqlitetest"
	"github.com/switchboard-dev/switchboard/polltest"
	"github.com/switchboard-dev/switchboard/smpp"
)

// Deferrals where the store, the policy and a frontend meet: the history a
// deferral leaves, the attempts it gives back, and the resend mark the
// claims after it get (resendNote, as an smpp worker reads it).

// deferralBase is when these tests' message is accepted.
var deferralBase = time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)

// deferralLease is the lease of these tests' claims.
const deferralLease = 30 * time.Second

// deferralStore is a SQLite store holding frontend fe and message m1,
// due for delivery to fe at deferralBase.
func deferralStore(t *testing.T, fe messages.Frontend) *sqlite.Store {
	t.Helper()
	db := sqlitetest.Open(t)
	fe.CreatedAt, fe.UpdatedAt = deferralBase, deferralBase
	if err := db.PutFrontend(context.Background(), fe); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Accept(context.Background(), deferralBase, []persistence.NewMessage{{
		ID: "m1", SourceMSISDN: "+15550100", DestinationMSISDN: "+447700900123", Body: "hi",
		SourceSMSC: "smsc-in", DestSMSC: "smsc-out", Frontend: fe.Name, State: messages.StatePending, Detail: "accepted",
		Work: &persistence.WorkSpec{Kind: persistence.WorkDelivery, Target: fe.Name, DueAt: deferralBase},
	}}); err != nil {
		t.Fatal(err)
	}
	return db
}

// claimM1 is owner's claim of m1 at now (by id when byID: a bus claim),
// which must count attempt `attempt`.
func claimM1(t *testing.T, db *sqlite.Store, fe, owner string, now time.Time, byID bool, attempt int) persistence.Work {
	t.Helper()
	req := persistence.ClaimRequest{Kind: persistence.WorkDelivery, Target: fe, Owner: owner, Limit: 1, Now: now, Lease: deferralLease}
	if byID {
		req.IDs = []string{"m1"}
	}
	c, err := db.ClaimWork(context.Background(), req)
	if err != nil || len(c.Work) != 1 || c.Work[0].Message.Attempts != attempt {
		t.Fatalf("claim by %s at %v: %+v, %v; want m1 at attempt %d", owner, now.Sub(deferralBase), c.Work, err, attempt)
	}
	return c.Work[0]
}

// record commits o at now and wants it applied.
func record(t *testing.T, db *sqlite.Store, now time.Time, o persistence.Outcome) {
	t.Helper()
	if got, err := db.CompleteWork(context.Background(), now, []persistence.Outcome{o}); err != nil || got[0] != persistence.Applied {
		t.Fatalf("%q: %v, %v; want it applied", o.Detail, got, err)
	}
}

// throttlingSMSC is an smpp frontend smsc-fr whose SMSC answers every
// submit_sm ESME_RTHROTTLED, and a store holding it and m1 (deferralStore),
// with its bound client.
func throttlingSMSC(t *testing.T) (messages.Frontend, *sqlite.Store, *smppout.Client) {
	t.Helper()
	smsc := smsctest.New(t, "pw", func(smsctest.Submit) (smpp.Status, bool) { return smpp.StatusThrottled, false })
	fe := messages.Frontend{Name: "smsc-fr", Mode: messages.ModeSMPP, URL: "smpp://sb@" + smsc.Addr, Secret: "pw"}
	db := deferralStore(t, fe)
	c, err := smppout.New(smppout.Config{Store: db, Frontend: fe})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	polltest.Until(t, 20*time.Second, "the bind", c.Bound)
	return fe, db, c
}

// throttled is the outcome of the claim wk at now, which the SMSC
// throttles (sendSMPP's submit, with its resend mark, and the policy's
// verdict on it, fenced as the dispatcher fences it).
func throttled(t *testing.T, c *smppout.Client, db *sqlite.Store, p Policy, wk persistence.Work, now time.Time) persistence.Outcome {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	v := c.Submit(ctx, messages.OutgoingOf(wk.Message), resendNote(ctx, db, wk))
	o := fenced(p.After(wk.Target, wk.MessageID, wk.Message.Attempts, v, now, rand.New(rand.NewPCG(1, 2))), wk, "me")
	if !o.Deferred {
		t.Fatalf("the SMSC's throttle on attempt %d: %+v, want a deferral", wk.Message.Attempts, o)
	}
	return o
}

// lastEntry is m1's last history entry.
func lastEntry(t *testing.T, db *sqlite.Store) messages.HistoryEntry {
	t.Helper()
	m, err := db.GetMessage(context.Background(), "m1")
	if err != nil {
		t.Fatal(err)
	}
	return m.History[len(m.History)-1]
}

// lastDetail is m1's last history entry's detail.
func lastDetail(t *testing.T, db *sqlite.Store) string {
	t.Helper()
	return lastEntry(t, db).Detail
}

var deferralPolicy = Policy{RetryMin: time.Second, RetryMax: time.Minute, MaxAttempts: 5, Validity: time.Hour}

// A deferred claim gives back its attempt, and the claim straight after
// it counts the same attempt again: no resend. When that claim leaves no
// verdict (the node stopped, or its lease ran out, with the submit_sm
// outstanding), the claim after it may send the message a second time and
// is marked, though the last history entry is still the deferral.
func TestResendMarkAfterADeferredAttemptIsLost(t *testing.T) {
	f, db, c := throttlingSMSC(t)
	fe, ctx := f.Name, context.Background()

	wk := claimM1(t, db, fe, "me", deferralBase, false, 1)
	record(t, db, deferralBase.Add(time.Second), throttled(t, c, db, deferralPolicy, wk, deferralBase.Add(time.Second)))
	if e := lastEntry(t, db); e.Resend {
		t.Fatalf("the deferral of attempt 1, no resend: %+v, marked a resend", e)
	}
	// Attempt 1 again: no resend; its submit_sm goes out, and its lease
	// runs out without a verdict.
	wk = claimM1(t, db, fe, "me", deferralBase.Add(2*time.Minute), false, 1)
	if n := resendNote(ctx, db, wk); n != "" {
		t.Fatalf("attempt 1 claimed again after its deferral: marked %q, want no mark", n)
	}
	wk = claimM1(t, db, fe, "me", deferralBase.Add(3*time.Minute), false, 2)
	if n := resendNote(ctx, db, wk); !strings.HasPrefix(n, "resent: attempt 1 left no recorded verdict") {
		t.Fatalf("attempt 2, after attempt 1 claimed again left no verdict: mark %q, want attempt 1's; last entry %q", n, lastDetail(t, db))
	}
}

// A resend (attempt 1 left no verdict) that is deferred keeps the mark
// for the claim after it, the same attempt again; when that claim leaves
// no verdict too, the claim after it is marked for it (attempt 2).
func TestResendMarkAfterADeferredResendIsLost(t *testing.T) {
	f, db, c := throttlingSMSC(t)
	fe, ctx := f.Name, context.Background()

	claimM1(t, db, fe, "me", deferralBase, false, 1) // no verdict: its lease runs out
	wk := claimM1(t, db, fe, "me", deferralBase.Add(time.Minute), false, 2)
	if n := resendNote(ctx, db, wk); n == "" {
		t.Fatal("attempt 2 after attempt 1 left no verdict: not marked")
	}
	record(t, db, deferralBase.Add(61*time.Second), throttled(t, c, db, deferralPolicy, wk, deferralBase.Add(61*time.Second)))
	if e := lastEntry(t, db); !e.Resend {
		t.Fatalf("the deferral of attempt 2, a resend: %+v, not marked a resend", e)
	}
	// Attempt 2 again: still a resend of attempt 1; it leaves no verdict.
	wk = claimM1(t, db, fe, "me", deferralBase.Add(3*time.Minute), false, 2)
	if n := resendNote(ctx, db, wk); !strings.HasPrefix(n, "resent: attempt 1 left no recorded verdict") {
		t.Fatalf("attempt 2 claimed again after its deferral: mark %q, want attempt 1's; last entry %q", n, lastDetail(t, db))
	}
	wk = claimM1(t, db, fe, "me", deferralBase.Add(4*time.Minute), false, 3)
	if n := resendNote(ctx, db, wk); !strings.HasPrefix(n, "resent: attempt 2 left no recorded verdict") {
		t.Fatalf("attempt 3, after attempt 2 claimed again left no verdict: mark %q, want attempt 2's; last entry %q", n, lastDetail(t, db))
	}
}

// A bus claim is by id and not ring-fenced (LeaseEpoch 0). Instance A's
// webhook answered 429 (a deferral), but A's lease ran out before A
// recorded it (its rounds failed meanwhile); the bus handed the message
// to instance B, which claimed it by id and is sending attempt 2. A's
// deferral, fenced as the dispatcher fences it, is then stale: it must
// not give back B's attempt nor unlease B's row.
func TestLateDeferralLeavesAnotherInstancesClaim(t *testing.T) {
	const fe = "hook"
	db := deferralStore(t, messages.Frontend{Name: fe, Mode: messages.ModeWebhook, URL: "http://127.0.0.1:1/"})
	wa := claimM1(t, db, fe, "A", deferralBase, true, 1)
	o := fenced(deferralPolicy.After(fe, "m1", wa.Message.Attempts, messages.DeliveryResult{ID: "m1", Status: messages.Retry,
		Reason: "HTTP 429", Deferred: true}, deferralBase.Add(time.Second), rand.New(rand.NewPCG(1, 2))), wa, "A")
	claimM1(t, db, fe, "B", deferralBase.Add(deferralLease+time.Second), true, 2)
	got, err := db.CompleteWork(context.Background(), deferralBase.Add(deferralLease+2*time.Second), []persistence.Outcome{o})
	if err != nil {
		t.Fatal(err)
	}
	m, err := db.GetMessage(context.Background(), "m1")
	if err != nil {
		t.Fatal(err)
	}
	if got[0] != persistence.StaleEpoch || m.Attempts != 2 || m.State != messages.StatePending {
		t.Fatalf("A's late deferral on B's claim: %s, message %s at attempt %d; want stale_epoch, pending at attempt 2 (B's, in flight)",
			got[0], m.State, m.Attempts)
	}
}

// An SMSC that throttles one attempt again and again leaves one history
// entry for it, counting the deferrals (persistence.FoldsInto), which
// still tells the claims after it apart: the same attempt again is marked
// only if the deferred claims were resends.
func TestDeferralsOfAnAttemptAreOneEntry(t *testing.T) {
	f, db, c := throttlingSMSC(t)
	fe, ctx := f.Name, context.Background()

	claimM1(t, db, fe, "me", deferralBase, false, 1) // no verdict: its lease runs out
	now := deferralBase.Add(time.Minute)
	for i := range 3 {
		wk := claimM1(t, db, fe, "me", now, false, 2)
		if n := resendNote(ctx, db, wk); !strings.HasPrefix(n, "resent: attempt 1 left no recorded verdict") {
			t.Fatalf("attempt 2, claim %d: mark %q, want attempt 1's; last entry %q", i+1, n, lastDetail(t, db))
		}
		record(t, db, now.Add(time.Second), throttled(t, c, db, deferralPolicy, wk, now.Add(time.Second)))
		now = now.Add(2 * time.Minute)
	}
	m, err := db.GetMessage(ctx, "m1")
	if err != nil {
		t.Fatal(err)
	}
	last := m.History[len(m.History)-1]
	if len(m.History) != 2 || last.Attempt != 2 || last.Deferrals != 3 || !last.Resend ||
		!strings.Contains(last.Detail, "deferred 3 times") || !strings.Contains(last.Detail, "attempt 1 left no recorded verdict") {
		t.Fatalf("history after 3 deferrals of attempt 2: %+v; want accepted and one entry of 3 deferrals of attempt 2, marked", m.History)
	}
}
