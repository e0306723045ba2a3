package main

// Bounds on a command's work rather than on the wall clock. On a machine that other
// jobs load (4 engineers on 2 cores reach load 10-19), a command's wall time
// stretches 5-10x while its work does not: TestBadInputs' heavy cases failed there
// on fixed wall limits (10000-sessions' replay at 2 minutes, 100k-steps' requests at
// a 60 s client timeout) with nothing wrong. What those limits guarded is a hang
// and a step whose cost grows faster than the input; a workBound guards each
// directly: the CPU time the process spends (a super-linear step costs CPU
// whatever the load), and its CPU time standing still (a hang: blocked, not
// working), with a wall backstop far out.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// workBound bounds one command run or one request by its work. The zero value of a
// field turns its check off.
type workBound struct {
	// cpu is the most CPU time (user + system) the process may use: for a request,
	// what the server process uses while it is in flight.
	cpu time.Duration
	// stall is the longest wall time in which the process's CPU time may advance
	// by less than stallCPU: a process that works gets at least that much of a core
	// however loaded the machine is (at load 20 on 2 cores, about 3 s in 30 s),
	// one that is blocked gets none.
	stall time.Duration
	// wall is the longest the run may take in all.
	wall time.Duration
}

const (
	// stallCPU is the CPU time a working process surely gets within stallWindow.
	stallCPU = 100 * time.Millisecond
	// stallWindow is the heavy cases' stall: their runs spend 1-2 s of CPU per
	// tenth of their input (a 100,000-step request, 10,000 sessions replayed), so a
	// working run never sits below stallCPU for this long.
	stallWindow = 60 * time.Second
	// heavyBackstop is the heavy cases' wall bound, only against a process that
	// works forever at under its CPU bound: on a quiet machine the slowest heavy
	// run takes 40-100 s.
	heavyBackstop = 15 * time.Minute
	// commandCPURatio and requestCPURatio bound a heavy run's CPU time by the
	// same command's (or request's) on a tenth of the input, run just before in the
	// same test. Measured at load 6-9: inspect, advise and replay cost 8-11x their
	// tenth, so 20x leaves 2x for the CPU time's own swing under load, while a step
	// quadratic in the input costs up to 100x: 10000-sessions' replay cost 23x
	// when each session's commit scanned every stored run, and 31x with a test
	// step hashing every session's path seen so far 4 times (76 s of CPU on top of
	// 20). serve's first request on 100,000 steps costs 19-21x its tenth (its
	// collector, 60% of that CPU, marks a heap that grows with the session again
	// and again under serve's memory limit), so a request gets 50x.
	commandCPURatio = 20
	requestCPURatio = 50
	// heavyMinCPU is the least CPU bound a heavy run gets, for commands that stop
	// early on a tenth of a second's work (a folder given to inspect).
	heavyMinCPU = 5 * time.Second
)

// heavyWorkBound is the workBound of a heavy case's run whose tenth-sized twin cost
// tenthCPU, ratio (commandCPURatio or requestCPURatio) times that at most.
func heavyWorkBound(tenthCPU time.Duration, ratio int) workBound {
	return workBound{cpu: max(time.Duration(ratio)*tenthCPU, heavyMinCPU), stall: stallWindow, wall: heavyBackstop}
}

// String describes b for failure messages.
func (b workBound) String() string {
	var parts []string
	if b.cpu > 0 {
		parts = append(parts, fmt.Sprintf("%s of CPU", b.cpu.Round(time.Millisecond)))
	}
	if b.stall > 0 {
		parts = append(parts, fmt.Sprintf("%s without %s of CPU", b.stall, stallCPU))
	}
	if b.wall > 0 {
		parts = append(parts, fmt.Sprintf("%s of wall time", b.wall))
	}
	return strings.Join(parts, ", ")
}

// procCPU returns the CPU time (user + system, every thread) process pid has used
// so far: fields 14 and 15 of /proc/PID/stat, in clock ticks of USER_HZ (100 a
// second on Linux). ok is false when the file cannot be read (the process is gone).
func procCPU(pid int) (cpu time.Duration, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	// The command name, field 2, is in parentheses and may hold spaces; the fields
	// after its closing parenthesis start at field 3.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, false
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(utime+stime) * 10 * time.Millisecond, true
}

// watch waits until done is closed or process pid breaks b, polling its CPU time,
// and returns "" in the first case, else what it broke. from is the process's CPU
// time when the watched work began (its cost so far is not the work's).
func watch(pid int, from time.Duration, b workBound, done <-chan struct{}) string {
	start := time.Now()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	moved, movedCPU := start, from // when the CPU time last advanced by stallCPU
	for {
		select {
		case <-done:
			return ""
		case now := <-tick.C:
			cpu, ok := procCPU(pid)
			if !ok {
				continue // ended: done follows
			}
			if b.cpu > 0 && cpu-from > b.cpu {
				return fmt.Sprintf("used %s of CPU, over its bound of %s", (cpu - from).Round(10*time.Millisecond), b.cpu.Round(time.Millisecond))
			}
			if cpu-movedCPU >= stallCPU {
				moved, movedCPU = now, cpu
			} else if b.stall > 0 && now.Sub(moved) > b.stall {
				return fmt.Sprintf("hung: under %s of CPU in %s (%s in all after %s)", stallCPU, b.stall, (cpu - from).Round(10*time.Millisecond), now.Sub(start).Round(time.Second))
			}
			if b.wall > 0 && now.Sub(start) > b.wall {
				return fmt.Sprintf("hung: no answer within %s (%s of CPU)", b.wall, (cpu - from).Round(10*time.Millisecond))
			}
		}
	}
}

// ran is the outcome of one command run or request.
type ran struct {
	code int           // exit code or HTTP status; -1 when stopped for breaking its bound
	out  string        // output, or response body
	cpu  time.Duration // CPU time spent: the process's, or the server's while the request was in flight
	why  string        // why it was stopped ("" when it ended by itself)
}

// waitWork waits for the process to end within b and returns its exit code and
// CPU time; past b it kills the process and returns code -1 and why.
func (p *proc) waitWork(b workBound) ran {
	if why := watch(p.cmd.Process.Pid, 0, b, p.done); why != "" {
		_ = p.cmd.Process.Kill()
		<-p.done
		return ran{code: -1, why: why, out: p.output()}
	}
	st := p.cmd.ProcessState
	return ran{code: p.exitCode(), out: p.output(), cpu: st.UserTime() + st.SystemTime()}
}

// postWork sends body to the server like post, bounded by b on the server's work
// while the request is in flight: past it the request is cancelled and code is -1.
// cpu is the server's CPU time over the request (other requests in flight at the
// same time count too).
func (s *served) postWork(t testing.TB, path string, body []byte, b workBound, header ...string) ran {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	pid := s.cmd.Process.Pid
	from, _ := procCPU(pid)
	done, stopped := make(chan struct{}), make(chan string, 1)
	go func() {
		why := watch(pid, from, b, done)
		if why != "" {
			cancel()
		}
		stopped <- why
	}()
	code, out := send(req)
	close(done)
	to, _ := procCPU(pid)
	r := ran{code: code, out: out, cpu: to - from}
	if why := <-stopped; why != "" {
		r.code, r.why = -1, why
	}
	return r
}

// send does req with no client timeout (the caller bounds it) and returns the
// status and body, or 0 and the error.
func send(req *http.Request) (int, string) { return doRequest(http.DefaultClient, req) }

// doRequest does req through c and returns the status and the whole body, or 0
// and the error's text.
func doRequest(c *http.Client, req *http.Request) (int, string) {
	resp, err := c.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err.Error()
	}
	return resp.StatusCode, string(b)
}

// bounded waits for the process within b (waitWork) and fails the test when it
// panicked.
func (p *proc) bounded(t testing.TB, b workBound) ran {
	t.Helper()
	r := p.waitWork(b)
	if panicked.MatchString(r.out) {
		t.Errorf("pruneadvisor %s panicked:\n%s", strings.Join(p.cmd.Args[1:], " "), cutOut(r.out, 4000))
	}
	return r
}

// tenthBound runs a heavy case's channel on the tenth of its input (got with tag
// "-tenth", for a store and session of its own) and returns the workBound of the
// run on the whole input: heavyWorkBound of the tenth's CPU time and ratio.
func tenthBound(t *testing.T, tenth string, ratio int, got func(path, tag string, b workBound) ran) workBound {
	t.Helper()
	b := workBound{stall: stallWindow, wall: heavyBackstop}
	start := time.Now()
	r := got(tenth, "-tenth", b)
	if r.code == -1 {
		t.Fatalf("on a tenth of the input: %s (bound: %s)", r.why, b)
	}
	t.Logf("a tenth of the input: exit/status %d in %.2fs, %s of CPU", r.code, time.Since(start).Seconds(), r.cpu.Round(time.Millisecond))
	return heavyWorkBound(r.cpu, ratio)
}
