package smppout

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/actors/ring"
	"github.com/switchboard-dev/switchboard/actors/smppout/smsctest"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence/sqlite"
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
	cfg := sqlite.DefaultConfig()
	cfg.Path = filepath.Join(t.TempDir(), "s.db")
	st, err := sqlite.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
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
