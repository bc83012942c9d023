package main

import (
	"fmt"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/switchboard-dev/switchboard/nodetest/freeport"
)

// startNATS runs a NATS server with JetStream in the bench process, on a
// free loopback port with its store under dir: the bus of the
// postgres-site-nats figure (nothing to install).
func startNATS(dir string) (url string, stop func(), err error) {
	port, err := freeport.Port()
	if err != nil {
		return "", nil, err
	}
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: port, JetStream: true, StoreDir: dir,
		NoLog: true, NoSigs: true, ServerName: "bench"})
	if err != nil {
		return "", nil, fmt.Errorf("nats server: %w", err)
	}
	srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		return "", nil, fmt.Errorf("nats server: not ready for connections within 10s")
	}
	return fmt.Sprintf("nats://127.0.0.1:%d", port), func() { srv.Shutdown(); srv.WaitForShutdown() }, nil
}
