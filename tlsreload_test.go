package switchboard_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard"
	"github.com/switchboard-dev/switchboard/httpapi/certs"
)

// TestStartRefusesAnotherNodesCertificate: with --tls-ca a node does not
// start with a certificate that does not name it (--name): its peers
// check that name and would refuse every call of it and to it.
func TestStartRefusesAnotherNodesCertificate(t *testing.T) {
	dir := t.TempDir()
	if err := certs.InitCA(dir, []string{"a", "b"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t)
	cfg.Name = "a"
	cfg.TLSCert, cfg.TLSKey = certs.NodeFiles(dir, "b")
	cfg.TLSCA, _ = certs.CAFiles(dir)
	n, err := switchboard.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	err = n.Start(ctx)
	if err == nil {
		_ = n.Stop(ctx)
		t.Fatal("a started with b's certificate")
	}
	if !strings.Contains(err.Error(), `does not name node "a"`) {
		t.Fatalf("Start: %v; want the certificate refused for not naming a", err)
	}
}
