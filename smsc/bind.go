package smsc

import (
	"github.com/switchboard-dev/switchboard/httpapi/auth"
	"github.com/switchboard-dev/switchboard/smpp"
)

// Authenticate decides an ESME's bind with the node's credentials in
// force: the system_id names an SMPP account (a credential flagged smpp)
// and the password is its token. An unknown system_id, or one that names
// a credential that is no SMPP account, is ESME_RINVSYSID; a wrong
// password ESME_RINVPASWD. A node without any credential (its API is open
// too) lets every bind in, as the system_id it gives.
func Authenticate(creds *auth.Set, systemID, password string) (auth.Principal, smpp.Status) {
	if creds.Open() {
		if systemID == "" {
			return auth.Principal{}, smpp.StatusInvalidSystemID
		}
		return auth.Principal{Name: systemID, Role: auth.Anonymous.Role}, smpp.StatusOK
	}
	c, ok := creds.Credential(systemID)
	if !ok || !c.SMPP {
		return auth.Principal{}, smpp.StatusInvalidSystemID
	}
	p, ok := creds.Check(systemID, password)
	if !ok {
		return auth.Principal{}, smpp.StatusInvalidPassword
	}
	return p, smpp.StatusOK
}
