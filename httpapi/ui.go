package httpapi

import (
	_ "embed"
	"net/http"
)

//go:embed ui.html
var uiPage []byte

// ui serves the web UI: one self-contained page that reads the API.
func (s *Server) ui(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("Content-Security-Policy", "default-src 'self'; style-src 'unsafe-inline'; script-src 'unsafe-inline'")
	_, _ = w.Write(uiPage)
}
