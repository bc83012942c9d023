package sim

import (
	"context"
	"errors"
	"math/rand"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/persistence"
)

// readCalls are the methods of persistence.Store that only read: a full
// disk still answers them.
var readCalls = map[string]bool{
	"Ping": true, "Ring": true, "GetMessage": true, "ListMessages": true, "Stats": true, "OldestDue": true, "Ledger": true,
	"ForwardTargets": true, "PeerRegistries": true, "Purgeable": true, "CountPurgeable": true,
	"OldestUnrelayed": true, "Routes": true, "Frontends": true, "Credentials": true, "ListAudit": true,
}

// faultedView is an incarnation's view of st, node 0's store, whose
// faults are f.
func faultedView(st persistence.Store, f StoreFault) (*storeView, *Cluster) {
	c := &Cluster{storeFaults: map[int]StoreFault{0: f}, storeFailed: map[int]int{}, frontRng: rand.New(rand.NewSource(1))}
	return &storeView{Store: &faultStore{Store: st, c: c, i: 0}, log: newClaimLog()}, c
}

// TestStoreFaultMeetsEveryCall: while a node's store is Full every write
// of persistence.Store fails with ErrNoSpace and writes nothing, and every
// read goes through; with IOError 1 every call fails with EIO, reads too;
// a slow store fails nothing.
func TestStoreFaultMeetsEveryCall(t *testing.T) {
	st := openTestStore(t)
	ctx := context.Background()

	full, _ := faultedView(st, StoreFault{Full: true})
	errs := callEvery(t, full)
	if through := not(errs, persistence.ErrNoSpace, readCalls); len(through) > 0 {
		t.Errorf("with the store Full, these writes did not fail with ErrNoSpace:\n  %s", strings.Join(through, "\n  "))
	}
	for name := range readCalls {
		if errors.Is(errs[name], persistence.ErrNoSpace) {
			t.Errorf("with the store Full, the read %s failed: %v", name, errs[name])
		}
	}
	reg := persistence.PeerRegistry{Peer: "n2", Frontends: []string{"x"}, UpdatedAt: time.Now()}
	if err := full.PutPeerRegistry(ctx, reg); !errors.Is(err, persistence.ErrNoSpace) {
		t.Errorf("PutPeerRegistry while Full: %v, want ErrNoSpace", err)
	}
	if regs, err := st.PeerRegistries(ctx); err != nil || len(regs) != 0 {
		t.Errorf("a write that failed with ErrNoSpace wrote %v (%v)", regs, err)
	}

	failing, _ := faultedView(st, StoreFault{IOError: 1})
	if through := not(callEvery(t, failing), syscall.EIO, nil); len(through) > 0 {
		t.Errorf("with IOError 1, these calls did not fail with EIO:\n  %s", strings.Join(through, "\n  "))
	}

	slow, _ := faultedView(st, StoreFault{Slow: time.Millisecond})
	for name, err := range callEvery(t, slow) {
		if errors.Is(err, persistence.ErrNoSpace) || errors.Is(err, syscall.EIO) {
			t.Errorf("a slow store failed %s: %v", name, err)
		}
	}
}
