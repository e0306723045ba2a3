package calibrate

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func handReport(t *testing.T) Report {
	t.Helper()
	outs, sessions := handOutputs()
	rep, err := NewReport(outs, sessions, []ScorerInput{{Name: "x", Outputs: outs}}, ReportConfig{TargetMiss: 0.2})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func TestPlot(t *testing.T) {
	rep := handReport(t)
	dir := t.TempDir()
	tests := []struct {
		file  string
		magic func([]byte) bool
	}{
		{"r.png", func(b []byte) bool { return bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")) }},
		{"r.SVG", func(b []byte) bool {
			return bytes.Contains(b[:min(len(b), 512)], []byte("<svg")) && bytes.Contains(b, []byte("Savings vs miss rate"))
		}},
	}
	for _, tt := range tests {
		path := filepath.Join(dir, tt.file)
		if err := Plot(path, rep); err != nil {
			t.Fatalf("%s: %v", tt.file, err)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) < 1000 || !tt.magic(b) {
			t.Errorf("%s: %d bytes, wrong type or empty (starts %q)", tt.file, len(b), b[:min(len(b), 16)])
		}
	}
	if err := Plot(filepath.Join(dir, "r.gif"), rep); !errors.Is(err, ErrInvalid) {
		t.Errorf("gif: err %v, want ErrInvalid", err)
	}
}

// TestReportJSON: a report with undefined AUC (one class only) still encodes, with
// null in place of NaN.
func TestReportJSON(t *testing.T) {
	rep := handReport(t)
	rep.Scorers[0].Reliability.AUC = math.NaN()
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"auc":null`) || !strings.Contains(string(b), `"brier":0.`) {
		t.Errorf("JSON lacks auc null or brier: %.400s", b)
	}
}
