package httpapi

import (
	_ "embed"
	"net/http"
)

// openAPIDoc is the OpenAPI 3.1 description of every route of the router
// but /favicon.ico: the client, operator and federation APIs, the probes
// and the web UI. openapi_test.go keeps it and the router in step (both
// directions) and its schemas in step with the Go documents' JSON.
//
//go:embed openapi.json
var openAPIDoc []byte

// openAPI serves the description. It sits behind the API token like every
// other non-federation /api/* path (docs/api.md): the document is no
// secret, but one exception would make "a node with a token answers
// nothing under /api/ to an anonymous caller" false, and every client that
// can use the API has the token anyway.
func (s *Server) openAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-cache")
	_, _ = w.Write(openAPIDoc)
}
