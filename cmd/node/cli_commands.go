package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/switchboard-dev/switchboard/actors/ring"
	"github.com/switchboard-dev/switchboard/httpapi"
	"github.com/switchboard-dev/switchboard/messages"
)

// cliTopics are the admin commands, in usage order.
var cliTopics = []*cliTopic{
	{
		name:  "messages",
		about: "Inspect the message queue and resubmit failed messages.",
		def:   "list",
		verbs: []*cliCommand{
			{
				name:     "messages list",
				summary:  "list and search messages, newest first",
				synopsis: "[--to NUMBER] [--from NUMBER] [--since T] [--until T] [--frontend NAME] [--peer NODE] [--state STATE] [--limit N] [--cursor C] [--all]",
				about: `List messages, newest first, one page at a time (GET /api/messages), or
search them: --to and --from match a number exactly, its '+' optional, or
every number starting so with a trailing '*' (quote it from the shell);
--since and --until bound the acceptance time. A further page is announced
on stderr with the --cursor that fetches it; --all fetches every page (with
--json, as one document whose next_cursor is empty).

  switchboard messages list --to '+447700900123' --since 24h`,
				flags: []cliFlag{
					{name: "to", arg: "NUMBER", usage: "only messages to this destination; NUMBER* for every one starting so"},
					{name: "from", arg: "NUMBER", usage: "only messages from this source (number or sender id); NUMBER* for a prefix"},
					{name: "since", arg: "TIME", usage: "only messages accepted at or after TIME: RFC 3339, or a duration ago (24h)"},
					{name: "until", arg: "TIME", usage: "only messages accepted before TIME: RFC 3339, or a duration ago"},
					{name: "frontend", arg: "NAME", usage: "only messages for this frontend"},
					{name: "peer", arg: "NODE", usage: "only messages from or to this peer"},
					{name: "state", arg: "STATE", usage: "only messages in STATE: " + cliStateNames(messages.AllStates)},
					{name: "limit", arg: "N", usage: "messages per page, 1 to 1000 (default: the node's, 50; 1000 with --all)"},
					{name: "cursor", arg: "C", usage: "start at the page a previous list announced"},
					{name: "all", boolean: true, usage: "follow the cursor to the last page"},
				},
				run: runMessagesList,
			},
			{
				name:     "messages show",
				summary:  "show messages with their history",
				synopsis: "ID...",
				about: `Show a message with its history of transitions (GET /api/messages/{id}).
With several ids each is tried: one the node refuses is a line on stderr,
and the exit code is then 1.`,
				run: runMessagesShow,
			},
			{
				name:     "messages resubmit",
				summary:  "resubmit failed or forward_failed messages",
				synopsis: "ID... | --state failed|forward_failed",
				about: `Re-route failed or forward_failed messages: the messages named, or with
--state every message in that state (POST /api/messages/{id}/resubmit,
POST /api/messages/resubmit). Each id named is tried: one the node
refuses is a line on stderr naming it and the error code, and the exit code
is then 1. A bulk resubmit may take up to ten times --timeout.`,
				flags: []cliFlag{
					{name: "state", arg: "STATE", usage: "resubmit every message in STATE: failed or forward_failed"},
				},
				run: runMessagesResubmit,
			},
		},
	},
	{
		name: "peers",
		cmd: &cliCommand{
			name:    "peers",
			summary: "federation peers and their health",
			about: `List the peers this node federates with and its view of their health
(GET /api/peers). An address that has not answered yet is listed under its
address until its name is learned; a peer that discovery no longer lists
reads removed while messages still wait for it. Says so when federation
is off.`,
			run: runPeers,
		},
	},
	{
		name: "ring",
		cmd: &cliCommand{
			name:    "ring",
			summary: "the site's ring: role, master, epoch, coverage, members",
			about: `Show this instance's view of its site's token ring (GET /api/ring/status):
its role, the master, the assignment epoch and coverage, and each member's
address, zone, services and share of the tokens, and on the master
whether its subscription call is open now (SUBSCRIBED: a member that
stays "no" lost its connection to the master).`,
			run: runRing,
		},
	},
	{
		name:  "routes",
		about: "Manage the routing table: destination prefix -> frontend, longest prefix wins.",
		def:   "list",
		verbs: []*cliCommand{
			{
				name:    "routes list",
				summary: "list the routes",
				about:   `List the routes (GET /api/routes).`,
				run:     runRoutesList,
			},
			{
				name:     "routes set",
				summary:  "route a destination prefix to a frontend",
				synopsis: "PREFIX FRONTEND",
				about:    `Route destinations starting with PREFIX (digits) to FRONTEND, replacing any route of PREFIX (PUT /api/routes/{prefix}).`,
				run:      runRoutesSet,
			},
			{
				name:     "routes delete",
				summary:  "delete a route",
				synopsis: "PREFIX",
				about:    `Delete the route of PREFIX (DELETE /api/routes/{prefix}). With --json nothing is printed: the API answers no document.`,
				run:      runRoutesDelete,
			},
		},
	},
	{
		name:  "frontends",
		about: "Manage this node's frontends (the gateways that deliver to subscribers).",
		def:   "list",
		verbs: []*cliCommand{
			{
				name:    "frontends list",
				summary: "list this node's frontends",
				about:   `List this node's frontends (GET /api/frontends).`,
				run:     runFrontendsList,
			},
			{
				name:     "frontends set",
				summary:  "register or change a frontend",
				synopsis: "NAME pull | NAME webhook URL [--secret-file FILE | --no-secret] | NAME smpp URL [--secret-file FILE]",
				about: `Register or change a frontend (PUT /api/frontends/{name}): a pull frontend
polls the node; a webhook frontend gets each message POSTed to URL, signed
with the secret of --secret-file when given; an smpp frontend binds to the
SMSC of URL (smpp://SYSTEM_ID[:PASSWORD]@HOST:PORT[?OPTIONS]) and submits
each message to it, with the password in URL or in --secret-file.

A change is the whole frontend: a secret not given again is removed. So
that a signed webhook frontend does not stop signing unnoticed, changing
one without --secret-file is refused unless --no-secret says to remove its
secret (the node never shows a secret: give it again). An smpp frontend's
password is the one given now; without one it has none. The secret is
read from a file, never from the command line, which others on the host
may see in the process list.

  switchboard frontends set hook webhook https://gw.example.com/sms --secret-file /etc/switchboard/hook.secret`,
				flags: []cliFlag{
					{name: "secret-file", arg: "FILE", usage: "the frontend's secret, FILE's one line: a webhook's signing secret (16-256 printable characters) or an smpp frontend's password"},
					{name: "no-secret", boolean: true, usage: "change a signed webhook frontend without a secret: it stops signing"},
				},
				run: runFrontendsSet,
			},
			{
				name:     "frontends delete",
				summary:  "remove a frontend",
				synopsis: "NAME",
				about:    `Remove a frontend; refused while a route names it (DELETE /api/frontends/{name}). With --json nothing is printed.`,
				run:      runFrontendsDelete,
			},
		},
	},
	{
		name: "status",
		cmd: &cliCommand{
			name:    "status",
			summary: "counts by state and queue depths",
			about:   `Show the node's identity, message counts by state and queue depths (GET /api/status).`,
			run:     runStatus,
		},
	},
}

func cliStateNames(states []messages.State) string {
	names := make([]string, len(states))
	for i, s := range states {
		names[i] = string(s)
	}
	return strings.Join(names, ", ")
}

// cliNoArgs refuses positional arguments for a command that takes none.
func cliNoArgs(inv *cliInvocation) error {
	if len(inv.args) > 0 {
		return usageErrorf("unexpected argument %q: %s takes no arguments", inv.args[0], inv.cmd.name)
	}
	return nil
}

// cliMessageIDs checks the ids given to show and resubmit. An id that cannot
// be valid is a usage error rather than a request whose path would be
// misread by the node.
func cliMessageIDs(inv *cliInvocation) error {
	for _, id := range inv.args {
		if !messages.ValidID(id) {
			return usageErrorf("message id %q is not valid: 1-128 letters, digits, '.', '_', ':' or '-'", id)
		}
	}
	return nil
}

// cliMessageList is the document of GET /api/messages.
type cliMessageList struct {
	Messages   []messages.Message `json:"messages"`
	NextCursor string             `json:"next_cursor"`
}

// cliRawMessageList is the same document with the messages kept as received,
// to join the pages of --all --json without changing a byte of them.
type cliRawMessageList struct {
	Messages   []json.RawMessage `json:"messages"`
	NextCursor string            `json:"next_cursor"`
}

// cliMaxListLimit is the node's largest page (httpapi).
const cliMaxListLimit = 1000

func runMessagesList(inv *cliInvocation) error {
	if err := cliNoArgs(inv); err != nil {
		return err
	}
	q := url.Values{}
	var errs []error
	if inv.given("state") {
		s := messages.State(inv.value("state"))
		if !s.Valid() {
			errs = append(errs, fmt.Errorf("--state: invalid value %q: must be one of %s", s, cliStateNames(messages.AllStates)))
		}
		q.Set("state", string(s))
	}
	if inv.given("limit") {
		v := inv.value("limit")
		if n, err := strconv.Atoi(v); err != nil || n < 1 || n > cliMaxListLimit {
			errs = append(errs, fmt.Errorf("--limit: invalid value %q: must be an integer from 1 to %d", v, cliMaxListLimit))
		}
		q.Set("limit", v)
	}
	if inv.given("cursor") {
		if inv.value("cursor") == "" {
			errs = append(errs, errors.New("--cursor: must not be empty"))
		}
		q.Set("cursor", inv.value("cursor"))
	}
	for flag, param := range map[string]string{"to": "destination", "from": "source", "frontend": "frontend", "peer": "peer"} {
		if inv.given(flag) {
			if inv.value(flag) == "" {
				errs = append(errs, fmt.Errorf("--%s: must not be empty", flag))
			}
			q.Set(param, inv.value(flag))
		}
	}
	now := time.Now()
	window := map[string]time.Time{}
	for _, flag := range []string{"since", "until"} {
		if inv.given(flag) {
			t, err := cliTime(inv.value(flag), now)
			if err != nil {
				errs = append(errs, fmt.Errorf("--%s: invalid value %q: %v", flag, inv.value(flag), err))
			} else {
				window[flag] = t
			}
			q.Set(flag, t.Format(time.RFC3339Nano))
		}
	}
	// An empty window is a slip of the command line (durations are ago:
	// --since 48h --until 24h), which the node would refuse with exit 1.
	if since, ok := window["since"]; ok {
		if until, ok := window["until"]; ok && !since.Before(until) {
			errs = append(errs, fmt.Errorf("--since: %s is not before --until %s (a duration is that long ago: --since 48h --until 24h is the day before the last)",
				since.Format(time.RFC3339), until.Format(time.RFC3339)))
		}
	}
	all, err := inv.boolValue("all")
	if err != nil {
		errs = append(errs, err.(*usageError).err)
	}
	if len(errs) > 0 {
		return &usageError{errors.Join(errs...)}
	}

	if !all {
		var page cliMessageList
		data, err := inv.api.getJSON("/api/messages", q, &page)
		if err != nil {
			return err
		}
		if inv.json {
			writeAPIDoc(inv.stdout, data)
		} else {
			printMessageTable(inv, page.Messages)
		}
		if page.NextCursor != "" {
			fmt.Fprintf(inv.stderr, "switchboard: more messages: add --cursor %s (or use --all)\n", page.NextCursor)
		}
		return nil
	}

	if !inv.given("limit") {
		q.Set("limit", strconv.Itoa(cliMaxListLimit))
	}
	merged := cliRawMessageList{Messages: []json.RawMessage{}}
	var list []messages.Message
	seen := make(map[string]bool)
	for {
		var page cliMessageList
		data, err := inv.api.getJSON("/api/messages", q, &page)
		if err != nil {
			return err
		}
		var raw cliRawMessageList
		if err := json.Unmarshal(data, &raw); err != nil {
			return err
		}
		merged.Messages = append(merged.Messages, raw.Messages...)
		list = append(list, page.Messages...)
		if page.NextCursor == "" {
			break
		}
		if seen[page.NextCursor] {
			return fmt.Errorf("the node announced cursor %q twice: stopping", page.NextCursor)
		}
		seen[page.NextCursor] = true
		q.Set("cursor", page.NextCursor)
	}
	if inv.json {
		var buf bytes.Buffer
		if err := json.NewEncoder(&buf).Encode(merged); err != nil {
			return err
		}
		writeAPIDoc(inv.stdout, buf.Bytes())
		return nil
	}
	printMessageTable(inv, list)
	return nil
}

// cliTime reads a time flag: RFC 3339, or a duration that long before now.
func cliTime(v string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t.UTC(), nil
	}
	if d, err := time.ParseDuration(v); err == nil && d >= 0 {
		return now.Add(-d).UTC(), nil
	}
	return time.Time{}, errors.New("must be an RFC 3339 time (2026-05-01T12:00:00Z) or a duration ago (90m, 24h)")
}

func printMessageTable(inv *cliInvocation, list []messages.Message) {
	tw := newCLITable(inv.stdout)
	fmt.Fprintln(tw, "ID\tSTATE\tDESTINATION\tFRONTEND\tDEST_SMSC\tATTEMPTS\tUPDATED\tREASON")
	for _, m := range list {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n",
			tableCell(m.ID), tableCell(string(m.State)), tableCell(m.DestinationMSISDN), tableCell(m.Frontend),
			tableCell(m.DestSMSC), m.Attempts, tableTime(m.UpdatedAt), tableCell(m.Reason))
	}
	tw.Flush()
}

func runMessagesShow(inv *cliInvocation) error {
	if len(inv.args) == 0 {
		return usageErrorf("give the id of the message to show")
	}
	if err := cliMessageIDs(inv); err != nil {
		return err
	}
	shown := 0
	return cliEachID(inv, "shown", func(id string) error {
		var m messages.Message
		data, err := inv.api.getJSON("/api/messages/"+url.PathEscape(id), nil, &m)
		if err != nil {
			if len(inv.args) > 1 {
				err = fmt.Errorf("%s: %w", id, err)
			}
			return err
		}
		if inv.json {
			writeAPIDoc(inv.stdout, data)
			return nil
		}
		if shown > 0 {
			fmt.Fprintln(inv.stdout)
		}
		shown++
		printMessage(inv, m)
		return nil
	})
}

// cliEachID runs do for each id of the command line, all of them whatever
// fails. One id's error is the command's; with several, each failure is a
// line on stderr and the command's error names the ids that failed (done:
// what the others were) with the hints of their failures.
func cliEachID(inv *cliInvocation, done string, do func(id string) error) error {
	var failed, hints []string
	for _, id := range inv.args {
		err := do(id)
		if err == nil {
			continue
		}
		if len(inv.args) == 1 {
			return err
		}
		failed = append(failed, id)
		printErrorLines(inv.stderr, err)
		var h *hinted
		if errors.As(err, &h) && !slices.Contains(hints, h.hint) {
			hints = append(hints, h.hint)
		}
	}
	if len(failed) == 0 {
		return nil
	}
	lines := append([]string{fmt.Sprintf("%d of %d messages not %s: %s", len(failed), len(inv.args), done, strings.Join(failed, " "))}, hints...)
	return errors.New(strings.Join(lines, "\n"))
}

func printMessage(inv *cliInvocation, m messages.Message) {
	body := tableCell(m.Body)
	if m.DataCoding == messages.CodingBinary || m.Binary != nil {
		body = "binary (base64): " + base64.StdEncoding.EncodeToString(m.Binary)
	}
	fields := [][2]string{
		{"id", tableCell(m.ID)},
		{"state", tableCell(string(m.State))},
		{"source", tableCell(m.SourceMSISDN)},
		{"destination", tableCell(m.DestinationMSISDN)},
		{"body", body},
	}
	// The optional fields, each only when set.
	if m.DataCoding != "" {
		fields = append(fields, [2]string{"data_coding", tableCell(string(m.DataCoding))})
	}
	if m.MessageClass != nil {
		fields = append(fields, [2]string{"message_class", strconv.Itoa(*m.MessageClass)})
	}
	fields = append(fields, [][2]string{
		{"frontend", tableCell(m.Frontend)},
		{"source_smsc", tableCell(m.SourceSMSC)},
		{"dest_smsc", tableCell(m.DestSMSC)},
		{"attempts", strconv.Itoa(m.Attempts)},
		{"reason", tableCell(m.Reason)},
		{"created", tableTime(m.CreatedAt)},
		{"submitted", tableTime(m.SubmittedAt)},
		{"updated", tableTime(m.UpdatedAt)},
		{"queued", tableTimePtr(m.QueuedAt)},
	}...)
	for _, t := range []struct {
		name string
		at   *time.Time
	}{{"validity_until", m.ValidityUntil}, {"deliver_after", m.DeliverAfter}, {"next_attempt", m.NextAttemptAt}} {
		if t.at != nil {
			fields = append(fields, [2]string{t.name, tableTime(*t.at)})
		}
	}
	if m.TraceID != "" {
		fields = append(fields, [2]string{"trace_id", tableCell(m.TraceID)})
	}
	writeFields(inv.stdout, fields)
	fmt.Fprintln(inv.stdout, "\nHistory:")
	tw := newCLITable(inv.stdout)
	fmt.Fprintln(tw, "AT\tSTATE\tDETAIL")
	for _, h := range m.History {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", tableTime(h.At), tableCell(string(h.State)), tableCell(h.Detail))
	}
	tw.Flush()
}

func runMessagesResubmit(inv *cliInvocation) error {
	if inv.given("state") {
		s := messages.State(inv.value("state"))
		switch {
		case len(inv.args) > 0:
			return usageErrorf("--state: give message ids or --state, not both")
		case !s.Resubmittable():
			return usageErrorf("--state: invalid value %q: must be failed or forward_failed", s)
		}
		var reply messages.BulkReply
		data, err := inv.api.doJSON(http.MethodPost, "/api/messages/resubmit", nil,
			map[string]string{"state": string(s)}, &reply, 10*inv.api.timeout)
		if err != nil {
			return err
		}
		if inv.json {
			writeAPIDoc(inv.stdout, data)
			return nil
		}
		fmt.Fprintf(inv.stdout, "resubmitted %d %s message(s)", reply.Resubmitted, s)
		if reply.Skipped > 0 {
			fmt.Fprintf(inv.stdout, "; skipped %d that no route serves now", reply.Skipped)
		}
		fmt.Fprintln(inv.stdout)
		return nil
	}
	if len(inv.args) == 0 {
		return usageErrorf("give the ids of the messages to resubmit, or --state failed|forward_failed for all in that state")
	}
	if err := cliMessageIDs(inv); err != nil {
		return err
	}
	return cliEachID(inv, "resubmitted", func(id string) error {
		var m messages.Message
		data, err := inv.api.doJSON(http.MethodPost, "/api/messages/"+url.PathEscape(id)+"/resubmit", nil,
			nil, &m, inv.api.timeout)
		if err != nil {
			return fmt.Errorf("%s: %w", id, err)
		}
		if inv.json {
			writeAPIDoc(inv.stdout, data)
			return nil
		}
		fmt.Fprintf(inv.stdout, "resubmitted %s: now %s\n", tableCell(m.ID), tableCell(string(m.State)))
		return nil
	})
}

func runPeers(inv *cliInvocation) error {
	if err := cliNoArgs(inv); err != nil {
		return err
	}
	if !inv.json {
		// An empty list may mean federation is off: say so rather than
		// print a bare header.
		var peers []messages.PeerInfo
		if _, err := inv.api.getJSON("/api/peers", nil, &peers); err != nil {
			return err
		}
		if len(peers) == 0 {
			var st httpapi.Status
			if _, err := inv.api.getJSON("/api/status", nil, &st); err != nil {
				return err
			}
			if !st.Federation {
				fmt.Fprintf(inv.stdout, "federation is off on %s (it runs without --federation): it has no peers\n", tableCell(st.Node))
				return nil
			}
			fmt.Fprintf(inv.stdout, "%s federates but knows no peer yet (check its --peers or --dns-srv)\n", tableCell(st.Node))
			return nil
		}
	}
	return showList(inv, "/api/peers", "NODE\tSTATE\tFAILURES\tLAST_SUCCESS\tQUEUE\tFRONTENDS\tADDRESS\tLAST_ERROR",
		func(tw io.Writer, peers []messages.PeerInfo) {
			for _, p := range peers {
				fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%d\t%s\t%s\t%s\n",
					tableCell(p.Node), tableCell(string(p.State)), p.ConsecutiveFailures, tableTimePtr(p.LastSuccess),
					p.ForwardQueueDepth, tableCell(strings.Join(p.Frontends, ",")), tableCell(p.Address), tableCell(p.LastError))
			}
		})
}

func runRing(inv *cliInvocation) error {
	return showDoc(inv, "/api/ring/status", func(st messages.RingStatus) {
		writeFields(inv.stdout, [][2]string{
			{"instance", tableCell(st.InstanceID)},
			{"role", tableCell(st.Role)},
			{"master", tableCell(st.Master)},
			{"epoch", strconv.FormatUint(st.Epoch, 10)},
			{"coverage", fmt.Sprintf("%.1f%%", 100*st.Coverage)},
		})
		fmt.Fprintln(inv.stdout)
		tw := newCLITable(inv.stdout)
		fmt.Fprintln(tw, "MEMBER\tADDRESS\tZONE\tSERVICES\tRANGES\tSHARE\tSUBSCRIBED")
		for _, m := range st.Members {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%.1f%%\t%s\n", tableCell(m.InstanceID), tableCell(m.Address), tableCell(m.Zone),
				tableCell(strings.Join(m.Services, ",")), len(m.Ranges), 100*ring.Fraction(m.Ranges), subscribedCell(st, m.InstanceID))
		}
		tw.Flush()
	})
}

// subscribedCell is the SUBSCRIBED cell of member id in st: on a master,
// whether the member's subscription call is open now (yes or no); "-" for
// the master itself and on a slave, which does not know.
func subscribedCell(st messages.RingStatus, id string) string {
	switch {
	case st.Role != messages.RoleMaster || id == st.InstanceID:
		return "-"
	case slices.Contains(st.Subscribed, id):
		return "yes"
	default:
		return "no"
	}
}

// showList is a listing command: GET path into D, then the API's document
// with --json or a table with header and the rows row writes.
func showList[D any](inv *cliInvocation, path, header string, rows func(tw io.Writer, doc D)) error {
	return showDoc(inv, path, func(doc D) {
		tw := newCLITable(inv.stdout)
		fmt.Fprintln(tw, header)
		rows(tw, doc)
		tw.Flush()
	})
}

// showDoc is a command that shows one document and takes no arguments: GET
// path into D, then the API's document with --json, else what show prints.
func showDoc[D any](inv *cliInvocation, path string, show func(doc D)) error {
	if err := cliNoArgs(inv); err != nil {
		return err
	}
	var doc D
	data, err := inv.api.getJSON(path, nil, &doc)
	if err != nil {
		return err
	}
	if inv.json {
		writeAPIDoc(inv.stdout, data)
		return nil
	}
	show(doc)
	return nil
}

// writeFields prints name: value lines, the values aligned.
func writeFields(w io.Writer, fields [][2]string) {
	tw := newCLITable(w)
	for _, kv := range fields {
		fmt.Fprintf(tw, "%s:\t%s\n", kv[0], kv[1])
	}
	tw.Flush()
}

// cliRouteList is the document of GET /api/routes.
type cliRouteList struct {
	Routes []messages.Route `json:"routes"`
}

func runRoutesList(inv *cliInvocation) error {
	return showList(inv, "/api/routes", "PREFIX\tFRONTEND\tUPDATED", func(tw io.Writer, doc cliRouteList) {
		for _, r := range doc.Routes {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", tableCell(r.Prefix), tableCell(r.Frontend), tableTime(r.UpdatedAt))
		}
	})
}

// cliRoutePrefix checks a PREFIX argument.
func cliRoutePrefix(p string) error {
	if !messages.ValidPrefix(p) {
		return usageErrorf("prefix %q must be 1-20 digits", p)
	}
	return nil
}

func runRoutesSet(inv *cliInvocation) error {
	if len(inv.args) != 2 {
		return usageErrorf("routes set takes PREFIX FRONTEND, e.g. 'routes set 4478 smpp-uk' (got %d arguments)", len(inv.args))
	}
	prefix, frontend := inv.args[0], inv.args[1]
	if err := cliRoutePrefix(prefix); err != nil {
		return err
	}
	var r messages.Route
	data, err := inv.api.doJSON(http.MethodPut, "/api/routes/"+prefix, nil,
		map[string]string{"frontend": frontend}, &r, inv.api.timeout)
	if err != nil {
		return err
	}
	if inv.json {
		writeAPIDoc(inv.stdout, data)
		return nil
	}
	fmt.Fprintf(inv.stdout, "route %s -> %s\n", tableCell(r.Prefix), tableCell(r.Frontend))
	return nil
}

func runRoutesDelete(inv *cliInvocation) error {
	if len(inv.args) != 1 {
		return usageErrorf("routes delete takes one PREFIX (got %d arguments)", len(inv.args))
	}
	prefix := inv.args[0]
	if err := cliRoutePrefix(prefix); err != nil {
		return err
	}
	if _, err := inv.api.call(http.MethodDelete, "/api/routes/"+prefix, nil, nil, inv.api.timeout); err != nil {
		return err
	}
	if !inv.json {
		fmt.Fprintf(inv.stdout, "route %s deleted\n", prefix)
	}
	return nil
}

// cliFrontendList is the document of GET /api/frontends.
type cliFrontendList struct {
	Frontends []messages.Frontend `json:"frontends"`
}

func runFrontendsList(inv *cliInvocation) error {
	return showList(inv, "/api/frontends", "NAME\tMODE\tURL\tUPDATED", func(tw io.Writer, doc cliFrontendList) {
		for _, f := range doc.Frontends {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", tableCell(f.Name), tableCell(string(f.Mode)), tableCell(f.URL), tableTime(f.UpdatedAt))
		}
	})
}

// cliFrontendName checks a NAME argument (it becomes a path segment).
func cliFrontendName(name string) error {
	if !messages.ValidName(name) {
		return usageErrorf("frontend name %q is not valid: 1-63 letters, digits, '.', '_', '-'", name)
	}
	return nil
}

func runFrontendsSet(inv *cliInvocation) error {
	args := inv.args
	switch {
	case len(args) == 2 && args[1] == string(messages.ModePull):
	case len(args) == 3 && (args[1] == string(messages.ModeWebhook) || args[1] == string(messages.ModeSMPP)):
	default:
		return usageErrorf("frontends set takes NAME pull, NAME webhook URL or NAME smpp URL, e.g. 'frontends set hook webhook https://gw.example.com/sms'")
	}
	if err := cliFrontendName(args[0]); err != nil {
		return err
	}
	mode := messages.FrontendMode(args[1])
	noSecret, err := inv.boolValue("no-secret")
	if err != nil {
		return err
	}
	switch {
	case inv.given("secret-file") && noSecret:
		return usageErrorf("--secret-file and --no-secret: give one")
	case inv.given("secret-file") && mode == messages.ModePull:
		return usageErrorf("--secret-file: a pull frontend has no secret")
	case noSecret && mode != messages.ModeWebhook:
		return usageErrorf("--no-secret is for webhook frontends")
	}
	body := map[string]string{"mode": args[1]}
	if len(args) == 3 {
		body["url"] = args[2]
	}
	if inv.given("secret-file") {
		secret, err := cliSecretFile(inv.value("secret-file"))
		if err != nil {
			return err
		}
		body["secret"] = secret
	} else if mode == messages.ModeWebhook && !noSecret {
		if err := cliKeepsSecret(inv, args[0]); err != nil {
			return err
		}
	}
	var f messages.Frontend
	data, err := inv.api.doJSON(http.MethodPut, "/api/frontends/"+args[0], nil, body, &f, inv.api.timeout)
	if err != nil {
		return err
	}
	if inv.json {
		writeAPIDoc(inv.stdout, data)
		return nil
	}
	fmt.Fprintf(inv.stdout, "frontend %s: %s", tableCell(f.Name), tableCell(string(f.Mode)))
	if f.URL != "" {
		fmt.Fprintf(inv.stdout, " %s", tableCell(f.URL))
	}
	if f.Mode == messages.ModeWebhook && f.SecretSet {
		fmt.Fprint(inv.stdout, " (signed)")
	}
	fmt.Fprintln(inv.stdout)
	return nil
}

// cliSecretFile reads a frontend's secret from --secret-file: its one
// line, without the blanks around it.
func cliSecretFile(path string) (string, error) {
	data, err := os.ReadFile(path)
	var perr *os.PathError
	switch {
	case errors.As(err, &perr):
		return "", usageErrorf("--secret-file: cannot read %s: %v", path, perr.Err)
	case err != nil:
		return "", usageErrorf("--secret-file: %v", err)
	}
	secret := strings.TrimSpace(string(data))
	switch {
	case secret == "":
		return "", usageErrorf("--secret-file: %s is empty", path)
	case strings.ContainsAny(secret, "\r\n"):
		return "", usageErrorf("--secret-file: %s must hold one line", path)
	}
	return secret, nil
}

// cliKeepsSecret refuses to change the webhook frontend name without a
// secret while it has one: the PUT is the whole frontend, so it would
// stop signing, and nothing would say so.
func cliKeepsSecret(inv *cliInvocation, name string) error {
	const wayOut = "give its secret again (the node never shows it) with --secret-file FILE, or --no-secret to remove it"
	var doc cliFrontendList
	if _, err := inv.api.getJSON("/api/frontends", nil, &doc); err != nil {
		return fmt.Errorf("cannot tell whether frontend %s is signed (a change without a secret would remove its secret): %v\n%s", name, err, wayOut)
	}
	for _, f := range doc.Frontends {
		if f.Name == name && f.Mode == messages.ModeWebhook && f.SecretSet {
			return fmt.Errorf("frontend %s is a signed webhook: a change without a secret would remove its secret and stop the signing\n%s", name, wayOut)
		}
	}
	return nil
}

func runFrontendsDelete(inv *cliInvocation) error {
	if len(inv.args) != 1 {
		return usageErrorf("frontends delete takes one NAME (got %d arguments)", len(inv.args))
	}
	if err := cliFrontendName(inv.args[0]); err != nil {
		return err
	}
	if _, err := inv.api.call(http.MethodDelete, "/api/frontends/"+inv.args[0], nil, nil, inv.api.timeout); err != nil {
		return err
	}
	if !inv.json {
		fmt.Fprintf(inv.stdout, "frontend %s deleted\n", inv.args[0])
	}
	return nil
}

func runStatus(inv *cliInvocation) error {
	return showDoc(inv, "/api/status", func(st httpapi.Status) {
		fes := make([]string, len(st.Frontends))
		for i, f := range st.Frontends {
			fes[i] = f.Name + " (" + string(f.Mode) + ")"
		}
		writeFields(inv.stdout, [][2]string{
			{"node", tableCell(st.Node)},
			{"instance", tableCell(st.InstanceID)},
			{"version", tableCell(st.Version)},
			{"store", tableCell(st.Store)},
			{"forward queue depth", strconv.FormatInt(st.ForwardQueueDepth, 10)},
			{"outbox depth", strconv.FormatInt(st.OutboxDepth, 10)},
			{"dlq depth", strconv.FormatInt(st.DLQDepth, 10)},
			{"outbox oldest", tableTimePtr(st.OutboxOldest)},
			{"peers", cliPeerSummary(st.Peers)},
			{"frontends", tableCell(strings.Join(fes, ", "))},
		})

		// The contract's states in their order, then any others the node
		// reports (a newer node), sorted.
		fmt.Fprintln(inv.stdout)
		tw := newCLITable(inv.stdout)
		fmt.Fprintln(tw, "STATE\tCOUNT")
		for _, s := range messages.AllStates {
			fmt.Fprintf(tw, "%s\t%d\n", s, st.Counts[string(s)])
		}
		var extra []string
		for s := range st.Counts {
			if !messages.State(s).Valid() {
				extra = append(extra, s)
			}
		}
		slices.Sort(extra)
		for _, s := range extra {
			fmt.Fprintf(tw, "%s\t%d\n", tableCell(s), st.Counts[s])
		}
		tw.Flush()
	})
}

// cliPeerSummary is "3 (healthy 2, unhealthy 1)".
func cliPeerSummary(peers []messages.PeerInfo) string {
	if len(peers) == 0 {
		return "0"
	}
	n := make(map[messages.PeerState]int)
	for _, p := range peers {
		n[p.State]++
	}
	var parts []string
	for _, s := range messages.AllPeerStates {
		if n[s] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", s, n[s]))
			delete(n, s)
		}
	}
	var other []string
	for s := range n {
		other = append(other, fmt.Sprintf("%s %d", tableCell(string(s)), n[s]))
	}
	slices.Sort(other)
	return fmt.Sprintf("%d (%s)", len(peers), strings.Join(append(parts, other...), ", "))
}
