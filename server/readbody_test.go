package server

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/pruneadvisor/pruneadvisor/transcript"
)

// readSized reads exactly the Content-Length, and refuses a body that ends sooner
// or goes on past it, also when the reader hands the bytes out one at a time.
func TestReadSized(t *testing.T) {
	for _, c := range []struct {
		name string
		body string
		n    int64
		want string
		err  error
	}{
		{"exact", `{"model":"m"}`, 13, `{"model":"m"}`, nil},
		{"shorter than its length", `{"model"`, 13, `{"model"`, io.ErrUnexpectedEOF},
		{"longer than its length", `{"model":"m"}x`, 13, `{"model":"m"}`, errBodyLength},
		{"empty", ``, 13, ``, io.EOF},
	} {
		for _, one := range []bool{false, true} {
			var r io.Reader = strings.NewReader(c.body)
			if one {
				r = iotest.OneByteReader(r)
			} else {
				r = iotest.DataErrReader(r) // the last bytes come with io.EOF
			}
			got, err := readSized(r, make([]byte, c.n), transcript.NewMessageCache(0).NewPrefixFeed())
			if string(got) != c.want || !errors.Is(err, c.err) {
				t.Errorf("%s (one byte a read: %v): readSized = %q, %v; want %q, %v", c.name, one, got, err, c.want, c.err)
			}
			if c.err == nil && cap(got) != int(c.n) {
				t.Errorf("%s: buffer of capacity %d for %d bytes", c.name, cap(got), c.n)
			}
		}
	}
}
