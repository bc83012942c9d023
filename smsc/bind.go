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

// StillBound decides, when the credentials in force change to creds,
// whether a session bound as account stays bound: hash is the token hash
// of the credential it bound with ("" when it bound to a node without
// credentials). It stays while account is an SMPP account of that
// password (a revocation, a new password or a credential no longer
// flagged smpp ends it), or while creds are open; the principal is the
// account's now (its submit rate may have changed).
func StillBound(creds *auth.Set, account, hash string) (auth.Principal, bool) {
	if creds.Open() {
		return auth.Principal{Name: account, Role: auth.Anonymous.Role}, true
	}
	c, ok := creds.Credential(account)
	if !ok || !c.SMPP || hash == "" || c.TokenHash != hash {
		return auth.Principal{}, false
	}
	return auth.Principal{Name: c.Name, Role: c.Role, Frontends: c.Frontends, SubmitRate: c.SubmitRate, SMPP: true}, true
}
