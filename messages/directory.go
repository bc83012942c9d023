package messages

import "time"

// Route maps a destination prefix to a frontend.
type Route struct {
	Prefix    string    `json:"prefix"`
	Frontend  string    `json:"frontend"`
	UpdatedAt time.Time `json:"updated_at"`
	// Local, set by the intake, says Frontend is one of this node's own:
	// the store then takes the route only while that frontend is stored
	// (persistence.ErrUnknownFrontend). Not on the wire.
	Local bool `json:"-"`
}

// FrontendMode is how a frontend receives messages.
type FrontendMode string

// Frontend modes.
const (
	// ModePull: the frontend long-polls the node and acks.
	ModePull FrontendMode = "pull"
	// ModeWebhook: the node POSTs each message to the frontend's URL.
	ModeWebhook FrontendMode = "webhook"
	// ModeActor: an in-process actor registered through the embedding API.
	ModeActor FrontendMode = "actor"
	// ModeSMPP: the node binds to an SMSC as an ESME and submits each
	// message (URL smpp://system_id@host:port?options, docs/smpp.md).
	ModeSMPP FrontendMode = "smpp"
)

// Valid reports whether m is a known mode.
func (m FrontendMode) Valid() bool {
	return m == ModePull || m == ModeWebhook || m == ModeActor || m == ModeSMPP
}

// Frontend is a local frontend's registration.
type Frontend struct {
	Name string       `json:"name"`
	Mode FrontendMode `json:"mode"`
	URL  string       `json:"url,omitempty"`
	// Secret, when set, signs each webhook call (X-Switchboard-Signature,
	// docs/api.md); of an smpp frontend, it is the password of its bind.
	// It is never written to JSON: the API shows only SecretSet.
	Secret string `json:"-"`
	// SecretSet tells whether the frontend has a Secret (filled by the
	// store when it reads the frontend).
	SecretSet bool `json:"secret_set,omitempty"`
	// BindState, of an smpp frontend in the API's answers, is the state of
	// its connection to the SMSC on the instance that answered (open,
	// bound_tx, bound_trx, closed); not stored.
	BindState string `json:"bind_state,omitempty"`
	// Worker, in the API's answers, is WorkerDown while the frontend's
	// delivery worker on the instance that answered is down (it used up
	// its restart budget), and WorkerRestartAt when a new one starts (nil:
	// none will, the node stops); empty while it runs. Not stored.
	Worker          string     `json:"worker,omitempty"`
	WorkerRestartAt *time.Time `json:"worker_restart_at,omitempty"`
	CreatedAt       time.Time  `json:"created_at"`
	UpdatedAt       time.Time  `json:"updated_at"`
}

// WorkerDown is Frontend.Worker while the frontend's delivery worker is
// down.
const WorkerDown = "down"

// Shown is f as the API shows it (and audit records and logs name it):
// without its secret, and its URL's password replaced by RedactedPassword
// (docs/api.md, "Frontends"). A read-only operator sees the frontends, and
// a webhook URL's password is a credential of the frontend's service.
func (f Frontend) Shown() Frontend {
	f.Secret = ""
	f.URL = RedactURL(f.URL)
	return f
}
