package replay

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Found is one file Discover selected for replay.
type Found struct {
	Path string // as given, or joined under the folder given
	// Explicit marks a file named on the command line: it is replayed whatever its
	// name, and not being a session is a failure rather than a skip.
	Explicit bool
	Size     int64 // bytes
}

// Skip is one path Discover (or the runner) passed over, with the reason.
type Skip struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// Failure is one path or session that could not be replayed.
type Failure struct {
	Path string // the file or folder as given or found
	Err  error  // why: a file system error, a reader's error, ErrNotSession…
}

// Error returns "path: error".
func (f Failure) Error() string { return f.Path + ": " + f.Err.Error() }

// SessionExts are the file name endings a folder walk considers session files:
// Claude Code, pi and Codex write .jsonl, Gemini CLI, mini-swe-agent and OpenHands
// .json, SWE-agent .traj. A file named on the command line is read whatever its name.
var SessionExts = []string{".jsonl", ".json", ".traj"}

// skippedDirs are folder names a walk never enters: version-control and dependency
// trees hold no sessions.
var skippedDirs = map[string]bool{".git": true, ".hg": true, ".svn": true, "node_modules": true}

// isSessionName reports whether a walk should consider the file name: a session
// extension, and not one of the agents' side files (Claude Code's
// subagents/*.meta.json).
func isSessionName(name string) bool {
	lower := strings.ToLower(name)
	if strings.HasSuffix(lower, ".meta.json") {
		return false
	}
	for _, ext := range SessionExts {
		if strings.HasSuffix(lower, ext) {
			return true
		}
	}
	return false
}

// Discover expands paths into the files to replay, in a stable order: each file
// named is taken as is; each folder is walked recursively in name order (Claude
// Code's ~/.claude/projects, pi's ~/.pi/agent/sessions, Codex's ~/.codex/sessions
// and Gemini's ~/.gemini/tmp layouts all hold their sessions somewhere below), taking
// files whose names end in one of SessionExts. Symbolic links are followed; a
// folder already visited (a symlink loop, or two links to one folder) is walked
// once and reported as a Skip, and so is a file reached twice. Version-control and
// node_modules folders are not entered. ignored counts the other files passed over
// (wrong name). A path that cannot be read is a Failure; the others go on.
func Discover(paths []string) (found []Found, skips []Skip, ignored int, fails []Failure) {
	d := &discovery{dirs: map[string]string{}, files: map[string]string{}}
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			d.fails = append(d.fails, Failure{Path: p, Err: err})
			continue
		}
		if st.IsDir() {
			d.walk(p)
			continue
		}
		d.file(p, st, true)
	}
	return d.found, d.skips, d.ignored, d.fails
}

type discovery struct {
	dirs    map[string]string // real path of a visited folder -> path it was reached by
	files   map[string]string // real path of a found file -> path it was reached by
	found   []Found
	skips   []Skip
	ignored int
	fails   []Failure
}

// realPath returns p with every symbolic link resolved, absolute.
func realPath(p string) (string, error) {
	r, err := filepath.EvalSymlinks(p)
	if err != nil {
		return "", err
	}
	return filepath.Abs(r)
}

func (d *discovery) file(p string, st os.FileInfo, explicit bool) {
	r, err := realPath(p)
	if err != nil {
		d.fails = append(d.fails, Failure{Path: p, Err: err})
		return
	}
	if first, ok := d.files[r]; ok {
		d.skips = append(d.skips, Skip{Path: p, Reason: "same file as " + first})
		return
	}
	d.files[r] = p
	d.found = append(d.found, Found{Path: p, Explicit: explicit, Size: st.Size()})
}

func (d *discovery) walk(dir string) {
	r, err := realPath(dir)
	if err != nil {
		d.fails = append(d.fails, Failure{Path: dir, Err: err})
		return
	}
	if first, ok := d.dirs[r]; ok {
		d.skips = append(d.skips, Skip{Path: dir, Reason: fmt.Sprintf("folder already walked as %s (symlink loop or second link)", first)})
		return
	}
	d.dirs[r] = dir
	entries, err := os.ReadDir(dir)
	if err != nil {
		d.fails = append(d.fails, Failure{Path: dir, Err: err})
		return
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name() < entries[j].Name() })
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		st, err := os.Stat(p) // follows symbolic links
		if err != nil {
			d.skips = append(d.skips, Skip{Path: p, Reason: "cannot stat (broken symbolic link?): " + err.Error()})
			continue
		}
		switch {
		case st.IsDir():
			if !skippedDirs[e.Name()] {
				d.walk(p)
			}
		case !st.Mode().IsRegular():
			d.ignored++
		case isSessionName(e.Name()):
			d.file(p, st, false)
		default:
			d.ignored++
		}
	}
}
