package certs

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "CERTIFICATE" {
		t.Fatalf("%s: no CERTIFICATE block", path)
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return c
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func listDir(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// verifyNode checks that node's certificate in dir chains to the CA in dir
// for both server and client auth, at now, and carries the promised names.
func verifyNode(t *testing.T, dir, node string, now time.Time) {
	t.Helper()
	caCertFile, _ := CAFiles(dir)
	pool, err := LoadPool(caCertFile)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile := NodeFiles(dir, node)
	leaf := readCert(t, certFile)
	if leaf.Subject.CommonName != node {
		t.Errorf("%s: CN = %q, want %q", node, leaf.Subject.CommonName, node)
	}
	if leaf.IsCA {
		t.Errorf("%s: node certificate is a CA", node)
	}
	if !slices.Equal(leaf.DNSNames, []string{node, "localhost"}) {
		t.Errorf("%s: DNS SANs = %q, want [%s localhost]", node, leaf.DNSNames, node)
	}
	var ips []string
	for _, ip := range leaf.IPAddresses {
		ips = append(ips, ip.String())
	}
	if !slices.Equal(ips, []string{"127.0.0.1", "::1"}) {
		t.Errorf("%s: IP SANs = %q, want [127.0.0.1 ::1]", node, ips)
	}
	if !slices.Contains(leaf.ExtKeyUsage, x509.ExtKeyUsageServerAuth) || !slices.Contains(leaf.ExtKeyUsage, x509.ExtKeyUsageClientAuth) {
		t.Errorf("%s: ExtKeyUsage = %v, want server and client auth", node, leaf.ExtKeyUsage)
	}
	for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		for _, host := range []string{node, "localhost", "127.0.0.1", "::1"} {
			_, err := leaf.Verify(x509.VerifyOptions{
				DNSName:     host,
				Roots:       pool,
				CurrentTime: now,
				KeyUsages:   []x509.ExtKeyUsage{usage},
			})
			if err != nil {
				t.Errorf("%s: verify for %q usage %v: %v", node, host, usage, err)
			}
		}
	}
	if _, err := LoadKeyPair(certFile, keyFile); err != nil {
		t.Errorf("%s: key pair: %v", node, err)
	}
	if st, err := os.Stat(keyFile); err != nil {
		t.Fatal(err)
	} else if st.Mode().Perm() != 0o600 {
		t.Errorf("%s: mode %v, want 0600", keyFile, st.Mode().Perm())
	}
}

func TestInitCA(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs") // created by InitCA
	if err := InitCA(dir, []string{"dc1", "dc2", "dc-3.example"}, t0); err != nil {
		t.Fatal(err)
	}
	got := listDir(t, dir)
	want := []string{"ca.key", "ca.pem", "dc-3.example.key", "dc-3.example.pem", "dc1.key", "dc1.pem", "dc2.key", "dc2.pem"}
	if !slices.Equal(got, want) {
		t.Fatalf("files = %q, want %q", got, want)
	}
	ca := readCert(t, filepath.Join(dir, "ca.pem"))
	if !ca.IsCA || !ca.MaxPathLenZero || ca.KeyUsage&x509.KeyUsageCertSign == 0 {
		t.Errorf("CA: IsCA=%v MaxPathLenZero=%v KeyUsage=%v", ca.IsCA, ca.MaxPathLenZero, ca.KeyUsage)
	}
	if st, _ := os.Stat(filepath.Join(dir, "ca.key")); st.Mode().Perm() != 0o600 {
		t.Errorf("ca.key mode %v, want 0600", st.Mode().Perm())
	}
	if st, _ := os.Stat(dir); st.Mode().Perm() != 0o700 {
		t.Errorf("dir mode %v, want 0700", st.Mode().Perm())
	}
	for _, n := range []string{"dc1", "dc2", "dc-3.example"} {
		verifyNode(t, dir, n, t0)
		// Still valid two years on.
		verifyNode(t, dir, n, t0.Add(2*365*24*time.Hour))
	}

	other := t.TempDir()
	if err := InitCA(other, []string{"dc1"}, t0); err != nil {
		t.Fatal(err)
	}
	otherPool, err := LoadPool(filepath.Join(other, "ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	leaf := readCert(t, filepath.Join(dir, "dc1.pem"))
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: otherPool, CurrentTime: t0}); err == nil {
		t.Error("dc1 from one CA verifies against another CA")
	}
}

func TestInitCAReusesCA(t *testing.T) {
	dir := t.TempDir()
	if err := InitCA(dir, []string{"a"}, t0); err != nil {
		t.Fatal(err)
	}
	caPEM := mustRead(t, filepath.Join(dir, "ca.pem"))
	caKey := mustRead(t, filepath.Join(dir, "ca.key"))
	aPEM := mustRead(t, filepath.Join(dir, "a.pem"))

	later := t0.Add(30 * 24 * time.Hour)
	if err := InitCA(dir, []string{"b", "c"}, later); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(caPEM, mustRead(t, filepath.Join(dir, "ca.pem"))) || !bytes.Equal(caKey, mustRead(t, filepath.Join(dir, "ca.key"))) {
		t.Fatal("CA was replaced")
	}
	if !bytes.Equal(aPEM, mustRead(t, filepath.Join(dir, "a.pem"))) {
		t.Fatal("a.pem was rewritten")
	}
	for _, n := range []string{"a", "b", "c"} {
		verifyNode(t, dir, n, later)
	}

	// An existing node is refused and nothing else is written.
	before := listDir(t, dir)
	err := InitCA(dir, []string{"d", "a"}, later)
	if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "a.pem")) {
		t.Fatalf("re-issuing a: err = %v, want one naming a.pem", err)
	}
	if after := listDir(t, dir); !slices.Equal(before, after) {
		t.Fatalf("refused InitCA changed the directory: %q -> %q", before, after)
	}

	// A node whose files were removed is issued again by the same CA.
	os.Remove(filepath.Join(dir, "a.pem"))
	os.Remove(filepath.Join(dir, "a.key"))
	if err := InitCA(dir, []string{"a"}, later); err != nil {
		t.Fatal(err)
	}
	verifyNode(t, dir, "a", later)

	// A node whose key alone is left is refused too.
	os.Remove(filepath.Join(dir, "b.pem"))
	if err := InitCA(dir, []string{"b"}, later); err == nil || !strings.Contains(err.Error(), "b.key") {
		t.Fatalf("b.key left: err = %v, want one naming b.key", err)
	}
}

func TestInitCAErrors(t *testing.T) {
	t.Run("names", func(t *testing.T) {
		for _, nodes := range [][]string{nil, {""}, {"ca"}, {"CA"}, {"selfsigned"}, {"../x"}, {"a/b"}, {".."}, {"a", "a"}} {
			dir := t.TempDir()
			if err := InitCA(dir, nodes, t0); err == nil {
				t.Errorf("InitCA(%q) succeeded", nodes)
			}
			if files := listDir(t, dir); len(files) != 0 {
				t.Errorf("InitCA(%q) wrote %q", nodes, files)
			}
		}
	})
	t.Run("half a CA", func(t *testing.T) {
		dir := t.TempDir()
		if err := InitCA(dir, []string{"a"}, t0); err != nil {
			t.Fatal(err)
		}
		os.Remove(filepath.Join(dir, "ca.key"))
		err := InitCA(dir, []string{"b"}, t0)
		if err == nil || !strings.Contains(err.Error(), "ca.key") {
			t.Fatalf("err = %v, want one naming ca.key", err)
		}
	})
	t.Run("expired CA", func(t *testing.T) {
		dir := t.TempDir()
		if err := InitCA(dir, []string{"a"}, t0); err != nil {
			t.Fatal(err)
		}
		err := InitCA(dir, []string{"b"}, t0.Add(11*365*24*time.Hour))
		if err == nil || !strings.Contains(err.Error(), "ca.pem") {
			t.Fatalf("err = %v, want one naming ca.pem", err)
		}
		if _, err := os.Stat(filepath.Join(dir, "b.pem")); err == nil {
			t.Fatal("b.pem written by an expired CA")
		}
	})
	t.Run("mismatched CA key", func(t *testing.T) {
		dir, other := t.TempDir(), t.TempDir()
		for _, d := range []string{dir, other} {
			if err := InitCA(d, []string{"a"}, t0); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, "ca.key"), mustRead(t, filepath.Join(other, "ca.key")), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := InitCA(dir, []string{"b"}, t0); err == nil || !strings.Contains(err.Error(), "does not belong") {
			t.Fatalf("err = %v, want a key mismatch", err)
		}
	})
	t.Run("node cert near CA end", func(t *testing.T) {
		dir := t.TempDir()
		if err := InitCA(dir, []string{"a"}, t0); err != nil {
			t.Fatal(err)
		}
		ca := readCert(t, filepath.Join(dir, "ca.pem"))
		late := ca.NotAfter.Add(-24 * time.Hour)
		if err := InitCA(dir, []string{"b"}, late); err != nil {
			t.Fatal(err)
		}
		if b := readCert(t, filepath.Join(dir, "b.pem")); b.NotAfter.After(ca.NotAfter) {
			t.Fatalf("b expires %v, after its CA (%v)", b.NotAfter, ca.NotAfter)
		}
	})
}

func TestEnsureSelfSigned(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	certFile, keyFile, err := EnsureSelfSigned(dir, "dc1", t0)
	if err != nil {
		t.Fatal(err)
	}
	if certFile != filepath.Join(dir, "selfsigned.pem") || keyFile != filepath.Join(dir, "selfsigned.key") {
		t.Fatalf("files = %s, %s", certFile, keyFile)
	}
	if st, _ := os.Stat(keyFile); st.Mode().Perm() != 0o600 {
		t.Errorf("key mode %v, want 0600", st.Mode().Perm())
	}
	first := mustRead(t, certFile)
	leaf := readCert(t, certFile)
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	for _, host := range []string{"dc1", "localhost", "127.0.0.1", "::1"} {
		if _, err := leaf.Verify(x509.VerifyOptions{DNSName: host, Roots: pool, CurrentTime: t0}); err != nil {
			t.Errorf("verify %q: %v", host, err)
		}
	}
	if leaf.Subject.CommonName != "dc1" {
		t.Errorf("CN = %q", leaf.Subject.CommonName)
	}

	// Reused while valid.
	if _, _, err := EnsureSelfSigned(dir, "dc1", t0.Add(300*24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first, mustRead(t, certFile)) {
		t.Fatal("valid self-signed certificate was replaced")
	}

	// Replaced once expired.
	expired := leaf.NotAfter.Add(time.Minute)
	if _, _, err := EnsureSelfSigned(dir, "dc1", expired); err != nil {
		t.Fatal(err)
	}
	second := mustRead(t, certFile)
	if bytes.Equal(first, second) {
		t.Fatal("expired self-signed certificate was reused")
	}
	if renewed := readCert(t, certFile); !renewed.NotAfter.After(expired) {
		t.Fatalf("renewed certificate expires %v, before %v", renewed.NotAfter, expired)
	}

	// Replaced when the node was renamed.
	if _, _, err := EnsureSelfSigned(dir, "dc2", expired); err != nil {
		t.Fatal(err)
	}
	if c := readCert(t, certFile); c.Subject.CommonName != "dc2" || c.VerifyHostname("dc2") != nil {
		t.Fatalf("after rename: CN = %q, SANs %q", c.Subject.CommonName, c.DNSNames)
	}

	// Replaced when the key does not match (a crash between the renames).
	other := t.TempDir()
	if _, otherKey, err := EnsureSelfSigned(other, "dc2", expired); err != nil {
		t.Fatal(err)
	} else if err := os.WriteFile(keyFile, mustRead(t, otherKey), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := EnsureSelfSigned(dir, "dc2", expired); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadKeyPair(certFile, keyFile); err != nil {
		t.Fatalf("after mismatch: %v", err)
	}
	// No temporary files are left behind.
	if files := listDir(t, dir); !slices.Equal(files, []string{"selfsigned.key", "selfsigned.pem"}) {
		t.Fatalf("files = %q", files)
	}
}

func TestLoadErrorsNameTheFile(t *testing.T) {
	dir := t.TempDir()
	junk := filepath.Join(dir, "junk.pem")
	if err := os.WriteFile(junk, []byte("not pem\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.pem")
	if err := InitCA(dir, []string{"a"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	aCert, aKey := NodeFiles(dir, "a")
	caFile, _ := CAFiles(dir)

	for name, call := range map[string]func() error{
		"pool missing":        func() error { _, err := LoadPool(missing); return err },
		"pool junk":           func() error { _, err := LoadPool(junk); return err },
		"server cert missing": func() error { _, err := ServerConfig(missing, aKey, ""); return err },
		"server key junk":     func() error { _, err := ServerConfig(aCert, junk, ""); return err },
		"server ca junk":      func() error { _, err := ServerConfig(aCert, aKey, junk); return err },
		"client ca missing":   func() error { _, err := ClientConfig("", "", missing, false); return err },
		"client cert junk":    func() error { _, err := ClientConfig(junk, aKey, caFile, false); return err },
	} {
		err := call()
		if err == nil {
			t.Errorf("%s: no error", name)
			continue
		}
		if !strings.Contains(err.Error(), missing) && !strings.Contains(err.Error(), junk) {
			t.Errorf("%s: error %q names neither file", name, err)
		}
	}
	if _, err := ServerConfig("", "", ""); err == nil {
		t.Error("ServerConfig without files succeeded")
	}
	if _, err := ClientConfig(aCert, "", "", false); err == nil {
		t.Error("ClientConfig with a certificate but no key succeeded")
	}
}

// handshake runs one TLS handshake over loopback between a server using
// serverCfg and a client using clientCfg, and returns the server's view of
// the connection and both sides' handshake errors.
func handshake(t *testing.T, serverCfg, clientCfg *tls.Config) (tls.ConnectionState, error, error) {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", serverCfg)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()

	type result struct {
		state tls.ConnectionState
		err   error
	}
	done := make(chan result, 1)
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			done <- result{err: err}
			return
		}
		defer conn.Close()
		tc := conn.(*tls.Conn)
		_ = tc.SetDeadline(time.Now().Add(10 * time.Second))
		err = tc.Handshake()
		if err == nil {
			// Tell the client the server side is done (TLS 1.3 clients
			// finish their handshake before the server checks theirs).
			_, err = tc.Write([]byte{1})
		}
		done <- result{state: tc.ConnectionState(), err: err}
	}()

	dialer := &net.Dialer{Timeout: 10 * time.Second}
	conn, clientErr := tls.DialWithDialer(dialer, "tcp", ln.Addr().String(), clientCfg)
	if clientErr == nil {
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		buf := make([]byte, 1)
		_, clientErr = conn.Read(buf)
		conn.Close()
	}
	res := <-done
	return res.state, res.err, clientErr
}

func TestMutualTLS(t *testing.T) {
	now := time.Now()
	dir := t.TempDir()
	if err := InitCA(dir, []string{"dc1", "dc2"}, now); err != nil {
		t.Fatal(err)
	}
	caFile, _ := CAFiles(dir)
	dc1Cert, dc1Key := NodeFiles(dir, "dc1")
	dc2Cert, dc2Key := NodeFiles(dir, "dc2")
	serverCfg, err := ServerConfig(dc1Cert, dc1Key, caFile)
	if err != nil {
		t.Fatal(err)
	}
	if serverCfg.MinVersion != tls.VersionTLS12 || serverCfg.ClientAuth != tls.VerifyClientCertIfGiven {
		t.Fatalf("server config: MinVersion %x ClientAuth %v", serverCfg.MinVersion, serverCfg.ClientAuth)
	}

	t.Run("client certificate verified", func(t *testing.T) {
		clientCfg, err := ClientConfig(dc2Cert, dc2Key, caFile, false)
		if err != nil {
			t.Fatal(err)
		}
		clientCfg.ServerName = "dc1"
		state, serverErr, clientErr := handshake(t, serverCfg, clientCfg)
		if serverErr != nil || clientErr != nil {
			t.Fatalf("server: %v; client: %v", serverErr, clientErr)
		}
		if len(state.VerifiedChains) == 0 || len(state.PeerCertificates) == 0 {
			t.Fatal("server saw no verified client certificate")
		}
		if cn := state.PeerCertificates[0].Subject.CommonName; cn != "dc2" {
			t.Fatalf("client CN = %q, want dc2", cn)
		}
	})

	t.Run("loopback address verifies", func(t *testing.T) {
		clientCfg, err := ClientConfig(dc2Cert, dc2Key, caFile, false)
		if err != nil {
			t.Fatal(err)
		}
		// No ServerName: verified against the 127.0.0.1 IP SAN.
		if _, serverErr, clientErr := handshake(t, serverCfg, clientCfg); serverErr != nil || clientErr != nil {
			t.Fatalf("server: %v; client: %v", serverErr, clientErr)
		}
	})

	t.Run("no client certificate is allowed", func(t *testing.T) {
		clientCfg, err := ClientConfig("", "", caFile, false)
		if err != nil {
			t.Fatal(err)
		}
		state, serverErr, clientErr := handshake(t, serverCfg, clientCfg)
		if serverErr != nil || clientErr != nil {
			t.Fatalf("server: %v; client: %v", serverErr, clientErr)
		}
		if len(state.PeerCertificates) != 0 {
			t.Fatal("server saw a client certificate")
		}
	})

	t.Run("client certificate from another CA is refused", func(t *testing.T) {
		// A client that knows our CA (so it trusts the server) but holds a
		// certificate from its own CA: the server must refuse it.
		other := t.TempDir()
		if err := InitCA(other, []string{"mallory"}, now); err != nil {
			t.Fatal(err)
		}
		mCert, mKey := NodeFiles(other, "mallory")
		clientCfg, err := ClientConfig("", "", caFile, false)
		if err != nil {
			t.Fatal(err)
		}
		pair, err := LoadKeyPair(mCert, mKey)
		if err != nil {
			t.Fatal(err)
		}
		// Present it even though the server asks for certificates from its CA.
		clientCfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &pair, nil }
		_, serverErr, _ := handshake(t, serverCfg, clientCfg)
		if serverErr == nil {
			t.Fatal("server accepted a client certificate from another CA")
		}
	})

	t.Run("unknown server refused unless insecure", func(t *testing.T) {
		strict, err := ClientConfig(dc2Cert, dc2Key, "", false)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, clientErr := handshake(t, serverCfg, strict); clientErr == nil {
			t.Fatal("client trusted a server from a CA it was not given")
		}
		insecure, err := ClientConfig(dc2Cert, dc2Key, "", true)
		if err != nil {
			t.Fatal(err)
		}
		if _, serverErr, clientErr := handshake(t, serverCfg, insecure); serverErr != nil || clientErr != nil {
			t.Fatalf("insecure: server: %v; client: %v", serverErr, clientErr)
		}
	})

	t.Run("self-signed server trusted through tls-ca", func(t *testing.T) {
		data := t.TempDir()
		ssCert, ssKey, err := EnsureSelfSigned(data, "dc3", now)
		if err != nil {
			t.Fatal(err)
		}
		srv, err := ServerConfig(ssCert, ssKey, "")
		if err != nil {
			t.Fatal(err)
		}
		if srv.ClientAuth != tls.NoClientCert {
			t.Fatalf("ClientAuth without a CA = %v", srv.ClientAuth)
		}
		cli, err := ClientConfig("", "", ssCert, false)
		if err != nil {
			t.Fatal(err)
		}
		cli.ServerName = "dc3"
		if _, serverErr, clientErr := handshake(t, srv, cli); serverErr != nil || clientErr != nil {
			t.Fatalf("server: %v; client: %v", serverErr, clientErr)
		}
	})
}
