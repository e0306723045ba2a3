package server

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/flate"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zlib"
	"github.com/klauspost/compress/zstd"
	"github.com/pruneadvisor/pruneadvisor/internal/textcut"
)

// Request body decoding (RFC 9110 section 8.4, Content-Encoding): a body sent
// compressed is decoded for advising, at most MaxBody bytes decoded; forwarded as
// sent when nothing changes, re-encoded the same way when stubs go in.

// Errors of decodeRequest.
var (
	// errUnknownCoding means a Content-Encoding the server does not decode.
	errUnknownCoding = errors.New("unknown Content-Encoding")
	// errDecodedTooLarge means the decoded body passed the limit (a decompression
	// bomb, or merely too large).
	errDecodedTooLarge = errors.New("decoded request body is over the limit")
	// errCorruptBody means the body is not valid data of its Content-Encoding.
	errCorruptBody = errors.New("request body does not decode")
)

// Encodings label values of pruneadvisor_request_encodings_total.
const (
	encodingIdentity = "identity" // no Content-Encoding (or "identity")
	encodingMultiple = "multiple" // several codings applied in turn, all known
	encodingUnknown  = "unknown"  // a coding the server does not decode
)

// coding is one content coding the server decodes and encodes again.
type coding string

const (
	codingGzip    coding = "gzip"    // RFC 1952; "x-gzip" is its alias (RFC 9110 section 8.4.1.3)
	codingDeflate coding = "deflate" // the zlib format, RFC 1950; raw RFC 1951 data is accepted too
	codingBrotli  coding = "br"      // RFC 7932
	codingZstd    coding = "zstd"    // RFC 8878
)

// Compression levels used when a rewritten body is encoded again: each library's
// default, but brotli's 4: on 1 MB of agent history JSON its default 6 took 35-53
// ms, level 4 12-16 ms, for a smaller result (BenchmarkEncodeRewrite,
// docs/PERFORMANCE.md).
const brotliLevel = 4

// bodyCoding is how a request body was encoded: its codings in the order applied,
// and for deflate whether the data was raw (no zlib wrapper).
type bodyCoding struct {
	codings []coding
	rawFlat []bool // per coding: deflate data without the zlib header
}

// label is the pruneadvisor_request_encodings_total label of c.
func (c *bodyCoding) label() string {
	switch {
	case c == nil:
		return encodingIdentity
	case len(c.codings) > 1:
		return encodingMultiple
	}
	return string(c.codings[0])
}

// String names the codings as the header did, e.g. "gzip" or "gzip, br".
func (c *bodyCoding) String() string {
	names := make([]string, len(c.codings))
	for i, k := range c.codings {
		names[i] = string(k)
	}
	return strings.Join(names, ", ")
}

// parseCoding reads the Content-Encoding header values of h: nil for none or only
// "identity"; an error wrapping errUnknownCoding naming the first coding it does not
// know.
func parseCoding(h http.Header) (*bodyCoding, error) {
	var c bodyCoding
	for _, v := range h.Values("Content-Encoding") {
		for _, name := range strings.Split(v, ",") {
			switch k := coding(strings.ToLower(strings.TrimSpace(name))); k {
			case "", "identity":
			case "x-gzip":
				c.codings = append(c.codings, codingGzip)
			case codingGzip, codingDeflate, codingBrotli, codingZstd:
				c.codings = append(c.codings, k)
			default:
				return nil, fmt.Errorf("%w %q (pruneadvisor decodes gzip, deflate, br and zstd)", errUnknownCoding, textcut.BytesDots(name, 40))
			}
		}
	}
	if len(c.codings) == 0 {
		return nil, nil
	}
	c.rawFlat = make([]bool, len(c.codings))
	return &c, nil
}

// decode undoes c's codings on body, last applied first, each stage stopping past
// limit decoded bytes (errDecodedTooLarge). Corrupt data gives errCorruptBody.
func (c *bodyCoding) decode(body []byte, limit int64) ([]byte, error) {
	for i := len(c.codings) - 1; i >= 0; i-- {
		out, raw, err := decodeOne(c.codings[i], body, limit)
		if err != nil {
			return nil, err
		}
		body, c.rawFlat[i] = out, raw
	}
	return body, nil
}

// decodeOne decodes one coding; raw reports deflate data without a zlib header.
func decodeOne(k coding, body []byte, limit int64) (out []byte, raw bool, err error) {
	var r io.Reader
	switch k {
	case codingGzip:
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			return nil, false, corrupt(k, err)
		}
		defer zr.Close()
		r = zr
	case codingDeflate:
		zr, err := zlib.NewReader(bytes.NewReader(body))
		if errors.Is(err, zlib.ErrHeader) {
			// Some clients send raw deflate under "deflate" (RFC 9110 section 8.4.1.2).
			fr := flate.NewReader(bytes.NewReader(body))
			defer fr.Close()
			r, raw = fr, true
		} else if err != nil {
			return nil, false, corrupt(k, err)
		} else {
			defer zr.Close()
			r = zr
		}
	case codingBrotli:
		r = brotli.NewReader(bytes.NewReader(body))
	case codingZstd:
		zr, err := zstd.NewReader(bytes.NewReader(body), zstd.WithDecoderConcurrency(1),
			zstd.WithDecoderLowmem(true), zstd.WithDecoderMaxMemory(zstdWindow(limit)))
		if err != nil {
			return nil, false, corrupt(k, err)
		}
		defer zr.Close()
		r = zr
	}
	out, err = readAtMost(r, limit, 4*int64(len(body)))
	switch {
	case errors.Is(err, errDecodedTooLarge):
		return nil, false, err
	case errors.Is(err, zstd.ErrWindowSizeExceeded), errors.Is(err, zstd.ErrDecoderSizeExceeded):
		return nil, false, fmt.Errorf("%w of %d bytes (--max-body): the zstd data needs a window of more than %d bytes", errDecodedTooLarge, limit, zstdWindow(limit))
	case err != nil:
		return nil, false, corrupt(k, err)
	}
	return out, raw, nil
}

// zstdWindow is the largest zstd window decoded under a limit of limit bytes: the
// limit, but at least 8 MiB, the window the reference encoder uses up to level 18
// for data of unknown size (RFC 8878 section 3.1.1.1.2 recommends decoders support
// 8 MiB).
func zstdWindow(limit int64) uint64 {
	return uint64(max(limit, 8<<20))
}

func corrupt(k coding, err error) error {
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("%w as %s: %v", errCorruptBody, k, err)
}

// readAtMost reads r to its end, failing with errDecodedTooLarge past limit bytes
// (after reading limit+1, so a bomb costs at most that much memory). hint is the
// expected size, to allocate once.
func readAtMost(r io.Reader, limit, hint int64) ([]byte, error) {
	var buf bytes.Buffer
	buf.Grow(int(min(hint, limit) + bytes.MinRead))
	n, err := buf.ReadFrom(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if n > limit {
		return nil, fmt.Errorf("%w of %d bytes (--max-body)", errDecodedTooLarge, limit)
	}
	return buf.Bytes(), nil
}

// encode applies c's codings to body in order, as the client did (raw deflate
// where the client sent raw deflate).
func (c *bodyCoding) encode(body []byte) ([]byte, error) {
	for i, k := range c.codings {
		var buf bytes.Buffer
		var w io.WriteCloser
		switch k {
		case codingGzip:
			w = gzip.NewWriter(&buf)
		case codingDeflate:
			if c.rawFlat[i] {
				fw, err := flate.NewWriter(&buf, flate.DefaultCompression)
				if err != nil {
					return nil, err
				}
				w = fw
			} else {
				w = zlib.NewWriter(&buf)
			}
		case codingBrotli:
			w = brotli.NewWriterLevel(&buf, brotliLevel)
		case codingZstd:
			body = zstdEncoder().EncodeAll(body, make([]byte, 0, len(body)/4))
			continue
		}
		if _, err := w.Write(body); err != nil {
			return nil, fmt.Errorf("encoding %s: %w", k, err)
		}
		if err := w.Close(); err != nil {
			return nil, fmt.Errorf("encoding %s: %w", k, err)
		}
		body = buf.Bytes()
	}
	return body, nil
}

// zstdEncoder is shared by every request: EncodeAll is safe for concurrent use, and
// a new encoder per request costs more than the encoding (BenchmarkEncodeRewrite).
var zstdEncoder = sync.OnceValue(func() *zstd.Encoder {
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
	if err != nil {
		panic(fmt.Sprintf("server: zstd encoder: %v", err)) // static options; cannot fail
	}
	return enc
})
