// Package bustest runs a real NATS server with JetStream inside a test
// process (github.com/nats-io/nats-server/v2), with its store in a
// temporary directory, so that the delivery bus is tested against the real
// engine on a machine with nothing installed. A server can be stopped and
// started again on the same port with the same store, as a restart of
// NATS in production; StartCluster runs several as one JetStream cluster,
// for replicated streams; StartTLS one that requires TLS, on its client
// port and on a websocket port.
package bustest

import (
	"crypto/tls"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/switchboard-dev/switchboard/nodetest/freeport"
)

// EnvNATS names a NATS server (nats://host:port) that end-to-end tests may
// also run against; tests that stop and start NATS always use their own.
const EnvNATS = "SWITCHBOARD_TEST_NATS"

// Server is a JetStream server of a test.
type Server struct {
	t    testing.TB
	port int
	dir  string
	srv  *server.Server
	// name, cluster and routes are set for a server of a cluster
	// (StartCluster): its name, its cluster port and every member's.
	name    string
	cluster int
	routes  []string
	// tls is the TLS configuration of a server that requires TLS
	// (StartTLS), and ws its websocket port (wss://); nil and 0 otherwise.
	tls *tls.Config
	ws  int
	// user and password, when set (SetUser), are the only credentials the
	// server takes from the next Restart on.
	user, password string
}

// Start starts a server on a free loopback port with its store in a
// temporary directory of t; t's cleanup stops it.
func Start(t testing.TB) *Server {
	t.Helper()
	port := freePort(t) // one no other connection is given meanwhile
	s := &Server{t: t, port: port, dir: t.TempDir()}
	s.Restart()
	t.Cleanup(s.Stop)
	return s
}

// StartTLS is Start with a server that requires TLS, serving tc (its
// certificate; with tc.ClientAuth and ClientCAs, the client certificates
// it demands), on its client port (TLSURL) and on a websocket port
// (WSSURL).
func StartTLS(t testing.TB, tc *tls.Config) *Server {
	t.Helper()
	port, ws := freePort(t), freePort(t)
	s := &Server{t: t, port: port, dir: t.TempDir(), tls: tc, ws: ws}
	s.Restart()
	t.Cleanup(s.Stop)
	return s
}

// StartCluster starts n servers that form one JetStream cluster (for
// replicated streams), each on free loopback ports with its store in a
// temporary directory of t; t's cleanup stops them. It returns once the
// cluster has elected its JetStream meta leader.
func StartCluster(t testing.TB, n int) []*Server {
	t.Helper()
	servers := make([]*Server, n)
	var routes []string
	for i := range servers {
		port, cluster := freePort(t), freePort(t)
		servers[i] = &Server{t: t, port: port, dir: t.TempDir(), name: fmt.Sprintf("bustest-%d", i), cluster: cluster}
		routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", cluster))
	}
	for _, s := range servers {
		s.routes = routes
		s.Restart()
		t.Cleanup(s.Stop)
	}
	// Ready once a JetStream leader has every server as a peer it may place
	// a stream on (online, with JetStream, its stats received): a leader
	// alone refuses a replicated stream for a moment ("no suitable peers
	// for placement").
	deadline := time.Now().Add(30 * time.Second)
	for {
		for _, s := range servers {
			if s.srv.JetStreamIsLeader() && len(s.srv.JetStreamClusterPeers()) == n {
				return servers
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("bustest: the cluster of %d had no JetStream leader placing on every server in 30s", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ClusterURL is the client URL of every server of a cluster.
func ClusterURL(servers []*Server) string {
	urls := make([]string, len(servers))
	for i, s := range servers {
		urls[i] = s.URL()
	}
	return strings.Join(urls, ",")
}

// URL is the server's client URL.
func (s *Server) URL() string { return fmt.Sprintf("nats://127.0.0.1:%d", s.port) }

// TLSURL is the tls:// URL of a server of StartTLS.
func (s *Server) TLSURL() string { return fmt.Sprintf("tls://127.0.0.1:%d", s.port) }

// WSSURL is the websocket (wss://) URL of a server of StartTLS.
func (s *Server) WSSURL() string { return fmt.Sprintf("wss://127.0.0.1:%d", s.ws) }

// Stop shuts the server down (a no-op when stopped).
func (s *Server) Stop() {
	if s.srv == nil {
		return
	}
	s.srv.Shutdown()
	s.srv.WaitForShutdown()
	s.srv = nil
}

// SetUser has the server take only user and password from its next
// Restart on (Restart it after).
func (s *Server) SetUser(user, password string) { s.user, s.password = user, password }

// Restart starts the server (again) on its port with its store: the
// streams, their messages and the consumers survive, as across a restart
// of a real server.
func (s *Server) Restart() {
	s.t.Helper()
	s.Stop()
	opts := &server.Options{
		Host: "127.0.0.1", Port: s.port, JetStream: true, StoreDir: s.dir,
		NoLog: true, NoSigs: true, ServerName: "bustest", Username: s.user, Password: s.password,
	}
	if s.cluster != 0 {
		opts.ServerName = s.name
		opts.Cluster = server.ClusterOpts{Name: "bustest", Host: "127.0.0.1", Port: s.cluster}
		opts.Routes = server.RoutesFromStr(strings.Join(s.routes, ","))
	}
	if s.tls != nil {
		opts.TLS, opts.TLSConfig, opts.TLSTimeout = true, s.tls, 5
		opts.TLSVerify = s.tls.ClientAuth == tls.RequireAndVerifyClientCert
		opts.Websocket = server.WebsocketOpts{Host: "127.0.0.1", Port: s.ws, TLSConfig: s.tls, HandshakeTimeout: 5 * time.Second}
	}
	var err error
	// The port was just freed (by us or the last incarnation): another
	// process may hold it for a moment in TIME_WAIT-free reuse races.
	for range 50 {
		s.srv, err = server.NewServer(opts)
		if err == nil {
			s.srv.Start()
			if s.srv.ReadyForConnections(5 * time.Second) {
				return
			}
			s.srv.Shutdown()
			s.srv.WaitForShutdown()
			err = fmt.Errorf("not ready for connections")
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.t.Fatalf("bustest: start a JetStream server on port %d: %v", s.port, err)
}

// Shared is the server SWITCHBOARD_TEST_NATS names ("" when unset). Tests
// may publish to it only under streams of their own, and never stop it.
func Shared() string { return os.Getenv(EnvNATS) }

// freePort is a free loopback port (freeport.Port); none fails t.
func freePort(t testing.TB) int {
	t.Helper()
	port, err := freeport.Port()
	if err != nil {
		t.Fatalf("bustest: free port: %v", err)
	}
	return port
}
