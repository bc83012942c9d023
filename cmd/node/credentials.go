package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/switchboard-dev/switchboard/atomicfile"
	"github.com/switchboard-dev/switchboard/httpapi/auth"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
	"github.com/switchboard-dev/switchboard/persistence/postgres"
)

// credentialsCommand is `switchboard credentials add|list|revoke`: it edits
// the credentials of whichever source the node uses, the --credentials
// file (the node re-reads it within a second) or the store of a node on
// Postgres (every instance reads it within a second). It works with the
// node running or not, so the first admin credential can be made before
// anyone can call the API.
func credentialsCommand(args []string, stdout, stderr io.Writer, env lookupEnv) int {
	if len(args) == 0 {
		// A usage error, as 'switchboard' and 'switchboard certs' alone:
		// the usage goes to stderr, not into the output a script reads.
		printCredentialsUsage(stderr)
		return 2
	}
	if args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		printCredentialsUsage(stdout)
		return 0
	}
	verb, rest := args[0], args[1:]
	switch verb {
	case "add", "list", "revoke":
	default:
		fmt.Fprintf(stderr, "switchboard: unknown credentials command %q (add, list or revoke; see 'switchboard credentials -h')\n", verb)
		return 2
	}
	fs := flag.NewFlagSet("switchboard credentials "+verb, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	file, _ := env(envName("credentials"))
	pg, _ := env(envName("postgres"))
	fs.StringVar(&file, "credentials", file, "")
	fs.StringVar(&pg, "postgres", pg, "")
	role := fs.String("role", "", "")
	rate := fs.String("submit-rate", "", "")
	tokenFile := fs.String("token-file", "", "")
	asJSON := fs.Bool("json", false, "")
	smpp := fs.Bool("smpp", false, "")
	var fes listFlag
	fs.Var(&fes, "frontend", "")
	twice := onceEach(fs, "frontend")
	// Flags may follow the name: parse, take a positional, parse again.
	var pos []string
	for rest := rest; ; {
		if err := fs.Parse(rest); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				printCredentialsUsage(stdout)
				return 0
			}
			fmt.Fprintf(stderr, "switchboard: %s (see 'switchboard credentials -h')\n", flagSyntaxError(err))
			return 2
		}
		if fs.NArg() == 0 {
			break
		}
		pos, rest = append(pos, fs.Arg(0)), fs.Args()[1:]
	}
	var errs []error
	if err := twice(); err != nil {
		errs = append(errs, err)
	}
	switch {
	case file != "" && strings.TrimSpace(pg) != "":
		errs = append(errs, errors.New("--credentials: give the node's credentials file or its --postgres DSN, not both"))
	case file == "" && strings.TrimSpace(pg) == "":
		errs = append(errs, errors.New("--credentials: required (the node's credentials file), or --postgres DSN for a node on Postgres"))
	}
	var c messages.Credential
	switch verb {
	case "add":
		if len(pos) != 1 {
			errs = append(errs, errors.New("add takes one NAME: switchboard credentials add NAME --role ROLE"))
		} else {
			c.Name = pos[0]
		}
		c.Role, c.Frontends, c.SMPP = messages.Role(*role), fes, *smpp
		if *smpp && *role == "" {
			c.Role = messages.RoleClient // an SMPP account submits
		}
		// The role is the flag's: say so, rather than the credential's
		// field, and leave it to the flag's line alone.
		switch roles := "one of admin, operator, client, frontend"; {
		case c.Role == "":
			errs = append(errs, fmt.Errorf("--role: required: %s (or --smpp)", roles))
		case !c.Role.Valid():
			errs = append(errs, fmt.Errorf("--role: invalid value %q: want %s", *role, roles))
		}
		if *rate != "" {
			r, err := strconv.ParseFloat(*rate, 64)
			if err != nil {
				errs = append(errs, fmt.Errorf("--submit-rate: invalid value %q: must be a number of messages a second", *rate))
			}
			c.SubmitRate = r
		}
	case "revoke":
		if len(pos) != 1 {
			errs = append(errs, errors.New("revoke takes one NAME: switchboard credentials revoke NAME"))
		} else {
			c.Name = pos[0]
		}
	case "list":
		if len(pos) > 0 {
			errs = append(errs, fmt.Errorf("unexpected argument %q: list takes only flags", pos[0]))
		}
	}
	if verb != "add" && (*role != "" || *rate != "" || len(fes) > 0 || *tokenFile != "" || *smpp) {
		errs = append(errs, errors.New("--role, --frontend, --submit-rate, --smpp and --token-file are for add"))
	}
	var token string
	if verb == "add" {
		token, c.TokenHash = auth.NewToken()
		if c.SMPP {
			token, c.TokenHash = auth.NewSMPPPassword()
		}
		c.CreatedAt = time.Now().UTC().Truncate(time.Second)
		if !c.Role.Valid() {
			// Checked above; the credential's other problems with a
			// role that would pass (none are about the role alone).
			c.Role = messages.RoleClient
			if len(c.Frontends) > 0 {
				c.Role = messages.RoleFrontend
			}
		}
		if err := c.Validate(); err != nil {
			errs = append(errs, credentialFlagErrors(c.Name, err)...)
		}
		if *tokenFile != "" {
			if err := checkTokenFile(*tokenFile); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if len(errs) > 0 {
		printErrorLines(stderr, errors.Join(errs...))
		return 2
	}

	src, err := openCredentialSource(file, pg, verb == "add")
	if err != nil {
		printErrorLines(stderr, err)
		return failureCode(err)
	}
	defer src.close()
	switch verb {
	case "list":
		err = listCredentials(src, stdout, stderr, *asJSON)
	case "add":
		var created bool
		if created, err = src.add(c); err == nil {
			if created {
				// On stderr: stdout is the token's (or the JSON document's).
				fmt.Fprintf(stderr, "switchboard: created the credentials file %s (it did not exist): give it to the node as --credentials %s\n", file, file)
			}
			err = showToken(c, token, *tokenFile, stdout, *asJSON)
		}
	case "revoke":
		if err = src.revoke(c.Name); err == nil {
			fmt.Fprintf(stdout, "revoked %s: its token no longer opens anything (the node sees it within a second)\n", c.Name)
		}
	}
	if err != nil {
		printErrorLines(stderr, err)
		return 1
	}
	return 0
}

// credentialFlags are the flags of add that set a credential's fields, by
// the fields' names in messages.Credential.Validate's problems.
var credentialFlags = map[string]string{"name": "NAME", "frontends": "--frontend", "submit_rate": "--submit-rate", "smpp": "--smpp"}

// credentialFlagErrors is err of c.Validate, one line a problem, each
// named by the flag (or argument) that set the field rather than by the
// field ("frontends: a frontend credential must be bound to at least one
// frontend" -> "--frontend: ..."): the operator typed flags.
func credentialFlagErrors(name string, err error) []error {
	msg, ok := strings.CutPrefix(err.Error(), fmt.Sprintf("credential %q: ", name))
	if !ok {
		return []error{err}
	}
	var errs []error
	for _, p := range strings.Split(msg, "; ") {
		if field, rest, ok := strings.Cut(p, ": "); ok && credentialFlags[field] != "" {
			p = credentialFlags[field] + ": " + rest
		}
		errs = append(errs, errors.New(p))
	}
	return errs
}

// listFlag collects a repeatable flag, each value possibly a comma list.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error {
	*l = append(*l, splitList(v)...)
	return nil
}

// showToken gives the new token to the operator, once: on stdout, or in a
// file of its own (mode 0600) with --token-file, so that it never shows
// on a terminal or in a shell's scroll-back. The file is replaced whole
// (atomicfile): a file already there keeps neither its mode (a loose one
// would show the token to others) nor, if it is a symbolic link, its
// target. Stdout that cannot take the token (a full disk under
// '> FILE') is an error that says the credential was added all the same:
// its token is lost, and only a revoke undoes it.
func showToken(c messages.Credential, token, tokenFile string, stdout io.Writer, asJSON bool) error {
	if tokenFile != "" {
		if err := atomicfile.Write(tokenFile, []byte(token+"\n"), 0o600); err != nil {
			return fmt.Errorf("--token-file: %w (the credential %s was added: revoke it, or add another)", err, c.Name)
		}
		token = ""
	}
	var out bytes.Buffer
	if asJSON {
		doc := map[string]any{"name": c.Name, "role": c.Role, "frontends": c.Frontends, "created_at": c.CreatedAt}
		if c.SMPP {
			doc["smpp"] = true
		}
		if token != "" {
			doc["token"] = token
		} else {
			doc["token_file"] = tokenFile
		}
		if err := json.NewEncoder(&out).Encode(doc); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(&out, "added %s (role %s)\n", c.Name, c.Role)
		switch {
		case c.SMPP && token != "":
			fmt.Fprintf(&out, "SMPP account: system_id %s, password: %s\nThis is the only time the password is shown: only its hash is kept.\n", c.Name, token)
		case token != "":
			fmt.Fprintf(&out, "token: %s\nThis is the only time the token is shown: only its hash is kept.\n", token)
		default:
			fmt.Fprintf(&out, "token written to %s (only its hash is kept)\n", tokenFile)
		}
	}
	if _, err := stdout.Write(out.Bytes()); err != nil {
		if token != "" {
			return fmt.Errorf("the token could not be written to stdout: %w (the credential %s was added and its token is lost: revoke it, or add another)", err, c.Name)
		}
		return fmt.Errorf("stdout: %w (the credential %s was added, its token written to %s)", err, c.Name, tokenFile)
	}
	return nil
}

// checkTokenFile refuses, before the credential is added, a --token-file
// that cannot hold the token as a file of its own: a path in a directory
// that does not exist (the credential was added, then its token lost), or
// one where something else than a regular file is, or a symbolic link to
// something else. showToken replaces the path whole, so --token-file
// /dev/stdout or /dev/null, run as root, replaced the device's link or
// node with a regular file holding the token, for every program of the
// host. A symbolic link to a regular file, or to nothing, is replaced as
// docs/cli.md says, not followed.
func checkTokenFile(path string) error {
	if dir := filepath.Dir(path); !isDir(dir) {
		return fmt.Errorf("--token-file: %s: the directory %s does not exist", path, dir)
	}
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("--token-file: %w", err)
	case fi.Mode()&os.ModeSymlink != 0:
		target, err := os.Stat(path)
		if err != nil || target.Mode().IsRegular() {
			return nil
		}
		fi = target
	case fi.Mode().IsRegular():
		return nil
	}
	return fmt.Errorf("--token-file: %s is %s: the token is written to a file of its own, which replaces what is at the path (leave --token-file out to have the token printed)", path, fileKind(fi.Mode()))
}

func isDir(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.IsDir()
}

// fileKind names what a path that is not a regular file is.
func fileKind(m os.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&os.ModeDevice != 0:
		return "a device"
	case m&os.ModeNamedPipe != 0:
		return "a named pipe"
	case m&os.ModeSocket != 0:
		return "a socket"
	}
	return "not a file (" + m.Type().String() + ")"
}

// listCredentials prints the credentials of src. A row of a database that
// is not a valid credential (written by hand, or by another program) is
// listed too, but the node leaves it out: each such row is named on stderr
// with why (and "invalid" in --json), so that its name in the list is not
// taken for a credential in force, and its values are quoted as any cell
// from elsewhere is.
func listCredentials(src credentialSource, stdout, stderr io.Writer, asJSON bool) error {
	cs, err := src.list()
	if err != nil {
		return err
	}
	invalid := make([]string, len(cs))
	for i, c := range cs {
		if err := c.Validate(); err != nil {
			invalid[i] = err.Error()
			fmt.Fprintf(stderr, "switchboard: %s: the node ignores it (a row written by something else than this command or a node)\n", tableCell(invalid[i]))
		}
	}
	if asJSON {
		type shown struct {
			Name       string        `json:"name"`
			Role       messages.Role `json:"role"`
			Frontends  []string      `json:"frontends,omitempty"`
			SubmitRate float64       `json:"submit_rate,omitempty"`
			SMPP       bool          `json:"smpp,omitempty"`
			CreatedAt  time.Time     `json:"created_at"`
			Invalid    string        `json:"invalid,omitempty"`
		}
		out := make([]shown, len(cs))
		for i, c := range cs {
			out[i] = shown{c.Name, c.Role, c.Frontends, c.SubmitRate, c.SMPP, c.CreatedAt, invalid[i]}
		}
		return json.NewEncoder(stdout).Encode(map[string]any{"credentials": out})
	}
	tw := newCLITable(stdout)
	fmt.Fprintln(tw, "NAME\tROLE\tFRONTENDS\tSUBMIT RATE\tCREATED (UTC)")
	for i, c := range cs {
		r := "-"
		if c.SubmitRate > 0 {
			r = strconv.FormatFloat(c.SubmitRate, 'g', -1, 64) + "/s"
		}
		role := tableCell(string(c.Role))
		if c.SMPP {
			role += " (smpp)"
		}
		if invalid[i] != "" {
			role += " (invalid: ignored)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", tableCell(c.Name), role, tableCell(strings.Join(c.Frontends, ",")), r, tableTime(c.CreatedAt))
	}
	return tw.Flush()
}

// credentialSource is where a node keeps its credentials.
type credentialSource interface {
	list() ([]messages.Credential, error)
	// add adds c, and says whether it made the place (a new file).
	add(c messages.Credential) (created bool, err error)
	revoke(name string) error
	close()
}

// openCredentialSource opens the file, or the database without migrating
// it: the command must not change the schema under nodes that run an
// older version. Only a database with no schema at all is given one, by
// add (bootstrap: the first credential made before the first node starts,
// so that it never starts open).
func openCredentialSource(file, dsn string, bootstrap bool) (credentialSource, error) {
	if file != "" {
		return credentialsFile{path: file}, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg := postgres.DefaultConfig()
	cfg.DSN, cfg.MaxConns, cfg.NoMigrate = dsn, 2, true
	s, err := postgres.Open(ctx, cfg)
	if errors.Is(err, postgres.ErrNoSchema) && bootstrap {
		cfg.NoMigrate = false
		s, err = postgres.Open(ctx, cfg)
	}
	if err != nil {
		return nil, fmt.Errorf("--postgres: %w", err)
	}
	return credentialStore{s}, nil
}

// credentialsFile edits the --credentials file: under a lock (two edits
// at once must not lose one), written whole to a temporary file, synced
// and renamed over the old one, so that the node never reads half a file.
type credentialsFile struct{ path string }

func (f credentialsFile) close() {}

func (f credentialsFile) list() ([]messages.Credential, error) {
	if err := f.mustExist(); err != nil {
		return nil, err
	}
	file, err := f.read()
	return file.Credentials, err
}

// mustExist fails when the file is not there: a list or revoke of a
// mistyped path must not pass for an empty file.
func (f credentialsFile) mustExist() error {
	_, err := os.Stat(f.path)
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("--credentials: %s does not exist (check the path; 'switchboard credentials add' makes it)", f.path)
	}
	return err
}

// read parses the file; a file that does not exist yet is empty.
func (f credentialsFile) read() (auth.File, error) {
	data, err := os.ReadFile(f.path)
	if errors.Is(err, os.ErrNotExist) {
		return auth.File{}, nil
	}
	if err != nil {
		return auth.File{}, err
	}
	file, err := auth.ParseFile(data)
	if err != nil {
		return auth.File{}, fmt.Errorf("%s: %w (fix it by hand; nothing was changed)", f.path, err)
	}
	return file, nil
}

func (f credentialsFile) add(c messages.Credential) (created bool, err error) {
	_, statErr := os.Stat(f.path)
	created = errors.Is(statErr, os.ErrNotExist)
	if dir := filepath.Dir(f.path); created && !isDir(dir) {
		// Named as the flag's, rather than the lock file's open error.
		return false, fmt.Errorf("--credentials: %s: the directory %s does not exist (check the path, or make the directory)", f.path, dir)
	}
	err = f.edit(func(file *auth.File) error {
		for _, old := range file.Credentials {
			if old.Name == c.Name {
				return fmt.Errorf("credential %q exists already: revoke it first, or choose another name", c.Name)
			}
		}
		file.Credentials = append(file.Credentials, c)
		return nil
	})
	return created && err == nil, err
}

func (f credentialsFile) revoke(name string) error {
	if err := f.mustExist(); err != nil {
		return err
	}
	return f.edit(func(file *auth.File) error {
		i := slices.IndexFunc(file.Credentials, func(c messages.Credential) bool { return c.Name == name })
		if i < 0 {
			return fmt.Errorf("no credential %q in %s", name, f.path)
		}
		file.Credentials = slices.Delete(file.Credentials, i, i+1)
		return nil
	})
}

func (f credentialsFile) edit(change func(*auth.File) error) error {
	// The lock file holds nothing: whoever may edit the credentials takes
	// it, read-only, whoever made it (root's, mode 0600 and opened for
	// writing, it kept the credentials' own owner out after root's edit).
	lock, err := os.OpenFile(f.path+".lock", os.O_CREATE|os.O_RDONLY, 0o644)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := lockFile(lock); err != nil {
		return fmt.Errorf("lock %s: %w", lock.Name(), err)
	}
	file, err := f.read()
	if err != nil {
		return err
	}
	if err := change(&file); err != nil {
		return err
	}
	if _, err := auth.ParseFile(file.Format()); err != nil {
		return err // a change the node would refuse is not written
	}
	tmp, err := os.CreateTemp(filepath.Dir(f.path), filepath.Base(f.path)+".tmp*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // gone after the rename: a no-op then
	if _, err := tmp.Write(file.Format()); err != nil {
		tmp.Close()
		return err
	}
	if err := f.keepOwnership(tmp); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), f.path)
}

// newCredentialsMode is the mode of a credentials file the command makes:
// its owner writes it, and the node, when it runs as another user, reads
// it through the file's group, the directory's (the systemd layout's
// /etc/switchboard is root's, group switchboard). The file holds hashes,
// never a token.
const newCredentialsMode = 0o640

// keepOwnership gives tmp, the file about to replace f's, the owner, group
// and mode of the file it replaces, so that a node running as another user
// still reads it (a new file of the user running the command, say root's,
// mode 0600, would leave such a node with the credentials it last read: a
// revoked token would keep working). A file made anew is mode
// newCredentialsMode, with the group of its directory when the user may
// give it that group. A rewrite that cannot keep the old owner and group
// is not made.
func (f credentialsFile) keepOwnership(tmp *os.File) error {
	old, err := os.Stat(f.path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		if dir, err := os.Stat(filepath.Dir(f.path)); err == nil {
			if _, gid, ok := fileOwner(dir); ok {
				// Only root and a member of the group may: otherwise the
				// file keeps the user's own group, as any new file does.
				_ = tmp.Chown(-1, gid)
			}
		}
		return tmp.Chmod(newCredentialsMode)
	case err != nil:
		return err
	}
	uid, gid, ok := fileOwner(old)
	if ok {
		if fi, err := tmp.Stat(); err == nil {
			if u, g, _ := fileOwner(fi); u == uid && g == gid {
				ok = false // already theirs: no chown (which some file systems refuse)
			}
		}
	}
	if ok {
		if err := tmp.Chown(uid, gid); err != nil {
			return fmt.Errorf("%s: the rewritten file cannot keep the owner (uid %d) and group (gid %d) of the file it replaces, which the node may need to read it: %w; nothing was changed (run the command as root or as the file's owner)", f.path, uid, gid, err)
		}
	}
	return tmp.Chmod(old.Mode().Perm())
}

// credentialStore edits the credentials of a node on Postgres; each change
// is recorded in the audit trail in the same transaction.
type credentialStore struct{ s *postgres.Store }

func (c credentialStore) close() { c.s.Close() }

func (c credentialStore) list() ([]messages.Credential, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return c.s.Credentials(ctx)
}

func (c credentialStore) add(cr messages.Credential) (bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := c.s.AddCredential(ctx, cr, cliAudit(messages.AuditCredentialAdd, cr.Name, "role "+string(cr.Role)))
	if errors.Is(err, persistence.ErrExists) {
		return false, fmt.Errorf("credential %q exists already: revoke it first, or choose another name", cr.Name)
	}
	return false, err
}

func (c credentialStore) revoke(name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The record names the role revoked, as an add's names the role added.
	creds, err := c.s.Credentials(ctx)
	if err != nil {
		return err
	}
	detail := ""
	if i := slices.IndexFunc(creds, func(cr messages.Credential) bool { return cr.Name == name }); i >= 0 {
		detail = "role " + string(creds[i].Role)
	}
	err = c.s.RevokeCredential(ctx, name, cliAudit(messages.AuditCredentialRevoke, name, detail))
	switch {
	case errors.Is(err, persistence.ErrNotFound):
		return fmt.Errorf("no credential %q in the store", name)
	case errors.Is(err, persistence.ErrLastCredential):
		return fmt.Errorf("%q is the store's last credential a node can use: without it, a node without --api-token answers anyone (or, with only invalid ones left, no one); add another first", name)
	}
	return err
}

// cliAudit is the audit entry of a change this command makes: who is the
// user running it, on which host.
func cliAudit(action, target, detail string) messages.AuditEntry {
	who := "unknown"
	if u, err := user.Current(); err == nil {
		who = u.Username
	}
	host, _ := os.Hostname()
	return messages.AuditEntry{At: time.Now(), Actor: "cli:" + who + "@" + host, Remote: host + " (switchboard credentials)",
		Action: action, Target: target, Detail: detail}
}

func printCredentialsUsage(w io.Writer) {
	fmt.Fprint(w, `Usage: switchboard credentials add NAME --role ROLE [--frontend F]... [--submit-rate N] [--smpp] [--token-file FILE]
       switchboard credentials list [--json]
       switchboard credentials revoke NAME

Edits the credentials of a node, in whichever place it keeps them: its
--credentials file, or the database of a node on --postgres. The node sees
a change within a second (and at once on SIGHUP). It works whether the node
runs or not.

Roles: admin (everything), operator (reads everything, resubmits), client
(submits, reads the messages it submitted), frontend (polls, acks and
registers the frontends given with --frontend).

add makes a random token and keeps only its SHA-256: the token is printed
once (or written to --token-file, mode 0600) and cannot be shown again.
Changes to the database are recorded in its audit trail; the node records
the changes it reads from a file.

Flags:
  --credentials FILE   the node's credentials file [SWITCHBOARD_CREDENTIALS]
  --postgres DSN       the database of a node on Postgres [SWITCHBOARD_POSTGRES]
  --role ROLE          add: admin, operator, client or frontend
  --frontend NAME      add: a frontend a frontend credential is bound to (repeatable, or a comma list)
  --submit-rate N      add: a client credential's submits per second (429 beyond it; default no bound)
  --smpp               add: an SMPP account (a client credential): NAME is the ESME's
                       system_id (at most 15 characters), the token an 8-character
                       password its binds give; the HTTP API never takes it
  --token-file FILE    add: write the token to FILE instead of printing it
  --json               add, list: print JSON
`)
}
