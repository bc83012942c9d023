package smsc

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard-dev/switchboard/httpapi/auth"
	"github.com/switchboard-dev/switchboard/smpp"
)

// Metrics are the listener's metrics (docs/metrics.md, "SMPP listener").
type Metrics struct {
	binds       *prometheus.GaugeVec
	bindRefused *prometheus.CounterVec
	responses   *prometheus.CounterVec
	submits     *prometheus.CounterVec
	submitTime  prometheus.Histogram
	receipts    *prometheus.CounterVec
	partsHeld   prometheus.Gauge
	incomplete  *prometheus.CounterVec
	pending     prometheus.Gauge
}

// NewMetrics registers the listener's metrics on reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		binds: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "switchboard_smpp_listen_binds",
			Help: "ESME sessions bound to the SMPP listener, by account (an SMPP account's system_id, other when none names the ESME) and bind type."}, []string{"account", "type"}),
		bindRefused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "switchboard_smpp_listen_bind_refusals_total",
			Help: "Binds the SMPP listener refused, by command_status."}, []string{"status"}),
		responses: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "switchboard_smpp_listen_responses_total",
			Help: "Responses the SMPP listener sent (generic_nack included), by command and command_status."}, []string{"command", "status"}),
		submits: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "switchboard_smpp_listen_submits_total",
			Help: "Messages submitted over SMPP and stored (a concatenated message once), by account (an SMPP account's system_id, other when none names the ESME)."}, []string{"account"}),
		submitTime: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "switchboard_smpp_listen_submit_seconds",
			Help:    "From a submit_sm (or data_sm) read to its response written, ESME_ROK only (a part waits for its message's last part).",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)}),
		receipts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "switchboard_smpp_listen_receipts_total",
			Help: "Delivery receipts sent to ESMEs, by result: delivered (deliver_sm_resp ESME_ROK), retry, failed (refused for good)."}, []string{"result"}),
		partsHeld: prometheus.NewGauge(prometheus.GaugeOpts{Name: "switchboard_smpp_listen_parts_held",
			Help: "Parts of concatenated messages held for the rest of their message."}),
		incomplete: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "switchboard_smpp_listen_incomplete_total",
			Help: "Concatenated messages whose parts were refused because their next part did not come within the reassembly wait, by reason: window (the ESME sent the first parts and waited for their answers: its window is likely smaller than the message's parts) or timeout (parts missing otherwise)."},
			[]string{"reason"}),
		pending: prometheus.NewGauge(prometheus.GaugeOpts{Name: "switchboard_smpp_listen_window_in_use",
			Help: "submit_sm and data_sm of every session awaiting their answer (their commit, or their message's last part)."}),
	}
	for _, c := range []prometheus.Collector{m.binds, m.bindRefused, m.responses, m.submits, m.submitTime, m.receipts, m.partsHeld, m.incomplete, m.pending} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	for _, r := range []string{"delivered", "retry", "failed"} {
		m.receipts.WithLabelValues(r)
	}
	for _, r := range []string{"window", "timeout"} {
		m.incomplete.WithLabelValues(r)
	}
	return m, nil
}

// otherAccount is the account label of an ESME that no SMPP account
// names: a node without credentials lets any system_id bind, and a series
// for each would grow without bound.
const otherAccount = "other"

// accountLabel is who's account label: its name when it is an SMPP
// account (a credential the node knows), else otherAccount.
func accountLabel(who auth.Principal) string {
	if who.SMPP {
		return who.Name
	}
	return otherAccount
}

// observe counts the responses a session writes.
func (m *Metrics) observe(sent bool, p smpp.PDU) {
	if sent && p.Command.IsResponse() {
		m.responses.WithLabelValues(p.Command.String(), p.Status.String()).Inc()
	}
}
