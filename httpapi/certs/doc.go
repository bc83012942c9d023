// Package certs makes and loads the TLS material of a Switchboard node.
//
// Nodes talk to each other over HTTPS with mutual TLS: every node presents
// one certificate both as a server (to clients and calling peers) and as a
// client (when it calls a peer), and verifies peers against a shared CA
// bundle (--tls-ca). This package provides:
//
//   - InitCA, behind `switchboard certs init`: a small ECDSA P-256 CA and one
//     certificate per node, for demos, tests and small private deployments.
//     Running it again in the same directory reuses the CA, so nodes can be
//     added later; it never overwrites a node's existing files.
//   - EnsureSelfSigned: the development certificate a node creates in its
//     data directory when started without --tls-cert/--tls-key.
//   - ServerConfig and ClientConfig: the tls.Config of the gateway and of the
//     peer client, built from PEM files, with errors that name the file.
//
// Files written:
//
//	ca.pem, ca.key             the CA (self-signed, may only sign leaf certificates)
//	<node>.pem, <node>.key     CN=<node>; DNS SANs <node>, localhost; IP SANs 127.0.0.1, ::1;
//	                           server and client auth
//	selfsigned.pem/.key        EnsureSelfSigned's certificate: CN=<name>, the same SANs and
//	                           usages as a node certificate, signed by its own key
//
// Private keys are PKCS #8 PEM with mode 0600; certificates are mode 0644.
// Times come from the caller (now) so that tests can pin validity windows.
package certs
