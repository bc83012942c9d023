package smppout

import (
	"fmt"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard-dev/switchboard/smpp"
)

// Metrics are the smpp frontends' metrics (docs/metrics.md).
type Metrics struct {
	state    *prometheus.GaugeVec
	binds    *prometheus.CounterVec
	window   *prometheus.GaugeVec
	submits  *prometheus.CounterVec
	submitS  *prometheus.HistogramVec
	noID     *prometheus.CounterVec
	receipts *prometheus.CounterVec
	took     *prometheus.HistogramVec
	commands *prometheus.CounterVec
	// hold is one client's hold on its frontend's gauges (bind_state,
	// window_in_use; nil: the registry's Metrics, which always writes
	// them). See ofClient.
	hold *gaugeHold
}

// gaugeHold is whether a client still writes its frontend's gauges: a
// client that Clients.Get replaced does not (the frontend's new client
// owns them). A write checks it under mu, so that none is under way once
// retire returns.
type gaugeHold struct {
	mu      sync.Mutex
	retired bool
}

// ofClient is m for one client: the same series, with a hold on the
// gauges that retire lets go (nil for nil).
func (m *Metrics) ofClient() *Metrics {
	if m == nil {
		return nil
	}
	c := *m
	c.hold = &gaugeHold{}
	return &c
}

// retire stops the client's writes to its frontend's gauges; a write
// under way has ended when it returns. Its counters go on counting what it
// does (a submit answered, a receipt recorded).
func (m *Metrics) retire() {
	if m == nil || m.hold == nil {
		return
	}
	m.hold.mu.Lock()
	m.hold.retired = true
	m.hold.mu.Unlock()
}

// gauge runs set, a write to the frontend's gauges, unless the client
// retired.
func (m *Metrics) gauge(set func()) {
	if m.hold == nil {
		set()
		return
	}
	m.hold.mu.Lock()
	defer m.hold.mu.Unlock()
	if !m.hold.retired {
		set()
	}
}

// NewMetrics registers the switchboard_smpp_frontend_* metrics on reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		state: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "switchboard_smpp_frontend_bind_state",
			Help: "Bind state of each smpp frontend's connection on this instance: 1 for its current state (open, bound_tx, bound_trx, closed), 0 for the others.",
		}, []string{"frontend", "state"}),
		binds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_smpp_frontend_binds_total",
			Help: "Bind attempts of smpp frontends, by result (bound, refused: the SMSC's command_status, error: no connection or no answer).",
		}, []string{"frontend", "result"}),
		window: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "switchboard_smpp_frontend_window_in_use",
			Help: "submit_sm sent on the smpp frontend's connection and not yet answered.",
		}, []string{"frontend"}),
		submits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_smpp_frontend_submits_total",
			Help: "submit_sm answered (or not) by the SMSC, by command_status name (ESME_ROK, ESME_RTHROTTLED, ...; other for a status SMPP v3.4 does not name; no_response when none came).",
		}, []string{"frontend", "status"}),
		submitS: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "switchboard_smpp_frontend_submit_seconds",
			Help:    "Time from writing a submit_sm to its submit_sm_resp.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2.5, 12),
		}, []string{"frontend"}),
		noID: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_smpp_frontend_submits_without_id_total",
			Help: "submit_sm answered ESME_ROK whose submit_sm_resp gave no message id (an empty message_id, or a body that could not be read): the message is delivered, its receipts cannot be matched to it (they count unknown).",
		}, []string{"frontend"}),
		receipts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_smpp_frontend_receipts_total",
			Help: "Delivery receipts the SMSC sent, by result (recorded; unknown: no message has its id after it waited for one, never recorded or purged; malformed; error: not recorded, the store failing or too many receipts waiting, refused for the SMSC to send again, or one answered already lost: the client stopped before its message was stored, or the store failed; logged).",
		}, []string{"frontend", "result"}),
		took: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "switchboard_smpp_frontend_receipt_delay_seconds",
			Help:    "Time from submission to the final state, as the SMSC's receipts date them (whole minutes: 0 within one); a recorded receipt without both dates is not observed.",
			Buckets: []float64{60, 300, 900, 3600, 4 * 3600, 24 * 3600},
		}, []string{"frontend"}),
		commands: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_smpp_frontend_pdus_total",
			Help: "PDUs on smpp frontends' connections, by direction (sent, received), command and command_status name (other for a status SMPP v3.4 does not name).",
		}, []string{"frontend", "direction", "command", "status"}),
	}
	for _, c := range []prometheus.Collector{m.state, m.binds, m.window, m.submits, m.submitS, m.noID, m.receipts, m.took, m.commands} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("smpp frontend metrics: %w", err)
		}
	}
	return m, nil
}

// setState marks fe's state.
func (m *Metrics) setState(fe string, st smpp.BindState) {
	if m == nil {
		return
	}
	m.gauge(func() {
		for _, s := range []smpp.BindState{smpp.StateOpen, smpp.StateBoundTX, smpp.StateBoundTRX, smpp.StateClosed} {
			v := 0.0
			if s == st {
				v = 1
			}
			m.state.WithLabelValues(fe, s.String()).Set(v)
		}
	})
}

// forget drops fe's series (its frontend is gone from this instance).
func (m *Metrics) forget(fe string) {
	if m == nil {
		return
	}
	for _, v := range []interface {
		DeletePartialMatch(prometheus.Labels) int
	}{m.state, m.binds, m.window, m.submits, m.submitS, m.noID, m.receipts, m.took, m.commands} {
		v.DeletePartialMatch(prometheus.Labels{"frontend": fe})
	}
}

func (m *Metrics) bind(fe, result string) {
	if m != nil {
		m.binds.WithLabelValues(fe, result).Inc()
	}
}

func (m *Metrics) windowInUse(fe string, n int) {
	if m != nil {
		m.gauge(func() { m.window.WithLabelValues(fe).Set(float64(n)) })
	}
}

func (m *Metrics) submit(fe, status string, seconds float64) {
	if m == nil {
		return
	}
	m.submits.WithLabelValues(fe, status).Inc()
	if seconds >= 0 {
		m.submitS.WithLabelValues(fe).Observe(seconds)
	}
}

func (m *Metrics) withoutID(fe string, n int) {
	if m != nil {
		m.noID.WithLabelValues(fe).Add(float64(n))
	}
}

func (m *Metrics) receipt(fe, result string) {
	if m != nil {
		m.receipts.WithLabelValues(fe, result).Inc()
	}
}

func (m *Metrics) receiptDelay(fe string, seconds float64) {
	if m != nil {
		m.took.WithLabelValues(fe).Observe(seconds)
	}
}

func (m *Metrics) pdu(fe string, sent bool, p smpp.PDU) {
	if m == nil {
		return
	}
	dir := "received"
	if sent {
		dir = "sent"
	}
	m.commands.WithLabelValues(fe, dir, p.Command.String(), statusLabel(p.Status)).Inc()
}

// statusLabel is the status label of a command_status: its name in SMPP
// v3.4, or "other" for a status the specification does not name (a
// vendor's, or garbage), which an SMSC can make up without bound: each
// would be a series of its own. Logs and verdicts keep the number.
func statusLabel(s smpp.Status) string {
	if s.Named() {
		return s.String()
	}
	return "other"
}
