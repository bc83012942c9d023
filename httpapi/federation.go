package httpapi

import (
	"bytes"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/gorilla/mux"

	"github.com/switchboard-dev/switchboard/httpapi/certs"

	"github.com/switchboard-dev/switchboard/messages"
)

// Paths of the federation API (docs/federation.md); the peer client
// calls the same ones.
const (
	pathIdentity    = "/api/federation/identity"
	pathHealth      = "/api/federation/health"
	pathRegistry    = "/api/federation/registry"
	pathForward     = "/api/federation/forward"
	pathForwardBat  = "/api/federation/forward_batch"
	pathStatus      = "/api/federation/delivery_status"
	pathStatusBatch = "/api/federation/delivery_status_batch"
)

// peerHandler serves an authenticated federation call from the peer named
// from.
type peerHandler func(w http.ResponseWriter, r *http.Request, from string)

// federationRoutes adds the federation API. It sits outside the API token
// (peers authenticate by certificate) and on the main router for the same
// reason as the client API (405 for a wrong method).
func (s *Server) federationRoutes(r *mux.Router) {
	r.Handle(pathIdentity, http.HandlerFunc(s.fedIdentity)).Methods(http.MethodGet)
	peer := func(path string, h peerHandler) {
		r.Handle(path, s.peerAuth(s.admitted(h))).Methods(http.MethodPost)
	}
	peer(pathHealth, s.fedHealth)
	peer(pathRegistry, s.fedRegistry)
	peer(pathForward, s.fedForward)
	peer(pathForwardBat, s.fedForwardBatch)
	peer(pathStatus, s.fedStatus)
	peer(pathStatusBatch, s.fedStatusBatch)
}

// clientCert returns the caller's verified client certificate, nil when
// none is required, or client_certificate_required: also, with ClientCAs,
// for a certificate the CA pool in force no longer verifies (reloaded, or
// the certificate expired since the connection was opened).
func (s *Server) clientCert(r *http.Request) (*x509.Certificate, error) {
	if !s.cfg.RequireClientCert {
		return nil, nil
	}
	// The listener verified the chain (VerifyClientCertIfGiven with the
	// CA); a certificate that did not verify failed the handshake, so a
	// certificate here without a verified chain cannot happen, and no
	// certificate at all is what this refuses.
	if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 || len(r.TLS.VerifiedChains[0]) == 0 {
		return nil, messages.Errorf(messages.CodeClientCertReq,
			"the federation API needs a client certificate signed by this node's --tls-ca")
	}
	leaf := r.TLS.VerifiedChains[0][0]
	if s.cfg.ClientCAs != nil {
		// By the wall clock, as the handshake verified it.
		if err := s.clientCerts.verify(s.cfg.ClientCAs(), leaf, r.TLS.PeerCertificates[1:], time.Now()); err != nil {
			return nil, messages.Errorf(messages.CodeClientCertReq,
				"the client certificate of this connection is not trusted by this node's --tls-ca now: %v", err)
		}
	}
	return leaf, nil
}

// peerAuth authenticates a federation call: with RequireClientCert the
// caller shows a verified client certificate that names the node of its
// X-Federation-Node header; without it the header is taken on trust. A
// call for another node (X-Federation-To) is refused as misdirected: the
// caller reached us at an address it still holds for that node, and must
// not take our answer for its. The backend then admits the name (a
// discovered peer, federation on: admitted, for the federation paths; the
// ring's coordinator checks its own site). A refused request reaches no
// handler, so nothing is decoded or stored.
func (s *Server) peerAuth(h peerHandler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cert, err := s.clientCert(r)
		if err != nil {
			s.refuse(w, r, r.Header.Get(messages.FederationHeader), err)
			return
		}
		from := r.Header.Get(messages.FederationHeader)
		if !messages.ValidName(from) {
			s.fail(w, r, messages.Errorf(messages.CodeInvalidRequest,
				"header %s is required and must be a node name (1-63 of letters, digits, '.', '_', '-'), got %q",
				messages.FederationHeader, from))
			return
		}
		if cert != nil && !certs.Names(cert, from) {
			s.refuse(w, r, from, messages.Errorf(messages.CodeNodeMismatch,
				"%s is %q but the client certificate names %s", messages.FederationHeader, from, certs.NamesOf(cert)))
			return
		}
		if to := r.Header.Get(messages.FederationToHeader); to != "" {
			if us := s.cfg.Backend.Identity().Node; to != us {
				// Logged: the caller's address for to is stale (a reused
				// address, a moved SRV record), which its operator should hear of.
				s.refuse(w, r, from, messages.Errorf(messages.CodeMisdirected,
					"the call is for node %q (%s); this is node %q", to, messages.FederationToHeader, us))
				return
			}
		}
		h(w, r, from)
	})
}

// admitted asks the backend whether it serves the caller (federation on,
// a known peer) before h reads the body: a caller it refuses makes the
// node decode nothing.
func (s *Server) admitted(h peerHandler) peerHandler {
	return func(w http.ResponseWriter, r *http.Request, from string) {
		if err := s.cfg.Backend.FederationCaller(from); err != nil {
			s.fail(w, r, err)
			return
		}
		h(w, r, from)
	}
}

// refuse answers an authentication failure and logs it: it is either a
// misconfigured peer (its certificate does not name its --name) or
// someone posing as one, and the operator of this node should hear of it;
// at a bounded rate (peerRefused), since anyone who reaches the port can
// make refusals.
func (s *Server) refuse(w http.ResponseWriter, r *http.Request, from string, err error) {
	s.refusedMessage(r, from, err)
	s.fail(w, r, err)
}

// refusedMessage logs one message of a batch refused for its caller, as
// refuse logs a refused request: the batch itself is answered.
func (s *Server) refusedMessage(r *http.Request, from string, err error) {
	var e *messages.Error
	if errors.As(err, &e) {
		s.peerRefused.Write("code", e.Code, "from", from, "remote", r.RemoteAddr, "path", r.URL.Path, "err", e.Message)
	}
}

// fedIdentity serves who we are. It is the one federation path without
// X-Federation-Node: discovery asks it before it knows whom it reaches,
// and an operator may ask it with curl. With mutual TLS it still needs a
// verified client certificate (of any node of the CA), so nobody outside
// the federation learns the node's name and instance.
func (s *Server) fedIdentity(w http.ResponseWriter, r *http.Request) {
	if _, err := s.clientCert(r); err != nil {
		s.refuse(w, r, r.Header.Get(messages.FederationHeader), err)
		return
	}
	id := s.cfg.Backend.Identity()
	if id.Capabilities == nil {
		id.Capabilities = []string{}
	}
	writeJSON(w, http.StatusOK, id)
}

// mismatch is the error of a body naming another node than the caller.
func mismatch(field, got, from string) error {
	return messages.Errorf(messages.CodeNodeMismatch, "%s %q is not the caller %q (%s)", field, got, from, messages.FederationHeader)
}

func (s *Server) fedHealth(w http.ResponseWriter, r *http.Request, from string) {
	var h messages.Health
	if err := decodePeer(w, r, &h); err != nil {
		s.fail(w, r, err)
		return
	}
	if err := h.Validate(); err != nil {
		s.fail(w, r, err)
		return
	}
	if h.Node != from {
		s.refuse(w, r, from, mismatch("node", h.Node, from))
		return
	}
	ctx, cancel := s.ctx(r)
	defer cancel()
	ours, err := s.cfg.Backend.FederationHealth(ctx, from, h)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, ours)
}

func (s *Server) fedRegistry(w http.ResponseWriter, r *http.Request, from string) {
	var reg messages.Registry
	if err := decodePeer(w, r, &reg); err != nil {
		s.fail(w, r, err)
		return
	}
	if err := reg.Validate(); err != nil {
		s.fail(w, r, err)
		return
	}
	if reg.Node != from {
		s.refuse(w, r, from, mismatch("node", reg.Node, from))
		return
	}
	ctx, cancel := s.ctx(r)
	defer cancel()
	ours, err := s.cfg.Backend.FederationRegistry(ctx, from, reg)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if ours.Frontends == nil {
		ours.Frontends = []string{}
	}
	writeJSON(w, http.StatusOK, ours)
}

// fedForward is the single form: 202 with the reply once the message is
// stored, or the message's own refusal as the error document.
func (s *Server) fedForward(w http.ResponseWriter, r *http.Request, from string) {
	var f messages.Forward
	if err := decodePeer(w, r, &f); err != nil {
		s.fail(w, r, err)
		return
	}
	if err := f.Validate(); err != nil {
		s.fail(w, r, err)
		return
	}
	if f.SourceSMSC != from {
		// The origin is the caller: a peer naming another would store a
		// message under the other's id and take its reports.
		s.refuse(w, r, from, mismatch("source_smsc", f.SourceSMSC, from))
		return
	}
	ctx, cancel := s.ctx(r)
	defer cancel()
	res, err := s.cfg.Backend.FederationForward(ctx, from, []messages.Forward{f})
	if err == nil && len(res) != 1 {
		err = fmt.Errorf("backend answered %d results for 1 forward", len(res))
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if res[0].Error != nil {
		s.fail(w, r, res[0].Error)
		return
	}
	writeJSON(w, http.StatusAccepted, res[0].ForwardReply)
}

// fedForwardBatch is the batch form. A message that fails validation, or
// holds text a decoder would change (textError), is refused alone, in its
// result, exactly as the single form would refuse it (400 invalid_request
// there); the others go to the backend. Refusing the whole batch instead
// would hold up to MaxForwardBatch good messages behind one bad one, since
// the sender retries a refused request as a whole.
func (s *Server) fedForwardBatch(w http.ResponseWriter, r *http.Request, from string) {
	raw, err := readBody(w, r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var (
		b       messages.ForwardBatch
		badText map[int]error
	)
	if err := decodePeerBody(raw, &b); err != nil {
		if b, badText, err = forwardsWithBadText(raw, err); err != nil {
			s.fail(w, r, err)
			return
		}
	}
	if len(b.Messages) == 0 || len(b.Messages) > messages.MaxForwardBatch {
		s.fail(w, r, messages.Errorf(messages.CodeInvalidRequest, "messages must hold 1 to %d forwards, got %d",
			messages.MaxForwardBatch, len(b.Messages)))
		return
	}
	results := make([]messages.ForwardResult, len(b.Messages))
	valid := make([]messages.Forward, 0, len(b.Messages))
	at := make([]int, 0, len(b.Messages)) // index in b.Messages of each valid one
	for i, f := range b.Messages {
		err := badText[i]
		if err == nil {
			err = f.Validate()
		}
		if err == nil && f.SourceSMSC != from {
			err = mismatch("source_smsc", f.SourceSMSC, from)
			s.refusedMessage(r, from, err)
		}
		if err != nil {
			e := &messages.Error{Code: messages.CodeInvalidRequest, Message: err.Error()}
			var me *messages.Error
			if errors.As(err, &me) {
				e = &messages.Error{Code: me.Code, Message: fmt.Sprintf("messages[%d]: %s", i, me.Message)}
			}
			results[i] = messages.ForwardResult{ForwardReply: messages.ForwardReply{ID: f.ID}, Error: e}
			continue
		}
		valid = append(valid, f)
		at = append(at, i)
	}
	if len(valid) > 0 {
		ctx, cancel := s.ctx(r)
		defer cancel()
		res, err := s.cfg.Backend.FederationForward(ctx, from, valid)
		if err == nil && len(res) != len(valid) {
			err = fmt.Errorf("backend answered %d results for %d forwards", len(res), len(valid))
		}
		if err != nil {
			s.fail(w, r, err)
			return
		}
		for j, i := range at {
			results[i] = res[j]
		}
	}
	writeJSON(w, http.StatusOK, messages.ForwardBatchReply{Results: results})
}

// forwardsWithBadText is the forward_batch raw, whose decoding failed
// with err, decoded message by message when err is text a decoder would
// change (textError) within some of its messages: with the text error of
// each such message, which is refused alone. Anything else (bad text
// outside the messages, a batch or message that does not decode) is err,
// the whole batch's refusal.
func forwardsWithBadText(raw []byte, err error) (messages.ForwardBatch, map[int]error, error) {
	if textError(raw) == nil {
		return messages.ForwardBatch{}, nil, err
	}
	var env struct {
		Messages []json.RawMessage `json:"messages"`
	}
	if decodeOne(raw, json.NewDecoder(bytes.NewReader(raw)), &env) != nil {
		return messages.ForwardBatch{}, nil, err
	}
	b := messages.ForwardBatch{Messages: make([]messages.Forward, len(env.Messages))}
	bad := map[int]error{}
	for i, m := range env.Messages {
		if decodeOne(m, json.NewDecoder(bytes.NewReader(m)), &b.Messages[i]) != nil {
			return messages.ForwardBatch{}, nil, err
		}
		var me *messages.Error
		if errors.As(textError(m), &me) {
			bad[i] = messages.Errorf(me.Code, "%s", strings.Replace(me.Message, "the request body", "the message", 1))
		}
	}
	if len(bad) == 0 {
		return messages.ForwardBatch{}, nil, err
	}
	return b, bad, nil
}

// checkReport validates one delivery_status report from the caller.
func checkReport(rep messages.StatusReport, from, field string) error {
	if err := rep.Validate(); err != nil {
		var e *messages.Error
		if field != "" && errors.As(err, &e) {
			return &messages.Error{Code: e.Code, Message: field + ": " + e.Message}
		}
		return err
	}
	if rep.Node != from {
		name := "node"
		if field != "" {
			name = field + ".node"
		}
		return mismatch(name, rep.Node, from)
	}
	return nil
}

func (s *Server) fedStatus(w http.ResponseWriter, r *http.Request, from string) {
	var rep messages.StatusReport
	if err := decodePeer(w, r, &rep); err != nil {
		s.fail(w, r, err)
		return
	}
	if err := checkReport(rep, from, ""); err != nil {
		s.refuseOrFail(w, r, from, err)
		return
	}
	ctx, cancel := s.ctx(r)
	defer cancel()
	res, err := s.cfg.Backend.FederationStatus(ctx, from, []messages.StatusReport{rep})
	if err == nil && len(res) != 1 {
		err = fmt.Errorf("backend answered %d results for 1 report", len(res))
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, res[0])
}

// fedStatusBatch refuses the whole batch for one bad report: a StatusReply
// has no room for an error, and a report is made by the sender from a
// stored message, so a bad one is a bug to see, not traffic to route.
func (s *Server) fedStatusBatch(w http.ResponseWriter, r *http.Request, from string) {
	var b messages.StatusBatch
	if err := decodePeer(w, r, &b); err != nil {
		s.fail(w, r, err)
		return
	}
	if len(b.Statuses) == 0 || len(b.Statuses) > messages.MaxStatusBatch {
		s.fail(w, r, messages.Errorf(messages.CodeInvalidRequest, "statuses must hold 1 to %d reports, got %d",
			messages.MaxStatusBatch, len(b.Statuses)))
		return
	}
	for i, rep := range b.Statuses {
		if err := checkReport(rep, from, fmt.Sprintf("statuses[%d]", i)); err != nil {
			s.refuseOrFail(w, r, from, err)
			return
		}
	}
	ctx, cancel := s.ctx(r)
	defer cancel()
	res, err := s.cfg.Backend.FederationStatus(ctx, from, b.Statuses)
	if err == nil && len(res) != len(b.Statuses) {
		err = fmt.Errorf("backend answered %d results for %d reports", len(res), len(b.Statuses))
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, messages.StatusBatchReply{Results: res})
}

// refuseOrFail logs node mismatches (see refuse) and answers every error.
func (s *Server) refuseOrFail(w http.ResponseWriter, r *http.Request, from string, err error) {
	var e *messages.Error
	if errors.As(err, &e) && e.Code == messages.CodeNodeMismatch {
		s.refuse(w, r, from, err)
		return
	}
	s.fail(w, r, err)
}

// listPeers is GET /api/peers: a JSON array of every known peer (empty
// without federation), as docs/federation.md shows it.
func (s *Server) listPeers(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := s.ctx(r)
	defer cancel()
	peers, err := s.cfg.Backend.Peers(ctx)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if peers == nil {
		peers = []messages.PeerInfo{}
	}
	writeJSON(w, http.StatusOK, peers)
}
