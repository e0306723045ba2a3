package server

import (
	"net"
	"net/http"
	"strconv"
	"strings"

	"github.com/pruneadvisor/pruneadvisor/internal/textcut"
)

// hostPolicy decides which Host header values the server answers (CheckHost).
type hostPolicy struct {
	any      bool            // a token is set: every host
	exact    map[string]bool // lower-case names and addresses from AllowedHosts
	suffixes []string        // ".example.com" from "*.example.com"
}

func newHostPolicy(token string, allowed []string) hostPolicy {
	p := hostPolicy{any: token != "", exact: map[string]bool{}}
	for _, h := range allowed {
		h = strings.ToLower(strings.TrimSpace(h))
		if suffix, ok := strings.CutPrefix(h, "*."); ok && suffix != "" {
			p.suffixes = append(p.suffixes, "."+suffix)
		} else if h != "" {
			p.exact[strings.Trim(h, "[]")] = true
		}
	}
	return p
}

// allows reports whether a request naming host (a Host header: name or address,
// with or without a port) is answered.
func (p hostPolicy) allows(host string) bool {
	if p.any {
		return true
	}
	name := hostName(host)
	if isLoopbackHost(name) || p.exact[name] {
		return true
	}
	for _, s := range p.suffixes {
		if strings.HasSuffix(name, s) {
			return true
		}
	}
	return false
}

// hostName is the lower-case name or address of a Host header value, without its
// port or IPv6 brackets.
func hostName(host string) string {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	return strings.ToLower(strings.Trim(host, "[]"))
}

// isLoopbackHost reports whether name (a host name or IP address, without port)
// always means this machine: "localhost", a name under ".localhost" (RFC 6761
// section 6.3: resolvers answer these with loopback and never ask DNS), or a
// loopback IP address (127.0.0.0/8, ::1). A public name that merely resolves to
// 127.0.0.1, as in DNS rebinding, is not one.
func isLoopbackHost(name string) bool {
	name = strings.TrimSuffix(strings.ToLower(name), ".")
	if name == "localhost" || strings.HasSuffix(name, ".localhost") {
		return true
	}
	ip := net.ParseIP(name)
	return ip != nil && ip.IsLoopback()
}

// checkHost refuses, with 403, requests whose Host the policy does not allow
// (Options.AllowedHosts). Nothing of the request is read or forwarded.
func (s *Server) checkHost(h http.Handler) http.Handler {
	if s.hosts.any {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.hosts.allows(r.Host) {
			h.ServeHTTP(w, r)
			return
		}
		s.metrics.requests.WithLabelValues("refused-host", "403").Inc()
		msg := "Host " + quoteHost(r.Host) + " is not a loopback name or address: without a token pruneadvisor answers only " +
			"localhost, 127.0.0.1 and [::1] (a web page can point its own domain at this machine); " +
			"add the name with --allowed-hosts or set --token"
		if k, isProxy := proxyKind(r); isProxy {
			writeAPIError(w, k, http.StatusForbidden, "permission_error", msg)
			return
		}
		writeError(w, http.StatusForbidden, "%s", msg)
	})
}

// quoteHost quotes a client's Host value for a message, cut to 100 bytes.
func quoteHost(h string) string {
	return strconv.Quote(textcut.BytesDots(h, 100))
}
