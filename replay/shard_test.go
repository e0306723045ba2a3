package replay

import (
	"github.com/pruneadvisor/pruneadvisor/internal/sessionfiles"

	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseShard(t *testing.T) {
	tests := []struct {
		in   string
		want Shard
		err  bool
	}{
		{"", Shard{}, false},
		{"1/1", Shard{1, 1}, false},
		{"2/3", Shard{2, 3}, false},
		{"0/3", Shard{}, true},
		{"4/3", Shard{}, true},
		{"1/0", Shard{}, true},
		{"2", Shard{}, true},
		{"a/b", Shard{}, true},
	}
	for _, tt := range tests {
		got, err := ParseShard(tt.in)
		if got != tt.want || (err != nil) != tt.err {
			t.Errorf("ParseShard(%q) = %v, %v; want %v, error %v", tt.in, got, err, tt.want, tt.err)
		}
		if err == nil && got.String() != tt.in {
			t.Errorf("ParseShard(%q).String() = %q", tt.in, got.String())
		}
	}
}

// Shards by file name: the expected shards are 1 + FNV-1a-64(name) mod N computed
// apart (a short Python FNV-1a; "a" hashes to 0xaf63dc4c8601ec8c, the reference
// value). The folder does not matter, and over the corpus the shards of N = 3
// partition the files, each taking a fair share.
func TestShardHas(t *testing.T) {
	for _, tt := range []struct {
		path   string
		of3    int
		of4    int
		folder string
	}{
		{"a", 2, 1, "/x"},
		{"fix-port.jsonl", 1, 1, "/home/me/sessions"},
		{"rollout-2025-01-01.jsonl", 1, 3, "/mnt/corpus/codex"},
		{"session.json", 2, 2, "relative/dir"},
	} {
		for _, p := range []string{tt.path, filepath.Join(tt.folder, tt.path)} {
			for n, want := range map[int]int{3: tt.of3, 4: tt.of4} {
				for i := 1; i <= n; i++ {
					if got := (Shard{i, n}).Has(p); got != (i == want) {
						t.Errorf("Shard %d/%d Has(%q) = %v; want shard %d", i, n, p, got, want)
					}
				}
			}
		}
	}
	entries, err := os.ReadDir(filepath.Join("..", "..", "shared", "corpus"))
	if err != nil {
		sessionfiles.Missing(t, "corpus: %v", err)
	}
	counts := make([]int, 3)
	files := 0
	walkErr := filepath.WalkDir(filepath.Join("..", "..", "shared", "corpus"), func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".jsonl") && !strings.HasSuffix(p, ".json") {
			return err
		}
		files++
		in := 0
		for i := range 3 {
			if (Shard{i + 1, 3}).Has(p) {
				counts[i]++
				in++
			}
		}
		if in != 1 {
			t.Errorf("%s is in %d shards of 3; want exactly 1", p, in)
		}
		return nil
	})
	if walkErr != nil {
		t.Fatal(walkErr)
	}
	for i, c := range counts {
		if files >= 90 && (c < files/5 || c > files/2) {
			t.Errorf("shard %d/3 holds %d of %d files; want about a third", i+1, c, files)
		}
	}
	t.Logf("%d entries, %d session files: shards of 3 hold %v", len(entries), files, counts)
}
