package main

import (
	"crypto/sha256"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pruneadvisor/pruneadvisor/internal/tinymodel"
)

// TestRunWritesModelAndModelfile: the command writes tiny.gguf with the bytes
// tinymodel.Write gives for the same flags and a Modelfile that imports it.
func TestRunWritesModelAndModelfile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "m")
	if err := run([]string{"-out", dir, "-seed", "7", "-layers", "1"}); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dir, "tiny.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	var want strings.Builder
	if err := tinymodel.Write(&want, tinymodel.Config{Seed: 7, Layers: 1}); err != nil {
		t.Fatal(err)
	}
	if sha256.Sum256(got) != sha256.Sum256([]byte(want.String())) {
		t.Errorf("tiny.gguf (%d bytes) differs from tinymodel.Write's %d bytes", len(got), want.Len())
	}
	mf, err := os.ReadFile(filepath.Join(dir, "Modelfile"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(mf), "FROM ./tiny.gguf\nTEMPLATE \"\"\"") || !strings.HasSuffix(string(mf), "PARAMETER stop \"<|im_end|>\"\n") {
		t.Errorf("Modelfile:\n%s", mf)
	}
}

// TestRunErrors: a missing -out and a bad shape fail, naming the problem.
func TestRunErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "-out is required"},
		{[]string{"-out", t.TempDir(), "-embed", "62"}, "embedding width 62 is not a multiple of 4 heads"},
	} {
		err := run(tc.args)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.args, err, tc.want)
		}
	}
}
