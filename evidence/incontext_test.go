package evidence

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/pruneadvisor/pruneadvisor/transcript"
)

// TestInContext is the clause In context on a hand-made pi session. c1 holds
// alphaLoader_x, betaParser_y and epsilonUnused_q, c2 gammaStore_z, c3 deltaCache_w; then the agent
// compacts, keeping its tail from the user's "go on" (entry 6: c3 stays, c1 and c2
// are dropped), with a summary that names betaParser_y. At step 4 the agent writes
// alphaLoader_x (c1 dropped: no use) and deltaCache_w (c3 kept: a use, weight
// ln(3/1)/ln 3 = 1); c5 shows gammaStore_z again and the agent writes it and
// betaParser_y at step 6: c5's use as the latest carrier (in 2 of the 5 outputs:
// ln(5/2)/ln 5 = 0.5693, python3), betaParser_y no output's (the summary holds it).
// When the compaction keeps everything (entry 1), alphaLoader_x at step 4 is c1's.
// c1's epsilonUnused_q, which nobody writes, stays live while c1 is in context and
// is not once the compaction dropped c1 (c4's "done" and c5's "again" are live
// plain words: no word is common here).
func TestInContext(t *testing.T) {
	e := func(body string) string {
		return `{"type":"message","timestamp":"2026-01-01T00:00:00Z","message":` + body + `}`
	}
	call := func(id, cmd string) string {
		return e(`{"role":"assistant","content":[{"type":"toolCall","id":"` + id + `","name":"bash","arguments":{"command":"` + cmd + `"}}],"stopReason":"toolUse"}`)
	}
	res := func(id, text string) string {
		return e(`{"role":"toolResult","toolCallId":"` + id + `","toolName":"bash","content":[{"type":"text","text":"` + text + `"}],"isError":false}`)
	}
	session := func(firstKept int) []byte {
		lines := []string{
			`{"type":"session","id":"s","timestamp":"2026-01-01T00:00:00Z","cwd":"/w"}`,
			e(`{"role":"user","content":[{"type":"text","text":"fix the loader"}]}`),
			call("c1", "cat a.txt"), res("c1", "alphaLoader_x betaParser_y epsilonUnused_q"),
			call("c2", "cat b.txt"), res("c2", "gammaStore_z"),
			e(`{"role":"user","content":[{"type":"text","text":"go on"}]}`),
			call("c3", "cat c.txt"), res("c3", "deltaCache_w"),
			`{"type":"compaction","timestamp":"2026-01-01T00:00:00Z","summary":"we read betaParser_y","firstKeptEntryIndex":` + string(rune('0'+firstKept)) + `,"tokensBefore":9}`,
			call("c4", "echo alphaLoader_x deltaCache_w"), res("c4", "done"),
			call("c5", "cat d.txt"), res("c5", "gammaStore_z again"),
			e(`{"role":"assistant","content":[{"type":"text","text":"` + "`gammaStore_z` and `betaParser_y`" + `"}],"stopReason":"stop"}`),
		}
		return []byte(strings.Join(lines, "\n") + "\n")
	}
	c3 := []Use{{Key: "c3", Step: 4, Kind: UseName, Proof: `name "deltaCache_w"`, Weight: 1}}
	c5 := []Use{{Key: "c5", Step: 6, Kind: UseName, Proof: `name "gammaStore_z"`, Weight: 0.5693}}
	tests := []struct {
		name      string
		firstKept int
		want      map[string][]Use
		live      map[string]int
	}{
		{"the tail from entry 6", 6, map[string][]Use{"c3": c3, "c5": c5}, map[string]int{"c1": 0, "c2": 0, "c3": 0, "c4": 1, "c5": 1}},
		{"everything kept", 1, map[string][]Use{
			"c1": {{Key: "c1", Step: 4, Kind: UseName, Proof: `name "alphaLoader_x"`, Weight: 1}},
			"c3": c3, "c5": c5,
		}, map[string]int{"c1": 1, "c2": 0, "c3": 0, "c4": 1, "c5": 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := transcript.Read("c.jsonl", session(tt.firstKept), transcript.Options{Format: transcript.FormatPi})
			if err != nil {
				t.Fatal(err)
			}
			tr, _ := track(t, s)
			got, live := map[string][]Use{}, map[string]int{}
			for _, k := range tr.Keys() {
				if u := tr.Uses(k); len(u) > 0 {
					got[k] = round(u)
				}
				live[k], _ = tr.Live(k)
			}
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("uses (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tt.live, live); d != "" {
				t.Errorf("live names (-want +got):\n%s", d)
			}
		})
	}
}
