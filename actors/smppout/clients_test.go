package smppout

import (
	"context"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/actors/ring"
	"github.com/switchboard-dev/switchboard/actors/smppout/smsctest"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence/sqlite/sqlitetest"
	"github.com/switchboard-dev/switchboard/polltest"
)

// sent records what the clients send to the workers.
type sent struct {
	mu   sync.Mutex
	msgs []any
}

func (s *sent) Send(msg any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.msgs = append(s.msgs, msg)
}

// kicks counts the kicks of frontend smsc's worker; anything else sent
// fails t.
func (s *sent) kicks(t *testing.T) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range s.msgs {
		if k, ok := m.(*messages.Kick); !ok || k.Frontend != "smsc" {
			t.Fatalf("a client sent %#v, want a kick of its frontend's worker", m)
		}
	}
	return len(s.msgs)
}

// TestClientsKickTheWorker: a client kicks its frontend's worker when it
// has bound and when it lost its bind.
func TestClientsKickTheWorker(t *testing.T) {
	smsc := smsctest.New(t, "pw", nil)
	st := sqlitetest.Open(t)
	workers := &sent{}
	cs := NewClients(Config{Store: st, Workers: workers,
		Reconnect: ring.Reconnect{MaxAttempts: 1, Min: time.Hour, Max: time.Hour, Jitter: 0.5}})
	defer cs.Close()
	c, err := cs.Get(messages.Frontend{Name: "smsc", Mode: messages.ModeSMPP, URL: "smpp://sb@" + smsc.Addr, Secret: "pw"})
	if err != nil {
		t.Fatal(err)
	}
	polltest.Until(t, 20*time.Second, "the bind", c.Bound)
	polltest.Until(t, 10*time.Second, "a kick once bound", func() bool { return workers.kicks(t) == 1 })
	smsc.DropAll()
	polltest.Until(t, 10*time.Second, "a kick once the bind is lost", func() bool { return workers.kicks(t) == 2 })
}

// TestClientRateShareFromTheFence: with a submit rate, a client submits
// only while this instance holds part of the ring's delivery work.
func TestClientRateShareFromTheFence(t *testing.T) {
	smsc := smsctest.New(t, "pw", nil)
	st := sqlitetest.Open(t)
	shares := ring.NewShares(0, nil)
	cs := NewClients(Config{Store: st, Fence: shares,
		Reconnect: ring.Reconnect{MaxAttempts: 1, Min: time.Hour, Max: time.Hour, Jitter: 0.5}})
	defer cs.Close()
	c, err := cs.Get(messages.Frontend{Name: "smsc", Mode: messages.ModeSMPP, URL: "smpp://sb@" + smsc.Addr + "?rate=100", Secret: "pw"})
	if err != nil {
		t.Fatal(err)
	}
	polltest.Until(t, 20*time.Second, "the bind", c.Bound)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out := messages.Outgoing{ID: "m-1", SourceMSISDN: "+15550001", DestinationMSISDN: "+33600000001", Body: "hi"}
	if v := c.Submit(ctx, out, ""); v.Status != messages.Retry || !strings.Contains(v.Reason, "no share of the submit rate") {
		t.Fatalf("a submit with no partition: %+v", v)
	}
	self := messages.RingMember{InstanceID: "i-0", Services: messages.AllServices,
		Ranges: []messages.TokenRange{{Lo: 0, Hi: math.MaxUint64}}}
	shares.Apply(messages.RingAssignment{Epoch: 1, Master: "i-0", Members: []messages.RingMember{self}}, "i-0", messages.AllServices)
	if v := c.Submit(ctx, out, ""); v.Status != messages.Delivered {
		t.Fatalf("a submit holding the whole ring: %+v", v)
	}
}
