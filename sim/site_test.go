package sim

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/switchboard-dev/switchboard/persistence"
	"github.com/switchboard-dev/switchboard/persistence/sqlite"
)

// openTestStore opens an SQLite store in a test directory, as the sim
// opens a node's.
func openTestStore(t *testing.T) persistence.Store {
	t.Helper()
	sc := sqlite.DefaultConfig()
	sc.Path = filepath.Join(t.TempDir(), "switchboard.db")
	st, err := sqlite.Open(context.Background(), sc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// uncheckedCalls are the methods of persistence.Store a view answers
// without a look at its incarnation or its node's faults: Kind names the
// implementation, Close does nothing (the sim closes the store).
var uncheckedCalls = map[string]bool{"Kind": true, "Close": true}

// callEvery calls every method of persistence.Store on s but
// uncheckedCalls, with zero arguments (a background context), and
// returns each one's error (a panic is an error too).
func callEvery(t *testing.T, s persistence.Store) map[string]error {
	t.Helper()
	it := reflect.TypeFor[persistence.Store]()
	v := reflect.ValueOf(s)
	out := map[string]error{}
	for i := range it.NumMethod() {
		m := it.Method(i)
		if uncheckedCalls[m.Name] {
			continue
		}
		args := make([]reflect.Value, m.Type.NumIn())
		for k := range args {
			in := m.Type.In(k)
			if in == reflect.TypeFor[context.Context]() {
				args[k] = reflect.ValueOf(context.Background())
			} else {
				args[k] = reflect.Zero(in)
			}
		}
		out[m.Name] = func() (err error) {
			defer func() {
				if p := recover(); p != nil {
					err = fmt.Errorf("panic: %v", p)
				}
			}()
			res := v.MethodByName(m.Name).Call(args)
			err, _ = res[len(res)-1].Interface().(error)
			return err
		}()
	}
	return out
}

// not lists the calls whose error is not target, with their errors.
func not(errs map[string]error, target error, skip map[string]bool) []string {
	var out []string
	for name, err := range errs {
		if !skip[name] && !errors.Is(err, target) {
			line := fmt.Sprint(err)
			line, _, _ = strings.Cut(line, "\n")
			out = append(out, fmt.Sprintf("%s (%s)", name, line))
		}
	}
	sort.Strings(out)
	return out
}

// TestCrashedViewRefusesEveryCall: a crashed incarnation's view refuses
// every call of persistence.Store (a killed process writes, and reads,
// nothing more), whichever method, the ones the view logs for the claim
// check or not.
func TestCrashedViewRefusesEveryCall(t *testing.T) {
	v := &storeView{Store: &faultStore{Store: openTestStore(t)}, log: newClaimLog()}
	v.kill()
	if through := not(callEvery(t, v), persistence.ErrClosed, nil); len(through) > 0 {
		t.Errorf("after kill() these calls reached the store:\n  %s", strings.Join(through, "\n  "))
	}
}
