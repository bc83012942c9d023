package switchboard_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/actors/smppout/smsctest"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
	"github.com/switchboard-dev/switchboard/polltest"
	"github.com/switchboard-dev/switchboard/smpp"
)

// outcomeGate holds the writes of a verdict on message id while armed,
// until open is closed.
type outcomeGate struct {
	persistence.Store
	id      string
	armed   atomic.Bool
	holding atomic.Int32
	open    chan struct{}
}

// RecordReceipts takes a few ms, as a commit on a Postgres store does.
func (g *outcomeGate) RecordReceipts(ctx context.Context, now time.Time, rs []persistence.Receipt) ([]persistence.Completion, error) {
	select {
	case <-time.After(5 * time.Millisecond):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return g.Store.RecordReceipts(ctx, now, rs)
}

func (g *outcomeGate) Write(ctx context.Context, now time.Time, w persistence.Write) (persistence.Written, error) {
	if g.armed.Load() {
		for _, o := range w.Outcomes {
			if o.MessageID == g.id {
				g.holding.Add(1)
				<-g.open
				break
			}
		}
	}
	return g.Store.Write(ctx, now, w)
}

// TestSMPPRetiredWorkerKeepsHeldReceipt: the SMSC sends a receipt right
// after the submit_sm_resp, before the verdict's commit (the client holds
// it in memory, answered ESME_ROK: ReceiptWait). When the worker is
// retiring (its frontend deleted), or the node stops, once the verdict is
// committed the worker calls Committed (an errand records the held
// receipt) and stops at once, drained; its Release closes the client,
// whose Close canceled the errand's store call: the receipt was lost (the
// SMSC had ESME_ROK and does not send it again). Close now waits for it.
func TestSMPPRetiredWorkerKeepsHeldReceipt(t *testing.T) {
	for _, how := range []string{"kept", "deleted", "stopped"} {
		deleted := how == "deleted"
		t.Run(how, func(t *testing.T) {
			smsc := smsctest.New(t, "pw", func(s smsctest.Submit) (smpp.Status, bool) { return smpp.StatusOK, true })
			g := &outcomeGate{Store: newFaultyStore(t), id: "m-1", open: make(chan struct{})}
			defer func() {
				select {
				case <-g.open:
				default:
					close(g.open)
				}
			}()
			cfg := testConfig(t)
			cfg.Store = g
			cfg.WebhookTimeout = 5 * time.Second
			h := smppSubmitOut(t, cfg, smsc)
			if deleted {
				h.deleteFrontend("smsc", "33")
			}
			id := receiptDuringVerdictCommit(t, g, smsc)
			close(g.open)
			if how == "stopped" {
				h.stop()
				polltest.Eventually(t, 5*time.Second, func() error {
					m, err := g.Store.GetMessage(context.Background(), "m-1")
					if err == nil && (len(m.SMSC) != 1 || m.SMSC[0].Receipt != "DELIVRD") {
						err = fmt.Errorf("the SMSC had ESME_ROK for the receipt of %s, but after the stop m-1 is %s, SMSC ids %+v", id, m.State, m.SMSC)
					}
					return err
				})
				return
			}
			h.waitState("m-1", messages.StateDelivered)
			if deleted {
				polltest.Until(t, 20*time.Second, "the unbind once the worker retired", func() bool { return !smsc.Bound() })
			}
			polltest.Eventually(t, 5*time.Second, func() error {
				m := h.message("m-1")
				if len(m.SMSC) != 1 || m.SMSC[0].Receipt != "DELIVRD" {
					return fmt.Errorf("the SMSC had ESME_ROK for the receipt of %s, but m-1's SMSC ids are %+v", id, m.SMSC)
				}
				return nil
			})
		})
	}
}

// TestSMPPReceiptOnTheNewBindDuringAChange: during a change (window=4 ->
// 5) the old connection stays bound for the retiring worker's submit, and
// the new client binds beside it. The SMSC sends the submit's receipt at
// once, on the account's newest bind (as smsctest and many SMSCs do),
// before the old worker's verdict commit. The new client never saw that
// SMSC id accepted; it holds the receipt all the same (its id names no
// stored message yet) and its recheck finds the message once the old
// worker's commit is in, so the receipt is recorded (8931074: a pin, it
// passes before this commit).
func TestSMPPReceiptOnTheNewBindDuringAChange(t *testing.T) {
	smsc := smsctest.New(t, "pw", func(s smsctest.Submit) (smpp.Status, bool) { return smpp.StatusOK, s.Conn == 1 })
	g := &outcomeGate{Store: newFaultyStore(t), id: "m-1", open: make(chan struct{})}
	var once sync.Once
	let := func() { once.Do(func() { close(g.open) }) }
	defer let()
	cfg := testConfig(t)
	cfg.Store = g
	cfg.WebhookTimeout = 5 * time.Second
	h := smppSubmitOut(t, cfg, smsc)
	h.must(200, "PUT", "/api/frontends/smsc", map[string]string{"mode": "smpp", "url": "smpp://sb:pw@" + smsc.Addr + "?window=5"}, nil)
	polltest.Until(t, 20*time.Second, "the new bind", func() bool { n, _ := smsc.Binds(); return n == 2 })
	id := receiptDuringVerdictCommit(t, g, smsc)
	let()
	h.waitState("m-1", messages.StateDelivered)
	polltest.Eventually(t, 5*time.Second, func() error {
		m := h.message("m-1")
		if len(m.SMSC) != 1 || m.SMSC[0].Receipt != "DELIVRD" {
			return fmt.Errorf("the SMSC had ESME_ROK for the receipt of %s, but m-1's SMSC ids are %+v", id, m.SMSC)
		}
		return nil
	})
}

// receiptDuringVerdictCommit lets the SMSC answer m-1's held submit_sm
// with g armed, waits until g holds the commit of its verdict, and sends
// m-1's DELIVRD receipt meanwhile (answered ESME_ROK); it returns m-1's
// SMSC id.
func receiptDuringVerdictCommit(t *testing.T, g *outcomeGate, smsc *smsctest.SMSC) string {
	t.Helper()
	g.armed.Store(true)
	if n := smsc.Release(); n != 1 {
		t.Fatalf("released %d", n)
	}
	polltest.Until(t, 20*time.Second, "the verdict's commit under way", func() bool { return g.holding.Load() == 1 })
	id := smsc.Submits()[0].ID
	if st, err := smsc.Receipt(id, "DELIVRD"); err != nil || st != smpp.StatusOK {
		t.Fatalf("receipt: %v %v", st, err)
	}
	return id
}
