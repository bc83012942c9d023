package switchboard_test

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard"
	"github.com/switchboard-dev/switchboard/clock"
	"github.com/switchboard-dev/switchboard/nodetest"
	"github.com/switchboard-dev/switchboard/persistence/pgtest"
)

// skewed is the wall clock off by a fixed amount: the clock of a host
// that is not kept in time.
type skewed struct {
	clock.Real
	by time.Duration
}

func (s skewed) Now() time.Time { return s.Real.Now().Add(s.by) }

// The instances of a site lease work to one another by their own clocks.
// One whose clock ran 2 minutes ahead started and took a message that a
// consumer polling another instance held under a 60 s lease (a second
// delivery, where ring.md promises that consumers on several instances
// never get the same message at once). It is refused at start, saying why.
func TestSiteInstanceWithASkewedClockIsRefused(t *testing.T) {
	dsn := pgtest.DSN(t)
	h1 := startNode(t, siteConfig(t, dsn, "c1"))
	waitRing(t, []*harness{h1}, "c1")
	h1.pullFrontend("fe", "44")
	id := h1.submit("s1", "441234")
	if got := h1.poll("fe", 10, 5000, 60_000); len(got) != 1 || got[0].ID != id {
		t.Fatalf("c1's poll got %+v, want %s", got, id)
	}

	for by, way := range map[time.Duration]string{2 * time.Minute: "ahead of", -2 * time.Minute: "behind"} {
		cfg := siteConfig(t, dsn, "c2")
		cfg.Clock = skewed{by: by}
		n, err := switchboard.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err = n.Start(ctx)
		cancel()
		if err != nil {
			if !strings.Contains(err.Error(), way+" the database server's") || !strings.Contains(err.Error(), "NTP") {
				t.Errorf("an instance whose clock is %v off was refused with %q, want the skew and what to do", by, err)
			}
			continue
		}
		h2 := &harness{t: t, node: n, cfg: cfg, base: "https://" + n.Addr(), token: cfg.APIToken, client: &http.Client{}}
		h2.client = trustingClient(t, filepath.Join(cfg.DataDir, "selfsigned.pem"))
		got := h2.poll("fe", 10, 0, 60_000)
		nodetest.StopEmbedded(t, n)
		t.Errorf("an instance whose clock is %v off started, and its poll took %+v while c1's 60 s lease of %s held", by, got, id)
	}
}
