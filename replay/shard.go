package replay

import (
	"fmt"
	"hash/fnv"
	"path/filepath"
	"strconv"
	"strings"
)

// Shard is one of Count parts of the sessions found, so that Count machines
// replaying the same folders into one store (PostgreSQL) each take a share and
// together replay every session once. A session file belongs to shard
// 1 + FNV-1a-64(base name) mod Count: by its file name, not its folder, so that
// machines with the corpus mounted at different paths agree. The zero Shard (Count
// 0) holds every session.
type Shard struct {
	Index int // 1..Count
	Count int
}

// ParseShard reads "I/N" (1 <= I <= N), as `replay --shard` takes it; "" is the
// zero Shard.
func ParseShard(s string) (Shard, error) {
	if s == "" {
		return Shard{}, nil
	}
	is, ns, ok := strings.Cut(s, "/")
	i, ierr := strconv.Atoi(is)
	n, nerr := strconv.Atoi(ns)
	if !ok || ierr != nil || nerr != nil || n < 1 || i < 1 || i > n {
		return Shard{}, fmt.Errorf("shard %q: want I/N with 1 <= I <= N, e.g. 2/3 for the second of three machines", s)
	}
	return Shard{Index: i, Count: n}, nil
}

// String is "I/N", or "" for the zero Shard.
func (s Shard) String() string {
	if s.Count == 0 {
		return ""
	}
	return fmt.Sprintf("%d/%d", s.Index, s.Count)
}

// Has reports whether the session file at path belongs to s.
func (s Shard) Has(path string) bool {
	if s.Count <= 1 {
		return true
	}
	h := fnv.New64a()
	h.Write([]byte(filepath.Base(path)))
	return int(h.Sum64()%uint64(s.Count))+1 == s.Index
}
