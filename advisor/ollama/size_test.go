package ollama_test

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/advisor/lexical"
	"github.com/pruneadvisor/pruneadvisor/advisor/ollama"
	"github.com/pruneadvisor/pruneadvisor/internal/testkit"
	"github.com/pruneadvisor/pruneadvisor/replay"
)

// TestSizerEstimate compares the per-card scorer tokens Replay records
// with the exact count of the rendered request (RequestTokens) on real sessions:
// the estimate counts each card once per output and the prompt frame as
// constants, so it may differ by a few tokens per card; it must stay within 2%
// over a session.
func TestSizerEstimate(t *testing.T) {
	files := []string{filepath.Join("..", "..", "testdata", "replay", "port.json"), filepath.Join(filepath.Join("..", "..", "..", "shared", "sessions"), "claude-code", "abc757d1-3da3-42fb-bb7b-ffa293a4ba29.jsonl")}
	for _, f := range files {
		if _, err := os.Stat(f); err != nil {
			t.Skipf("%s: %v", f, err)
		}
		src, err := replay.Load(f, true)
		if err != nil {
			t.Fatal(err)
		}
		cfg := advisor.DefaultConfig()
		cfg.Budget = 2000 // re-asks, so cards are counted again at a new age
		sc := &testkit.Recording{Scorer: lexical.New()}
		rec, err := (&replay.Replayer{Config: cfg, Scorer: sc, Lenient: true, Sizer: ollama.Sizer{}}).Replay(context.Background(), src)
		if err != nil {
			t.Fatal(err)
		}
		var exact, est int
		for _, b := range sc.Batches {
			n, err := ollama.RequestTokens(b)
			if err != nil {
				t.Fatal(err)
			}
			exact += n
		}
		for _, a := range rec.Asks {
			est += a.Tokens
		}
		if len(sc.Batches) < 3 || exact == 0 {
			t.Fatalf("%s: %d batches, want several", f, len(sc.Batches))
		}
		if rel := math.Abs(float64(est-exact)) / float64(exact); rel > 0.02 {
			t.Errorf("%s: estimated %d scorer tokens over %d batches, exact %d (%.1f%% off)", f, est, len(sc.Batches), exact, 100*rel)
		}
	}
}
