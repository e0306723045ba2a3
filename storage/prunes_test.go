package storage

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/pruneadvisor/pruneadvisor/advisor"
)

// SavePrunes' multi-row statements: a record given twice in one call is stored
// once, a recall id given twice with two stubs is a conflict that stores nothing, a
// rewrite saved again changes nothing, and a rewrite of more rows than one
// statement holds (maxInsertParams: 888 outputs rows, 1,000 stubs rows, 2,666 blobs
// rows per statement) is stored whole.
func TestSavePrunesBatches(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		ctx := t.Context()
		db := openDB(t, dsn)
		version := func(session string) int64 {
			t.Helper()
			v, err := db.SessionVersion(ctx, session)
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
		tables := func() [3]int { return [3]int{count(t, db, "blobs"), count(t, db, "outputs"), count(t, db, "stubs")} }

		p := prune("s1", "k1", "one", "[pruned k1]")
		if err := db.SavePrunes(ctx, []advisor.Prune{p, p}); err != nil {
			t.Fatalf("SavePrunes of one prune twice = %v, want nil", err)
		}
		if got, v := tables(), version("s1"); got != [3]int{1, 1, 1} || v != 1 {
			t.Errorf("after one prune given twice: blobs, outputs, stubs = %v, version %d; want [1 1 1], 1", got, v)
		}

		other := prune("s1", "k2", "two", "[pruned k2]")
		twice := other
		twice.Stub.Stub = "[pruned k2, other words]"
		err := db.SavePrunes(ctx, []advisor.Prune{other, twice})
		if !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), `output "k2" of session "s1" already has another stub (first writer wins): "[pruned k2]"`) {
			t.Errorf("SavePrunes of two stubs for one output = %v, want ErrConflict naming the first", err)
		}
		if got, v := tables(), version("s1"); got != [3]int{1, 1, 1} || v != 1 {
			t.Errorf("after the refused call: blobs, outputs, stubs = %v, version %d; want [1 1 1], 1", got, v)
		}

		// A rewrite half stored already (k1) and half new (k3): only k3 counts.
		if err := db.SavePrunes(ctx, []advisor.Prune{p, prune("s1", "k3", "three", "[pruned k3]")}); err != nil {
			t.Fatal(err)
		}
		if got, v := tables(), version("s1"); got != [3]int{2, 2, 2} || v != 2 {
			t.Errorf("after a half-new rewrite: blobs, outputs, stubs = %v, version %d; want [2 2 2], 2", got, v)
		}

		const n = 2_700
		big := make([]advisor.Prune, n)
		for i := range big {
			key := fmt.Sprintf("call_%05d", i)
			big[i] = prune("s2", key, "text of "+key, "[pruned "+key+"]")
		}
		if err := db.SavePrunes(ctx, big); err != nil {
			t.Fatalf("SavePrunes of %d prunes = %v", n, err)
		}
		if got, v := tables(), version("s2"); got != [3]int{2 + n, 2 + n, 2 + n} || v != n {
			t.Errorf("after %d prunes: blobs, outputs, stubs = %v, version %d; want %d of each, version %d", n, got, v, 2+n, n)
		}
		if err := db.SavePrunes(ctx, big); err != nil {
			t.Fatalf("SavePrunes of the same %d prunes again = %v, want nil", n, err)
		}
		if v := version("s2"); v != n {
			t.Errorf("version after saving the same rewrite again = %d, want %d", v, n)
		}
		o, err := db.Original(ctx, big[n-1].Original.RecallID)
		if err != nil || o.Text != big[n-1].Original.Text {
			t.Errorf("Original of the last prune = %q, %v; want %q", o.Text, err, big[n-1].Original.Text)
		}
		stubs, err := db.SessionStubs(ctx, "s2")
		if err != nil || len(stubs) != n || stubs["call_01999"].Stub != "[pruned call_01999]" {
			t.Errorf("SessionStubs = %d stubs (call_01999: %q), %v; want %d", len(stubs), stubs["call_01999"].Stub, err, n)
		}
	})
}
