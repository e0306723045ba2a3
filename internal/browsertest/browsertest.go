// Package browsertest loads pages in a real headless Chromium for the tests of the
// report and live pages, driven by chromedp: it records every request the page
// makes and everything it writes to the console (errors, uncaught exceptions,
// Content-Security-Policy violations), and reads the page's figures.
//
// Chromium is the one on PATH (chromium, chromium-browser, google-chrome) or the
// one EnvPath names. When there is none the test is skipped with the reason, unless
// EnvRequired is "1" (as .ci/run sets it, after installing Debian's chromium
// package): then the test fails, so that CI cannot pass without the browser tests.
package browsertest

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	cdpruntime "github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// Environment variables read by New.
const (
	// EnvPath names the Chromium executable (default: looked up on PATH).
	EnvPath = "PRUNEADVISOR_TEST_CHROMIUM"
	// EnvRequired set to "1" makes a missing Chromium fail the test instead of
	// skipping it.
	EnvRequired = "PRUNEADVISOR_TEST_CHROMIUM_REQUIRED"
)

// UpdateScreenshots is the -update-screenshots flag: the tests that take one write
// their screenshots into docs/ (Browser.Screenshot).
var UpdateScreenshots = flag.Bool("update-screenshots", false, "write the pages' screenshots into docs/")

// timeout bounds one page load and its checks.
const timeout = 60 * time.Second

// Executable returns the Chromium to run, or an error saying why there is none.
func Executable() (string, error) {
	if p := os.Getenv(EnvPath); p != "" {
		return p, nil
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", errors.New("no chromium, chromium-browser or google-chrome on PATH")
}

// Browser is one headless Chromium tab and what it saw since Open.
type Browser struct {
	t   testing.TB
	ctx context.Context

	mu       sync.Mutex
	requests []string // URLs requested, in order
	console  []string // console errors, exceptions and error-level log entries
}

// New starts a headless Chromium for t (closed when t ends), or skips t when there
// is none (fails it with EnvRequired=1). headers are sent with every request of
// the tab (e.g. the server's token).
func New(t testing.TB, headers map[string]string) *Browser {
	t.Helper()
	exe, err := Executable()
	if err != nil {
		if os.Getenv(EnvRequired) == "1" {
			t.Fatalf("Chromium required (%s=1) but unusable: %v", EnvRequired, err)
		}
		t.Skipf("browser test skipped: %v (install Debian's chromium package, or set %s; %s=1 makes this a failure)", err, EnvPath, EnvRequired)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.WindowSize(1280, 900),
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.UserDataDir(t.TempDir()))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	b := &Browser{t: t, ctx: ctx}
	if err := chromedp.Listen(ctx, b.listen); err != nil {
		t.Fatalf("start chromium %s: %v", exe, err)
	}
	if len(headers) > 0 {
		h := network.Headers{}
		for k, v := range headers {
			h[k] = v
		}
		if _, err := chromedp.Call(ctx, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{Headers: h}); err != nil {
			t.Fatalf("set headers: %v", err)
		}
	}
	return b
}

func (b *Browser) listen(ev any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch e := ev.(type) {
	case *network.EventRequestWillBeSent:
		b.requests = append(b.requests, e.Request.URL)
	case *cdpruntime.EventExceptionThrown:
		b.console = append(b.console, "exception: "+e.ExceptionDetails.Text+describe(e.ExceptionDetails.Exception))
	case *cdpruntime.EventConsoleAPICalled:
		if e.Type == cdpruntime.ConsoleAPICalledTypeError || e.Type == cdpruntime.ConsoleAPICalledTypeAssert {
			var parts []string
			for _, a := range e.Args {
				parts = append(parts, string(a.Value)+a.Description)
			}
			b.console = append(b.console, "console."+string(e.Type)+": "+strings.Join(parts, " "))
		}
	case *log.EventEntryAdded:
		if e.Entry.Level == log.EntryLevelError {
			b.console = append(b.console, "log "+string(e.Entry.Source)+": "+e.Entry.Text+" ("+e.Entry.URL+")")
		}
	}
}

func describe(o *cdpruntime.RemoteObject) string {
	if o == nil {
		return ""
	}
	return " " + o.Description
}

// Open loads url and waits for the page to load; it fails t on an error.
func (b *Browser) Open(url string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, timeout)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Navigate(url), chromedp.WaitReady("body")); err != nil {
		b.t.Fatalf("open %s: %v", url, err)
	}
}

// Requests returns the URLs the tab requested since it started, in order.
func (b *Browser) Requests() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.requests...)
}

// ConsoleErrors returns the console errors, uncaught exceptions and error-level
// log entries (a CSP violation is one) since the tab started.
func (b *Browser) ConsoleErrors() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.console...)
}

// Eval evaluates a JavaScript expression in the page and decodes its JSON value
// into out; it fails t on an error.
func (b *Browser) Eval(expr string, out any) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, timeout)
	defer cancel()
	raw, err := chromedp.Run(ctx, chromedp.Evaluate[json.RawMessage]("JSON.stringify("+expr+")"))
	if err != nil {
		b.t.Fatalf("evaluate %s: %v", expr, err)
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		b.t.Fatalf("evaluate %s: %v (%s)", expr, err, raw)
	}
	if err := json.Unmarshal([]byte(s), out); err != nil {
		b.t.Fatalf("evaluate %s: %v", expr, err)
	}
}

// Do runs chromedp actions in the tab; it fails t on an error.
func (b *Browser) Do(actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, timeout)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.t.Fatalf("browser: %v", err)
	}
}

// Field is one figure of a page: its JSON path, exact value and shown text
// (report package: data-field, data-value).
type Field struct {
	Path  string `json:"path"`
	Value string `json:"value"`
	Text  string `json:"text"`
}

// Fields returns every figure of the page, in document order.
func (b *Browser) Fields() []Field {
	var out []Field
	b.Eval(`Array.from(document.querySelectorAll('[data-field]')).map(e => ({path: e.dataset.field, value: e.dataset.value, text: e.textContent}))`, &out)
	return out
}

// Screenshot captures the whole page (clipped to at most maxHeight CSS pixels,
// from the top) as PNG into docs/name under the repository root when
// -update-screenshots is set, and does nothing otherwise.
func (b *Browser) Screenshot(name string, maxHeight int) {
	b.t.Helper()
	if !*UpdateScreenshots {
		return
	}
	ctx, cancel := context.WithTimeout(b.ctx, timeout)
	defer cancel()
	if maxHeight > 0 {
		if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, int64(maxHeight))); err != nil {
			b.t.Fatalf("screenshot %s: %v", name, err)
		}
	}
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	path := filepath.Join(root(), "docs", name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		b.t.Fatalf("screenshot: %v", err)
	}
	b.t.Logf("wrote %s (%d bytes)", path, len(png))
}

// root is the repository's root: the folder of go.mod above this file.
func root() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// LookupJSON returns the value at a dotted path ("report.budgets.0.keep_all_usd")
// of a document decoded with UseNumber.
func LookupJSON(doc any, path string) (any, bool) {
	cur := doc
	for _, part := range strings.Split(path, ".") {
		switch v := cur.(type) {
		case map[string]any:
			next, ok := v[part]
			if !ok {
				return nil, false
			}
			cur = next
		case []any:
			i, err := strconv.Atoi(part)
			if err != nil || i < 0 || i >= len(v) {
				return nil, false
			}
			cur = v[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

// CheckFields checks every figure of a page against doc, the JSON the command
// line prints for the same data: the field must exist, its value must equal the
// page's exact value, and the text shown must be that value rounded (within half
// a unit of its last digit). It returns the paths checked.
func CheckFields(t testing.TB, doc any, fields []Field) map[string]bool {
	t.Helper()
	seen := map[string]bool{}
	for _, f := range fields {
		seen[f.Path] = true
		v, ok := LookupJSON(doc, f.Path)
		if !ok {
			t.Errorf("page figure %s (%q): no such field in the JSON", f.Path, f.Text)
			continue
		}
		n, ok := v.(json.Number)
		if !ok {
			t.Errorf("page figure %s: the JSON holds %v, not a number", f.Path, v)
			continue
		}
		want, err := n.Float64()
		if err != nil {
			t.Fatal(err)
		}
		got, err := strconv.ParseFloat(f.Value, 64)
		if err != nil || got != want {
			t.Errorf("page figure %s = %s, the JSON says %s", f.Path, f.Value, n)
			continue
		}
		text := strings.NewReplacer("$", "", ",", "").Replace(strings.TrimSpace(f.Text)) // -$0.26 -> -0.26
		shown, err := strconv.ParseFloat(text, 64)
		if err != nil {
			t.Errorf("page figure %s shows %q, not a number", f.Path, f.Text)
			continue
		}
		decimals := 0
		if i := strings.IndexByte(text, '.'); i >= 0 {
			decimals = len(text) - i - 1
		}
		if math.Abs(shown-want) > 0.5*math.Pow(10, -float64(decimals))+1e-12 {
			t.Errorf("page figure %s shows %q for %v", f.Path, f.Text, want)
		}
	}
	return seen
}
