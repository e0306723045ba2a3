package server

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync/atomic"
	"time"
)

// bodyDeadline gives the client Options.BodyTimeout to send a request's body: it
// sets the connection's read deadline when the handler starts. net/http clears the
// deadline itself once the body has been read to its end (connReader's
// startBackgroundRead), so it never runs on while the response is written: a
// response stream may last as long as the upstream streams (the server has no
// write timeout), and the idle timeout starts only after it. A body not read to its
// end keeps the deadline, so the server does not wait on the rest of it after
// answering. A request without a body gets no deadline.
func (s *Server) bodyDeadline(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength == 0 || r.Body == nil || r.Body == http.NoBody {
			h.ServeHTTP(w, r)
			return
		}
		if err := http.NewResponseController(w).SetReadDeadline(time.Now().Add(s.bodyTimeout)); err != nil {
			h.ServeHTTP(w, r) // not a real connection (a test recorder)
			return
		}
		r.Body = &deadlineBody{ReadCloser: r.Body}
		h.ServeHTTP(w, r)
	})
}

// deadlineBody remembers a read cut by the body deadline, and the body's end: once
// the body has returned io.EOF, every later read returns io.EOF without reaching
// it. The transport reads a body of known length once more after its last byte
// (to check it holds no more), and by then net/http may have closed the body
// (it reads a request body's rest and closes it when the response's headers go
// out, which a fast upstream's answer can bring before that last read): the
// read would fail with http.ErrBodyReadAfterClose, the transport would close
// the upstream connection, and the response would be cut short.
type deadlineBody struct {
	io.ReadCloser
	timedOut atomic.Bool
	ended    atomic.Bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	if b.ended.Load() {
		return 0, io.EOF
	}
	n, err := b.ReadCloser.Read(p)
	switch {
	case err == io.EOF:
		b.ended.Store(true)
	case err != nil && errors.Is(err, os.ErrDeadlineExceeded):
		b.timedOut.Store(true)
	}
	return n, err
}

// bodyTimeoutMessage says that a body was not in within the body timeout, after got
// bytes (-1: unknown).
func (s *Server) bodyTimeoutMessage(got int64) string {
	msg := fmt.Sprintf("request body not received within %s (--body-timeout)", s.bodyTimeout)
	if got >= 0 {
		msg += fmt.Sprintf(": %d bytes arrived", got)
	}
	return msg
}

// bodyTimedOut reports whether r's body read was cut by the body deadline: err says
// so, or the body does (a read error cancels the request's context, and a client of
// the body, such as the transport, may report that instead).
func bodyTimedOut(r *http.Request, err error) bool {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return true
	}
	b, ok := r.Body.(*deadlineBody)
	return ok && b.timedOut.Load()
}
