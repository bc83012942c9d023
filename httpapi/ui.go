package httpapi

import (
	_ "embed"
	"net/http"
)

// The web UI: a page, its styles and its script, each a file of its own so
// that the Content-Security-Policy can forbid every inline script and
// style (what a script injected into the page would need).
var (
	//go:embed ui.html
	uiPage []byte
	//go:embed ui.css
	uiStyle []byte
	//go:embed ui.js
	uiScript []byte
)

// uiCSP allows the page its own script, styles and API calls and nothing
// else: no inline script or style, no other origin, no plugin, no frame
// around it, no form sent elsewhere, no <base> to redirect its paths.
// Images are the SVG charts the script draws (inline SVG elements: no
// image loads).
const uiCSP = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; " +
	"form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// uiHeaders are sent with the page and its files: the policy, no MIME
// sniffing (a file is only what its Content-Type says), no Referer to
// other sites, no framing (for browsers that predate frame-ancestors).
func uiHeaders(w http.ResponseWriter, contentType string) {
	h := w.Header()
	h.Set("Content-Type", contentType)
	h.Set("Cache-Control", "no-cache")
	h.Set("Content-Security-Policy", uiCSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
}

// ui serves the page.
func (s *Server) ui(w http.ResponseWriter, _ *http.Request) {
	uiHeaders(w, "text/html; charset=utf-8")
	_, _ = w.Write(uiPage)
}

// uiAsset serves one of the page's files.
func uiAsset(data []byte, contentType string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		uiHeaders(w, contentType)
		_, _ = w.Write(data)
	}
}
