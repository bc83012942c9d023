package storetest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"slices"
	"time"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

// The cases of who may do what: the credential of each submission and a
// client's view of its own messages, webhook secrets, credentials, and
// the audit trail.
func securityCases() []testCase {
	return []testCase{
		{"SubmitterStoredAndListed", secSubmitterListed},
		{"AnotherCredentialsIDConflicts", secOwnerConflict},
		{"WebhookSecretStored", secWebhookSecret},
		{"CredentialsAddListRevoke", secCredentials},
		{"CredentialRefusalsChangeNothing", secCredentialRefusals},
		{"RevokeLeavesAValidCredential", secRevokeLeavesValid},
		{"AuditAppendListFilterPage", secAuditList},
		{"AuditPurgedByAgeAloneNeverWithMessages", secAuditPurge},
	}
}

// by is newMsg submitted by the credential name.
func by(id, name string) persistence.NewMessage {
	nm := newMsg(id)
	nm.SubmittedBy = name
	return nm
}

func secSubmitterListed(f *fixture) {
	f.accept(base, by("own-a1", "alice"), by("own-b1", "bob"), newMsg("own-none"))
	f.accept(at(time.Second), by("own-a2", "alice"), by("own-a3", "alice"))
	f.checkMessage("GetMessage", f.get("own-a1"), expected(by("own-a1", "alice"), base))
	if got := f.get("own-none").SubmittedBy; got != "" {
		f.Errorf("a message without a submitter reads back submitted by %q", got)
	}
	ids := func(p persistence.Page) []string {
		var out []string
		for _, m := range p.Messages {
			out = append(out, m.ID)
		}
		return out
	}
	// Newest first, a page at a time.
	p := f.list(persistence.ListQuery{SubmittedBy: "alice", Limit: 2})
	if got := ids(p); !slices.Equal(got, []string{"own-a3", "own-a2"}) || p.Next == 0 {
		f.Fatalf("alice's first page = %v (next %d), want [own-a3 own-a2] and more", got, p.Next)
	}
	if got := p.Messages[0].SubmittedBy; got != "alice" {
		f.Errorf("listed message submitted by %q, want alice", got)
	}
	p = f.list(persistence.ListQuery{SubmittedBy: "alice", Limit: 2, Before: p.Next})
	if got := ids(p); !slices.Equal(got, []string{"own-a1"}) || p.Next != 0 {
		f.Errorf("alice's second page = %v (next %d), want [own-a1], the last", got, p.Next)
	}
	if got := ids(f.list(persistence.ListQuery{SubmittedBy: "bob", Limit: 10})); !slices.Equal(got, []string{"own-b1"}) {
		f.Errorf("bob's messages = %v, want [own-b1]", got)
	}
	// With the other filters: a state, a time range, a number.
	if got := ids(f.list(persistence.ListQuery{SubmittedBy: "alice", State: messages.StatePending, Limit: 10})); len(got) != 3 {
		f.Errorf("alice's pending messages = %v, want 3", got)
	}
	if got := ids(f.list(persistence.ListQuery{SubmittedBy: "alice", Since: at(time.Second), Limit: 10})); !slices.Equal(got, []string{"own-a3", "own-a2"}) {
		f.Errorf("alice's messages since 1s = %v, want [own-a3 own-a2]", got)
	}
	dest := persistence.NumberMatch{Key: messages.NumberKey(newMsg("x").DestinationMSISDN)}
	if got := ids(f.list(persistence.ListQuery{SubmittedBy: "bob", Destination: dest, Limit: 10})); !slices.Equal(got, []string{"own-b1"}) {
		f.Errorf("bob's messages to the number = %v, want [own-b1]", got)
	}
	if got := ids(f.list(persistence.ListQuery{SubmittedBy: "carol", Limit: 10})); len(got) != 0 {
		f.Errorf("carol submitted nothing, listed %v", got)
	}
}

func secOwnerConflict(f *fixture) {
	f.accept(base, by("own-x", "alice"))
	res := f.accept(at(time.Second), by("own-x", "bob"), by("own-x", "alice"))
	if res[0].Created || res[0].Conflict != persistence.ConflictOwner {
		f.Errorf("the same id and content from another credential: created %v, conflict %q; want a %q conflict",
			res[0].Created, res[0].Conflict, persistence.ConflictOwner)
	}
	if res[1].Created || res[1].Conflict != "" {
		f.Errorf("the same id and content again from its credential: created %v, conflict %q; want the stored message", res[1].Created, res[1].Conflict)
	}
	anon := f.accept(at(time.Second), newMsg("own-x"))[0]
	if anon.Conflict != persistence.ConflictOwner {
		f.Errorf("the id without a credential: conflict %q, want %q", anon.Conflict, persistence.ConflictOwner)
	}
	fwd := newMsg("own-x")
	fwd.ReportTo = peerP
	if c := f.accept(at(time.Second), fwd)[0].Conflict; c != "" {
		f.Errorf("a peer's forward of a stored id conflicts (%q): it is a retry", c)
	}
	if got := f.get("own-x").SubmittedBy; got != "alice" {
		f.Errorf("stored message now submitted by %q, want alice", got)
	}
}

func secWebhookSecret(f *fixture) {
	hook := persistence.Frontend{Name: "hook", Mode: persistence.ModeWebhook, URL: "https://fe.example/in",
		Secret: "0123456789abcdef0123", CreatedAt: base, UpdatedAt: base}
	f.putFrontend(hook)
	f.putFrontend(persistence.Frontend{Name: "pull", Mode: persistence.ModePull, CreatedAt: base, UpdatedAt: base})
	fes := f.frontends()
	if fes[0].Secret != hook.Secret || !fes[0].SecretSet {
		f.Errorf("webhook read back with secret %q (set %v), want %q", fes[0].Secret, fes[0].SecretSet, hook.Secret)
	}
	if fes[1].Secret != "" || fes[1].SecretSet {
		f.Errorf("pull frontend read back with a secret: %+v", fes[1])
	}
	// A replace without a secret removes it: a PUT is the whole frontend.
	hook.Secret, hook.UpdatedAt = "", at(time.Second)
	f.putFrontend(hook)
	if fe := f.frontends()[0]; fe.Secret != "" || fe.SecretSet {
		f.Errorf("replaced without a secret, read back %+v", fe)
	}
}

// hashOf is the stored form of token.
func hashOf(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// auditOf is an audit entry of action on target at t.
func auditOf(action, target string, t time.Time) messages.AuditEntry {
	return messages.AuditEntry{At: t, Actor: "cli:tester@host", Remote: "cli", Action: action, Target: target}
}

func (f *fixture) credentials() []messages.Credential {
	f.Helper()
	cs, err := f.store.Credentials(f.ctx)
	if err != nil {
		f.Fatalf("Credentials: %v", err)
	}
	return cs
}

func (f *fixture) auditTrail(q persistence.AuditQuery) persistence.AuditPage {
	f.Helper()
	if q.Limit == 0 {
		q.Limit = 100
	}
	p, err := f.store.ListAudit(f.ctx, q)
	if err != nil {
		f.Fatalf("ListAudit(%+v): %v", q, err)
	}
	return p
}

func secCredentials(f *fixture) {
	if cs := f.credentials(); len(cs) != 0 {
		f.Fatalf("a new store holds credentials %+v", cs)
	}
	gw := messages.Credential{Name: "uk-gw", Role: messages.RoleFrontend, TokenHash: hashOf("t-gw"),
		Frontends: []string{"sms-uk", "sms-ie", "sms-uk"}, CreatedAt: base}
	app := messages.Credential{Name: "app", Role: messages.RoleClient, TokenHash: hashOf("t-app"), SubmitRate: 12.5, CreatedAt: at(time.Second)}
	esme := messages.Credential{Name: "esme", Role: messages.RoleClient, TokenHash: hashOf("pw8chars"), SMPP: true, CreatedAt: at(time.Second)}
	for _, c := range []messages.Credential{gw, app, esme} {
		if err := f.store.AddCredential(f.ctx, c, auditOf(messages.AuditCredentialAdd, c.Name, c.CreatedAt)); err != nil {
			f.Fatalf("AddCredential(%s): %v", c.Name, err)
		}
	}
	cs := f.credentials()
	if len(cs) != 3 || cs[0].Name != "app" || cs[1].Name != "esme" || cs[2].Name != "uk-gw" {
		f.Fatalf("Credentials = %+v, want app, esme and uk-gw, by name", cs)
	}
	if c := cs[0]; c.Role != messages.RoleClient || c.TokenHash != app.TokenHash || c.SubmitRate != 12.5 || c.Frontends != nil || c.SMPP {
		f.Errorf("app read back %+v", c)
	}
	if c := cs[1]; !c.SMPP || c.TokenHash != esme.TokenHash {
		f.Errorf("esme read back %+v, want an SMPP account", c)
	}
	cs = slices.Delete(cs, 1, 2)
	f.wantTime("app CreatedAt", cs[0].CreatedAt, app.CreatedAt)
	if c := cs[1]; c.Role != messages.RoleFrontend || !slices.Equal(c.Frontends, []string{"sms-ie", "sms-uk"}) || c.SubmitRate != 0 {
		f.Errorf("uk-gw read back %+v, want its frontends sorted, once each", c)
	}
	trail := f.auditTrail(persistence.AuditQuery{}).Entries
	if len(trail) != 3 || trail[0].Target != "esme" || trail[2].Target != "uk-gw" || trail[0].Action != messages.AuditCredentialAdd {
		f.Fatalf("audit after three additions = %+v", trail)
	}

	if err := f.store.RevokeCredential(f.ctx, "uk-gw", auditOf(messages.AuditCredentialRevoke, "uk-gw", at(2*time.Second))); err != nil {
		f.Fatalf("RevokeCredential: %v", err)
	}
	if cs := f.credentials(); len(cs) != 2 || cs[0].Name != "app" {
		f.Errorf("after revoking uk-gw: %+v", cs)
	}
	if e := f.auditTrail(persistence.AuditQuery{}).Entries[0]; e.Action != messages.AuditCredentialRevoke || e.Target != "uk-gw" {
		f.Errorf("newest audit entry %+v, want the revocation", e)
	}
	// The revoked token's hash is free again.
	gw.Name = "uk-gw-2"
	if err := f.store.AddCredential(f.ctx, gw, auditOf(messages.AuditCredentialAdd, gw.Name, at(3*time.Second))); err != nil {
		f.Errorf("adding a credential with a revoked credential's token: %v", err)
	}
}

func secCredentialRefusals(f *fixture) {
	app := messages.Credential{Name: "app", Role: messages.RoleClient, TokenHash: hashOf("t-app"), CreatedAt: base}
	if err := f.store.AddCredential(f.ctx, app, auditOf(messages.AuditCredentialAdd, "app", base)); err != nil {
		f.Fatal(err)
	}
	trail := len(f.auditTrail(persistence.AuditQuery{}).Entries)
	refused := func(what string, err error, want error) {
		f.Helper()
		if err == nil || (want != nil && !errors.Is(err, want)) {
			f.Errorf("%s: %v, want an error (%v)", what, err, want)
		}
		if cs := f.credentials(); len(cs) != 1 || cs[0].Name != "app" || cs[0].TokenHash != app.TokenHash {
			f.Errorf("%s changed the credentials: %+v", what, cs)
		}
		if n := len(f.auditTrail(persistence.AuditQuery{}).Entries); n != trail {
			f.Errorf("%s wrote %d audit entries", what, n-trail)
		}
	}
	add := func(c messages.Credential) error {
		return f.store.AddCredential(f.ctx, c, auditOf(messages.AuditCredentialAdd, c.Name, base))
	}
	taken := app
	taken.TokenHash = hashOf("another")
	refused("a taken name", add(taken), persistence.ErrExists)
	copyTok := app
	copyTok.Name = "app-2"
	refused("a taken token", add(copyTok), persistence.ErrExists)
	bad := app
	bad.Name, bad.Role = "bad", "root"
	refused("an unknown role", add(bad), nil)
	bad = app
	bad.Name, bad.TokenHash = "bad", "not-a-hash"
	refused("a malformed hash", add(bad), nil)
	bad = app
	bad.Name, bad.Role = "bad", messages.RoleFrontend
	refused("a frontend credential bound to nothing", add(bad), nil)
	bad = app
	bad.Name = messages.ReservedCredential
	refused("the --api-token credential's name", add(bad), nil)
	noAudit := copyTok
	noAudit.TokenHash = hashOf("x")
	refused("an addition without its audit entry", f.store.AddCredential(f.ctx, noAudit, messages.AuditEntry{}), nil)
	refused("revoking an unknown credential",
		f.store.RevokeCredential(f.ctx, "nobody", auditOf(messages.AuditCredentialRevoke, "nobody", base)), persistence.ErrNotFound)
	refused("revoking the last credential",
		f.store.RevokeCredential(f.ctx, "app", auditOf(messages.AuditCredentialRevoke, "app", base)), persistence.ErrLastCredential)
}

// CredentialSeeder writes a credential row straight into the table, as
// the store's AddCredential would refuse it (a newer version's role, say):
// the value open returns must implement it (a test-only wrapper, like
// Recounter).
type CredentialSeeder interface {
	SeedCredential(ctx context.Context, c messages.Credential) error
}

// secRevokeLeavesValid: a revocation that would leave only rows a node
// leaves out as invalid is refused as the last credential's, and changes
// nothing; with a valid credential left it goes through.
func secRevokeLeavesValid(f *fixture) {
	seeder, ok := f.store.(CredentialSeeder)
	if !ok {
		f.Fatalf("the store under test does not implement storetest.CredentialSeeder")
	}
	app := messages.Credential{Name: "app", Role: messages.RoleClient, TokenHash: hashOf("t-app"), CreatedAt: base}
	if err := f.store.AddCredential(f.ctx, app, auditOf(messages.AuditCredentialAdd, "app", base)); err != nil {
		f.Fatal(err)
	}
	if err := seeder.SeedCredential(f.ctx, messages.Credential{Name: "auditor", Role: "auditor", TokenHash: hashOf("t-auditor"), CreatedAt: base}); err != nil {
		f.Fatalf("SeedCredential: %v", err)
	}
	trail := len(f.auditTrail(persistence.AuditQuery{}).Entries)
	err := f.store.RevokeCredential(f.ctx, "app", auditOf(messages.AuditCredentialRevoke, "app", at(time.Second)))
	if !errors.Is(err, persistence.ErrLastCredential) {
		f.Errorf("revoking the last valid credential, an invalid one left: %v, want ErrLastCredential", err)
	}
	if cs := f.credentials(); len(cs) != 2 || cs[0].Name != "app" {
		f.Errorf("a refused revocation changed the credentials: %+v", cs)
	}
	if n := len(f.auditTrail(persistence.AuditQuery{}).Entries); n != trail {
		f.Errorf("a refused revocation wrote %d audit entries", n-trail)
	}
	ops := messages.Credential{Name: "ops", Role: messages.RoleOperator, TokenHash: hashOf("t-ops"), CreatedAt: base}
	if err := f.store.AddCredential(f.ctx, ops, auditOf(messages.AuditCredentialAdd, "ops", base)); err != nil {
		f.Fatal(err)
	}
	if err := f.store.RevokeCredential(f.ctx, "app", auditOf(messages.AuditCredentialRevoke, "app", at(2*time.Second))); err != nil {
		f.Errorf("revoking app with ops left: %v", err)
	}
}

func secAuditList(f *fixture) {
	entries := []messages.AuditEntry{
		{At: at(0), Actor: "ops", Role: messages.RoleOperator, Remote: "10.0.0.1:5000", Action: messages.AuditResubmit, Target: "m-1"},
		{At: at(time.Minute), Actor: "root", Role: messages.RoleAdmin, Remote: "10.0.0.2:5000", Action: messages.AuditRoutePut, Target: "44", Detail: "frontend sms-uk"},
		{At: at(2 * time.Minute), Actor: "ops", Role: messages.RoleOperator, Remote: "10.0.0.1:5001", Action: messages.AuditResubmitBulk, Target: "failed", Detail: "3 resubmitted"},
		{At: at(3 * time.Minute), Actor: "ops", Role: messages.RoleOperator, Remote: "10.0.0.1:5002", Action: messages.AuditResubmit, Target: "m-2"},
	}
	if err := f.store.AppendAudit(f.ctx, entries); err != nil {
		f.Fatalf("AppendAudit: %v", err)
	}
	all := f.auditTrail(persistence.AuditQuery{}).Entries
	if len(all) != 4 {
		f.Fatalf("ListAudit = %d entries, want 4", len(all))
	}
	for i, got := range all {
		want := entries[len(entries)-1-i]
		if got.Actor != want.Actor || got.Role != want.Role || got.Remote != want.Remote || got.Action != want.Action ||
			got.Target != want.Target || got.Detail != want.Detail || got.Seq == 0 {
			f.Errorf("entry %d = %+v, want %+v (newest first, with a seq)", i, got, want)
		}
		f.wantTime("entry time", got.At, want.At)
		if i > 0 && got.Seq >= all[i-1].Seq {
			f.Errorf("entry %d has seq %d after %d: not newest first", i, got.Seq, all[i-1].Seq)
		}
	}
	targets := func(p persistence.AuditPage) []string {
		var out []string
		for _, e := range p.Entries {
			out = append(out, e.Target)
		}
		return out
	}
	for _, c := range []struct {
		name string
		q    persistence.AuditQuery
		want []string
	}{
		{"actor", persistence.AuditQuery{Actor: "ops"}, []string{"m-2", "failed", "m-1"}},
		{"action", persistence.AuditQuery{Action: messages.AuditResubmit}, []string{"m-2", "m-1"}},
		{"since", persistence.AuditQuery{Since: at(time.Minute)}, []string{"m-2", "failed", "44"}},
		{"until", persistence.AuditQuery{Until: at(time.Minute)}, []string{"m-1"}},
		{"all of them", persistence.AuditQuery{Actor: "ops", Action: messages.AuditResubmit, Since: at(time.Second), Until: at(time.Hour)}, []string{"m-2"}},
		{"nothing", persistence.AuditQuery{Actor: "nobody"}, nil},
	} {
		if got := targets(f.auditTrail(c.q)); !slices.Equal(got, c.want) {
			f.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	// Pages.
	p := f.auditTrail(persistence.AuditQuery{Limit: 3})
	if got := targets(p); !slices.Equal(got, []string{"m-2", "failed", "44"}) || p.Next == 0 {
		f.Fatalf("first page %v (next %d)", got, p.Next)
	}
	p = f.auditTrail(persistence.AuditQuery{Limit: 3, Before: p.Next})
	if got := targets(p); !slices.Equal(got, []string{"m-1"}) || p.Next != 0 {
		f.Errorf("second page %v (next %d), want [m-1], the last", got, p.Next)
	}
	// Refusals change nothing.
	for _, bad := range [][]messages.AuditEntry{
		{{At: base, Actor: "x", Action: "route.rename", Target: "44"}},
		{{At: base, Action: messages.AuditRoutePut, Target: "44"}},
		{{Actor: "x", Action: messages.AuditRoutePut, Target: "44"}},
		{entries[0], {At: base, Actor: "x", Role: "root", Action: messages.AuditRoutePut}},
	} {
		if err := f.store.AppendAudit(f.ctx, bad); err == nil {
			f.Errorf("AppendAudit(%+v) succeeded", bad)
		}
	}
	if _, err := f.store.ListAudit(f.ctx, persistence.AuditQuery{Limit: 10, Action: "nope"}); err == nil {
		f.Error("ListAudit with an unknown action succeeded")
	}
	if n := len(f.auditTrail(persistence.AuditQuery{}).Entries); n != 4 {
		f.Errorf("after refused appends the trail has %d entries, want 4", n)
	}
}

func secAuditPurge(f *fixture) {
	var entries []messages.AuditEntry
	for i := range 5 {
		entries = append(entries, auditOf(messages.AuditRoutePut, string(rune('a'+i)), at(time.Duration(i)*time.Hour)))
	}
	if err := f.store.AppendAudit(f.ctx, entries); err != nil {
		f.Fatal(err)
	}
	// A message delivered long ago, purged by its own retention.
	f.accept(base, newMsg("old"))
	f.deliver(base, "old")
	if got := f.purge(retention(at(100*time.Hour), at(99*time.Hour), at(99*time.Hour)), nil); len(got) != 1 {
		f.Fatalf("messages purged: %v, want old", got)
	}
	if n := len(f.auditTrail(persistence.AuditQuery{}).Entries); n != 5 {
		f.Fatalf("the messages' purge took audit entries: %d left of 5", n)
	}
	f.accept(base, newMsg("live"))
	n, err := f.store.PurgeAudit(f.ctx, at(3*time.Hour), 2)
	if err != nil || n != 2 {
		f.Fatalf("PurgeAudit(before 3h, limit 2) = %d, %v; want 2", n, err)
	}
	targets := func() []string {
		var out []string
		for _, e := range f.auditTrail(persistence.AuditQuery{}).Entries {
			out = append(out, e.Target)
		}
		return out
	}
	if got := targets(); !slices.Equal(got, []string{"e", "d", "c"}) {
		f.Errorf("after purging the 2 oldest: %v, want [e d c]", got)
	}
	if n, err := f.store.PurgeAudit(f.ctx, at(3*time.Hour), 100); err != nil || n != 1 {
		f.Errorf("PurgeAudit(before 3h) = %d, %v; want the 1 left before it", n, err)
	}
	if got := targets(); !slices.Equal(got, []string{"e", "d"}) {
		f.Errorf("after the purge: %v, want [e d]", got)
	}
	f.get("live") // the audit's purge leaves messages alone
	for _, bad := range []struct {
		before time.Time
		limit  int
	}{{time.Time{}, 10}, {base, 0}} {
		if _, err := f.store.PurgeAudit(f.ctx, bad.before, bad.limit); err == nil {
			f.Errorf("PurgeAudit(%v, %d) succeeded", bad.before, bad.limit)
		}
	}
}
