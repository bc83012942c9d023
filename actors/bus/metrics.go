package bus

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the bus's metrics (docs/metrics.md).
type Metrics struct {
	up          prometheus.Gauge
	lag         prometheus.Gauge
	published   prometheus.Counter
	redelivered *prometheus.CounterVec
	settled     *prometheus.CounterVec
	pending     *prometheus.GaugeVec
	ackPending  *prometheus.GaugeVec
}

// NewMetrics registers the bus's metrics on reg. site are the constant
// labels of the gauges every instance of a site reads alike (the relay lag
// from the shared store, the consumers from the site's stream), which
// name the site.
func NewMetrics(reg prometheus.Registerer, site prometheus.Labels) (*Metrics, error) {
	m := &Metrics{
		up: prometheus.NewGauge(prometheus.GaugeOpts{Name: "switchboard_bus_up",
			Help: "1 while this instance is connected to the delivery bus and its stream is ready, else 0."}),
		lag: prometheus.NewGauge(prometheus.GaugeOpts{Name: "switchboard_bus_relay_lag_seconds", ConstLabels: site,
			Help: "Age of the oldest delivery work not yet relayed to the bus; 0 when none waits."}),
		published: prometheus.NewCounter(prometheus.CounterOpts{Name: "switchboard_bus_published_total",
			Help: "Delivery work published to the bus and acknowledged by its stream (duplicates the stream dropped included)."}),
		redelivered: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "switchboard_bus_redelivered_total",
			Help: "Bus messages this instance received that had been handed out before, by frontend."}, []string{"frontend"}),
		settled: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "switchboard_bus_settled_total",
			Help: "Bus messages this instance settled, by frontend and action (acked, naked, termed)."}, []string{"frontend", "action"}),
		pending: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "switchboard_bus_consumer_pending", ConstLabels: site,
			Help: "Messages in the stream not yet handed out to a frontend's consumer, as JetStream last reported."}, []string{"frontend"}),
		ackPending: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "switchboard_bus_consumer_ack_pending", ConstLabels: site,
			Help: "Messages handed out to a frontend's consumer and not yet acked, as JetStream last reported."}, []string{"frontend"}),
	}
	for _, c := range []prometheus.Collector{m.up, m.lag, m.published, m.redelivered, m.settled, m.pending, m.ackPending} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Settle counts one settled message.
func (m *Metrics) Settle(frontend string, a Action) {
	if m != nil && a != Keep {
		m.settled.WithLabelValues(frontend, a.String()).Inc()
	}
}

// Redelivered counts a message that had been handed out before.
func (m *Metrics) Redelivered(frontend string) {
	if m != nil {
		m.redelivered.WithLabelValues(frontend).Inc()
	}
}

// frontend makes a frontend's series present from its first use, at 0.
func (m *Metrics) frontend(fe string) {
	if m == nil {
		return
	}
	m.redelivered.WithLabelValues(fe)
	for _, a := range []Action{Ack, Nak, Term} {
		m.settled.WithLabelValues(fe, a.String())
	}
}
