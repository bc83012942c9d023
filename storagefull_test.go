package switchboard_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence/pgtest"
	"github.com/switchboard-dev/switchboard/polltest"
)

// TestPostgresDiskFullOfAnAckIsStorageFull: Postgres tells of a full disk
// only by its errors (disk_full, SQLSTATE 53100). One met by a pull's ack
// (an outcome, as a delivery, a peer's status report or the cleaner are)
// left switchboard_storage_full at 0 and /readyz at "ok", and new submits
// were taken: only a submit's or a forward's own failed commit shut the
// gate. Now any write of the store that finds no room does, for
// space.Hold, as docs/operations.md says; the gate opens again by itself.
func TestPostgresDiskFullOfAnAckIsStorageFull(t *testing.T) {
	dsn := pgtest.DSN(t)
	h := startNode(t, siteConfig(t, dsn, "site-a-0"))
	h.pullFrontend("fe", "44")
	h.submit("full-1", "4471")
	out := h.poll("fe", 1, 5000, 60000)
	if len(out) != 1 {
		t.Fatalf("poll: %v", out)
	}

	ctx := context.Background()
	db, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(ctx)
	for _, q := range []string{
		`CREATE FUNCTION disk_full() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN RAISE EXCEPTION 'could not extend file: No space left on device' USING ERRCODE = 'disk_full'; END $$`,
		`CREATE TRIGGER disk_full BEFORE UPDATE ON messages FOR EACH ROW EXECUTE FUNCTION disk_full()`,
	} {
		if _, err := db.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	ack := map[string]any{"results": []messages.DeliveryResult{{ID: out[0].ID, Status: messages.Delivered, Attempt: out[0].Attempt}}}
	if status, body := h.do("POST", "/api/frontends/fe/ack", ack); status < 500 {
		t.Fatalf("ack on a full disk: %d %s, want it refused", status, body)
	}

	full := func() (float64, map[string]string) {
		return metricValue(t, scrape(t, h), "switchboard_storage_full"), h.readyz()
	}
	if g, doc := full(); g != 1 || doc["storage"] != "full" || !strings.Contains(doc["storage_reason"], "No space left on device") {
		t.Fatalf("after the ack found no room: switchboard_storage_full %v, /readyz %v; want 1 and full with the store's error", g, doc)
	}
	h.apiError(507, messages.CodeStorageFull, "POST", "/api/messages", map[string]string{
		"id": "full-2", "source_msisdn": "1555", "destination_msisdn": "4472", "message_body": "hi"})

	if _, err := db.Exec(ctx, `DROP TRIGGER disk_full ON messages`); err != nil {
		t.Fatal(err)
	}
	polltest.Eventually(t, 30*time.Second, func() error { // space.Hold after the failure
		if g, doc := full(); g != 0 || doc["storage"] != "ok" {
			return fmt.Errorf("switchboard_storage_full %v, /readyz %v", g, doc)
		}
		return nil
	})
	h.submit("full-3", "4473")
}
