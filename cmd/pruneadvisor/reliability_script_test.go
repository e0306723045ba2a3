package main

// Script commands and environment for testdata/script/newcomer.txtar (a newcomer's
// first hour: the README's commands word for word on a clean copy). TestScript
// registers them.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
)

// reliabilityCmds are the script commands newcomer.txtar uses.
var reliabilityCmds = map[string]func(ts *testscript.TestScript, neg bool, args []string){
	"cleancopy": cmdCleanCopy,
	"freeport":  cmdFreePort,
	"waithttp":  cmdWaitHTTP,
	"setmatch":  cmdSetMatch,
}

// goEnvOnce holds the go command's own settings, read once.
var goEnvOnce = sync.OnceValues(func() (map[string]string, error) {
	out, err := exec.Command("go", "env", "-json", "GOCACHE", "GOMODCACHE", "GOPATH", "GOROOT").Output()
	if err != nil {
		return nil, fmt.Errorf("go env: %w", err)
	}
	m := map[string]string{}
	return m, json.Unmarshal(out, &m)
})

// scriptGoEnv gives scripts a go command that builds offline with this machine's
// caches: testscript runs with HOME=/no-home and without the go variables, where
// `go run` would start an empty cache (or fail to create one) and reach for the
// network.
func scriptGoEnv(env *testscript.Env) error {
	m, err := goEnvOnce()
	if err != nil {
		return err
	}
	for k, v := range m {
		env.Setenv(k, v)
	}
	env.Setenv("GOPROXY", "off")
	env.Setenv("GOTOOLCHAIN", "local")
	env.Setenv("GOFLAGS", "-buildvcs=false")
	return nil
}

// cmdCleanCopy is `cleancopy SRC DST`: DST becomes a copy of the repository at SRC as
// a fresh clone would hold it: the files git tracks plus the new ones it does not
// ignore (so the copy has neither build output nor databases).
func cmdCleanCopy(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: cleancopy SRC DST")
	}
	src, dst := ts.MkAbs(args[0]), ts.MkAbs(args[1])
	cmd := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	cmd.Dir = src
	out, err := cmd.Output()
	if err != nil {
		ts.Fatalf("cleancopy: git ls-files in %s: %v", src, err)
	}
	n := 0
	for _, rel := range bytes.Split(out, []byte{0}) {
		if len(rel) == 0 {
			continue
		}
		from, to := filepath.Join(src, string(rel)), filepath.Join(dst, string(rel))
		st, err := os.Lstat(from)
		if err != nil {
			continue // tracked but deleted in the working tree
		}
		if !st.Mode().IsRegular() {
			continue
		}
		data, err := os.ReadFile(from)
		if err != nil {
			ts.Fatalf("cleancopy: %v", err)
		}
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			ts.Fatalf("cleancopy: %v", err)
		}
		if err := os.WriteFile(to, data, st.Mode().Perm()); err != nil {
			ts.Fatalf("cleancopy: %v", err)
		}
		n++
	}
	ts.Logf("cleancopy: %d files", n)
}

// cmdFreePort is `freeport VAR`: sets $VAR to a TCP port free on 127.0.0.1.
func cmdFreePort(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: freeport VAR")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		ts.Fatalf("freeport: %v", err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	ts.Setenv(args[0], fmt.Sprint(port))
}

// cmdWaitHTTP is `waithttp URL`: polls URL until it answers 200 (at most 30 s) and
// writes the body to stdout.
func cmdWaitHTTP(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: waithttp URL")
	}
	client := &http.Client{Timeout: 2 * time.Second}
	end := time.Now().Add(30 * time.Second)
	var last error
	for time.Now().Before(end) {
		resp, err := client.Get(args[0])
		if err == nil {
			body, rerr := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && rerr == nil {
				_, _ = ts.Stdout().Write(body)
				return
			}
			err = fmt.Errorf("status %d: %s", resp.StatusCode, body)
		}
		last = err
		time.Sleep(50 * time.Millisecond)
	}
	ts.Fatalf("waithttp %s: no 200 within 30 s: %v", args[0], last)
}

// cmdSetMatch is `setmatch VAR FILE REGEXP`: sets $VAR to the first group of the
// first match of REGEXP in FILE (stdout and stderr name the last command's output).
func cmdSetMatch(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 3 {
		ts.Fatalf("usage: setmatch VAR FILE REGEXP")
	}
	re, err := regexp.Compile(args[2])
	if err != nil {
		ts.Fatalf("setmatch: %v", err)
	}
	m := re.FindStringSubmatch(ts.ReadFile(args[1]))
	if len(m) < 2 {
		ts.Fatalf("setmatch: no match for %s in %s", args[2], args[1])
	}
	ts.Setenv(args[0], strings.TrimSpace(m[1]))
}
