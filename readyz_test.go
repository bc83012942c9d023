package switchboard_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/persistence"
)

// pingWatch is a store that records how long each ping may take (the
// deadline of its context, from the call).
type pingWatch struct {
	persistence.Store
	mu      sync.Mutex
	allowed []time.Duration
}

func (p *pingWatch) Ping(ctx context.Context) error {
	allowed := time.Duration(-1) // no deadline
	if dl, ok := ctx.Deadline(); ok {
		allowed = time.Until(dl)
	}
	p.mu.Lock()
	p.allowed = append(p.allowed, allowed)
	p.mu.Unlock()
	return p.Store.Ping(ctx)
}

// readyzPingBound is the longest a readiness check may wait for the store:
// less than the timeout of the shipped StatefulSet's readiness probe (3 s,
// deploy/kubernetes/statefulset.yaml), so that a store that hangs (a
// Postgres that stopped answering without closing its connections) is
// answered 503 "the store does not answer" within it.
const readyzPingBound = 3 * time.Second

// TestReadyzWaitsBrieflyForTheStore: /readyz gave the store's ping the
// request's whole 30 s: against a Postgres that stopped answering (a
// partition, a frozen server) the probe hung 30 s before it said why, well
// past any probe's timeout, and every probe meanwhile held a request open.
func TestReadyzWaitsBrieflyForTheStore(t *testing.T) {
	cfg := testConfig(t)
	st := &pingWatch{Store: newFaultyStore(t)}
	cfg.Store = st
	h := startNode(t, cfg)
	st.mu.Lock()
	st.allowed = nil
	st.mu.Unlock()
	h.must(200, "GET", "/readyz", nil, nil)
	st.mu.Lock()
	defer st.mu.Unlock()
	if len(st.allowed) == 0 {
		t.Fatal("/readyz did not ping the store")
	}
	for _, d := range st.allowed {
		if d < 0 || d > readyzPingBound {
			t.Errorf("/readyz let the store's ping take %v (negative: no bound), want at most %v", d.Round(time.Second), readyzPingBound)
		}
	}
}
