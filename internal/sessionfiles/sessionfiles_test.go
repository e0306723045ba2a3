package sessionfiles

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestMissing: without RequiredEnv a test that lacks the real sessions is skipped;
// with it (CI) the same test fails and says why. Run in a child process, so that
// the failure is the child's.
func TestMissing(t *testing.T) {
	if os.Getenv("SESSIONFILES_CHILD") != "" {
		Missing(t, "no ../shared here")
		return
	}
	for _, tc := range []struct {
		required bool
		want     string
	}{
		{false, "--- SKIP: TestMissing"},
		{true, "--- FAIL: TestMissing"},
	} {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestMissing$", "-test.v")
		cmd.Env = append(os.Environ(), "SESSIONFILES_CHILD=1", RequiredEnv+"=")
		if tc.required {
			cmd.Env = append(cmd.Env, RequiredEnv+"=1")
		}
		out, _ := cmd.CombinedOutput()
		if !strings.Contains(string(out), tc.want) || !strings.Contains(string(out), "no ../shared here") {
			t.Errorf("required %v: child said\n%s\nwant %q and the reason", tc.required, out, tc.want)
		}
		if tc.required && !strings.Contains(string(out), RequiredEnv) {
			t.Errorf("the failure does not name %s:\n%s", RequiredEnv, out)
		}
	}
}
