package delivery

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

// Metrics counts delivery outcomes.
type Metrics struct {
	dispositions *prometheus.CounterVec
}

// NewMetrics registers switchboard_delivery_dispositions_total on reg, and
// switchboard_delivery_workers_down, which counts down (nil: none).
func NewMetrics(reg prometheus.Registerer, down *Down) (*Metrics, error) {
	m := &Metrics{dispositions: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "switchboard_delivery_dispositions_total",
		Help: "Recorded outcomes of local delivery attempts, by frontend and outcome (delivered, retry, deferred, failed, expired).",
	}, []string{"frontend", "outcome"})}
	downs := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "switchboard_delivery_workers_down",
		Help: "Frontends whose delivery worker on this instance used up its restart budget and waits to be started again: they deliver nothing meanwhile.",
	}, func() float64 { return float64(down.Len()) })
	for _, c := range []prometheus.Collector{m.dispositions, downs} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// count records one applied outcome.
func (m *Metrics) count(o persistence.Outcome) {
	if m == nil {
		return
	}
	m.dispositions.WithLabelValues(o.Target, disposition(o)).Inc()
}

// disposition is the outcome label of o: a deferral (the frontend was
// busy: no attempt) is "deferred", apart from the retries of attempts
// that failed, so that a frontend's throttling shows as such.
func disposition(o persistence.Outcome) string {
	switch {
	case o.Result == persistence.ResultFailed && o.Reason == messages.ReasonExpired:
		return "expired"
	case o.Deferred && o.Result == persistence.ResultRetry:
		return "deferred"
	}
	return string(o.Result)
}
