// Package httpapi is the node's HTTPS gateway and its peer client.
//
// # Gateway
//
// The client and operator API (docs/api.md) on gorilla/mux, the JSON error
// format, the 1 MiB body limit (a 413 lingers to read what the client
// still sends, so that it gets the answer), credentials and roles, the
// audit trail, health endpoints, the web UI and the federation API. Client and directory bodies are decoded strictly
// (decode: an unknown field is 400 unknown_field; invalid UTF-8 and lone
// surrogate escapes are 400), peer bodies tolerantly (decodePeer). The
// gateway turns each request into a call on a Backend (the node), which
// sends an actor message and waits for the reply with the request's
// deadline. It never writes to the store itself. Every
// error leaves through writeError, which maps an error code to its HTTP
// status in one table (statusOf).
//
// # Credentials and roles
//
// Each client and operator route names the roles that may call it
// (access.go; the OpenAPI document says the same as x-switchboard-roles).
// The caller's Bearer token is looked up in the Credentials in force
// (package auth): none valid is 401 unauthorized, a role the route does not
// name 403 forbidden. Within a route a frontend credential acts only for
// its bound frontends, and a client only on the messages it submitted
// (another's reads as 404), at its submit rate (429 rate_limited). A
// refused call reaches no backend call. Changes made through the API are
// recorded with Backend.Audit once made (audit.go).
//
// # Federation API
//
// /api/federation/* is outside the API token; peers authenticate by
// certificate. Each request passes, in order:
//
//  1. Client certificate (Config.RequireClientCert, set with --tls-ca): the
//     TLS listener verifies a certificate when one is given
//     (certs.ServerConfig); the gateway requires one on every federation
//     path, identity included, and with Config.ClientCAs verifies it
//     again against the CA pool in force (a connection outlives a reload
//     of the bundle, and the certificate's validity). None, or one the
//     pool no longer verifies: 403 client_certificate_required.
//  2. X-Federation-Node (every path but identity): required, a valid node
//     name (400 invalid_request), and with a client certificate equal to
//     its CN or one of its DNS SANs, exactly (403 node_mismatch). Without
//     RequireClientCert (--insecure-skip-verify) the header is trusted.
//     X-Federation-To, when given, must be this node's name, else 421
//     misdirected: the caller reached us at an address it holds for
//     another node (a reused address), and must not take our answer for
//     that node's.
//  3. The body: decodePeer (1 MiB, 413 over it; 400 invalid_json;
//     invalid UTF-8 and lone surrogate escapes 400 invalid_request, as on
//     the client API, within one message of a forward_batch in its
//     result; unknown fields ignored, unlike the client API, so that a
//     newer peer's additions do not break an older one), then the document's
//     Validate (400 invalid_request). A node field (health, registry,
//     delivery_status) must equal the header (403 node_mismatch).
//  4. The backend: federation_disabled (403) when federation is off,
//     unknown_peer (403) for a caller it has not discovered, then the call.
//
// Steps 1-3 refuse without calling the backend, so a refused request
// stores nothing. Refusals of steps 1-2 and node mismatches are logged
// (a misconfigured certificate, someone posing as a peer, or a peer
// calling a stale address).
//
// identity needs no header: discovery asks it before it knows whom it
// reaches, and an operator can ask it with curl. It is served even with
// federation off.
//
// forward answers 202 with {id, duplicate, state?, reason?}, or the
// message's own refusal as the error document (unknown_frontend_here is
// 422). forward_batch answers 200 with one result per message in input
// order; a message that fails validation is refused in its result, exactly
// as the single form would refuse it, and the others are stored.
// delivery_status answers 200 {id, outcome}; its batch form refuses the
// whole batch for one bad report (a StatusReply has no room for an error).
// Batches hold 1 to 1000 entries (400 otherwise).
//
// # Peer client
//
// PeerClient implements transport.Peer over HTTPS. Peers are dialled by
// address, often an IP address from an SRV target, so the dialled address
// is not what a certificate is checked against. Every federation call but
// identity is for one node (transport.Target) and names it in
// X-Federation-To. With a CA pool (--tls-ca): the chain is verified against
// the pool; Identity requires the certificate to name (CN or DNS SAN) the
// node its document reports and remembers address -> node; every other
// federation call requires, in the TLS handshake and so before the request
// leaves, a certificate naming the node the call is for (the ring's calls,
// for no node named, the node remembered for the address, identified
// first when unknown). With InsecureSkipVerify nothing is verified, and
// X-Federation-To alone keeps another node's answer from being taken.
// With verification each node called has a pool of connections of its
// own; Forget drops a node's (the node calls it when the peer's actor
// stops), so that peers come and go without their pools piling up.
//
// Errors: an error document (or any non-2xx answer) is a *transport.CallError
// whose Kind (kindOf, beside statusOf: the status and the code of the
// document) is what the callers decide on: refused, in conflict, forbidden,
// no such call, not a member, not the master, busy (with the answer's
// Retry-After), unavailable, a server error, or unreachable for 408 and
// 421 misdirected (the node is not at that address); anything else
// (connection, TLS, timeout, a name check, a malformed answer) is a plain
// error, of kind unreachable: the call did not complete.
//
// Forwards in single form (a peer without the forward_batch capability)
// run 8 at a time; an error document that refuses the message (kind
// refused or conflict) becomes that message's result Error, while a
// refusal of the caller (forbidden: unknown_peer, node_mismatch,
// federation_disabled, client_certificate_required, 401), a path or method
// the peer does not serve (404, 405) or any transient failure fails the
// call, which the forward queue retries (forwards are idempotent).
//
// A Forward or Status call may be several requests (the single form, or
// a batch split to fit the peer's 1 MiB bound on a request body), each
// bounded by the client's Timeout (--http-timeout). A call that fails
// returns with its error the results of the requests that completed (the
// others' have an empty ID): the forward queue records them and retries
// only the rest.
package httpapi
