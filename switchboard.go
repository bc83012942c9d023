// Package switchboard runs a Switchboard node: a store-and-forward message
// controller built as an actor system. cmd/node is a thin shell around it;
// programs that embed Switchboard use it directly:
//
//	cfg := switchboard.DefaultConfig()
//	cfg.Name, cfg.DataDir = "dc1", dir
//	node, err := switchboard.New(cfg)
//	...
//	err = node.Start(ctx)
//	defer node.Stop(context.Background())
//
// See docs/embedding.md for spawning supervised actors, in-process frontends
// and state-change subscriptions.
package switchboard

import (
	"context"
	"errors"
)

// Node is one running Switchboard node.
type Node struct {
	cfg   Config
	fatal chan error
}

// New validates cfg and prepares a node; nothing runs until Start.
func New(cfg Config) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Node{cfg: cfg, fatal: make(chan error, 1)}, nil
}

// Start opens the store, starts the actors and the listeners. It returns once
// the node serves.
func (n *Node) Start(ctx context.Context) error { return errors.New("not implemented yet") }

// Stop stops accepting, lets in-flight requests and commits finish (within
// ctx), stops the actors leaves first and closes the store.
func (n *Node) Stop(ctx context.Context) error { return errors.New("not implemented yet") }

// Fatal delivers an error when the node cannot go on (an actor exhausted its
// restart budget); the owner should Stop it and exit non-zero.
func (n *Node) Fatal() <-chan error { return n.fatal }

// Addr is the HTTPS listener's address once started ("" when none).
func (n *Node) Addr() string { return "" }

// MetricsAddr is the metrics listener's address once started ("" when none).
func (n *Node) MetricsAddr() string { return "" }
