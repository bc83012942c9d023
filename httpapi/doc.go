// Package httpapi is the node's HTTPS gateway: the client and operator API
// of CONTRACT.md on gorilla/mux, the JSON error format, the 1 MiB body
// limit, the API token, health endpoints and the web UI.
//
// The gateway turns each request into a call on a Backend (the node), which
// sends an actor message and waits for the reply with the request's
// deadline. It never writes to the store itself. Every error leaves through
// writeError, which maps an error code to its HTTP status in one table.
package httpapi
