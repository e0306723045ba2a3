package advisor

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"strings"
)

// Recall id shape: RecallIDPrefix followed by RecallIDDigits decimal digits,
// RecallIDLen bytes in all (e.g. "o_754312282865").
//
// Decimal, not hex: o200k_base splits a run of digits into groups of at most three
// and every group of three digits is one token, so every id of this shape is the same
// number of tokens in any stub (a 10-hex-digit id took 17 to 24 tokens in the same
// stub text over 20,000 random ids; TestRecallIDTokensDoNotDependOnTheID). A stub's
// size, and so every decision priced with it, is then the same whatever a store's
// RecallSecret is, live and in replay (StubTokens prices with RecallIDZero).
//
// Stores made before December 2026 hold stubs with the older shape, "o_" and 10
// lowercase hex digits (RecallIDLegacyHexDigits); such ids stay valid and recallable.
const (
	RecallIDPrefix          = "o_"
	RecallIDDigits          = 12 // 10^12 ids, about 2^40: a collision needs ~10^6 outputs in one store
	RecallIDLen             = len(RecallIDPrefix) + RecallIDDigits
	RecallIDLegacyHexDigits = 10
	// RecallIDZero is an id of the current shape, all zeros: StubTokens prices
	// stubs with it, which is exact for every id of that shape.
	RecallIDZero = RecallIDPrefix + "000000000000"
	// RecallIDPattern is the regular expression (RE2 and ECMAScript alike) that
	// ValidRecallID accepts: the current shape or the legacy one. The recall tool's
	// JSON schema publishes it.
	RecallIDPattern = `^o_([0-9]{12}|[0-9a-f]{10})$`
)

// recallIDModulus is 10^RecallIDDigits.
const recallIDModulus = 1_000_000_000_000

// idOfDigest formats the first 8 bytes of a digest, big-endian, modulo 10^12 as the
// 12 digits of an id (the modulo's bias is below 10^-7 per value).
func idOfDigest(sum []byte) string {
	return fmt.Sprintf("%s%012d", RecallIDPrefix, binary.BigEndian.Uint64(sum[:8])%recallIDModulus)
}

// RecallID returns the unkeyed recall id of the output outputKey
// (transcript.ToolOutput.Key) of session sessionID: "o_" followed by 12 decimal
// digits, the first 8 bytes of SHA-256(sessionID + "\x00" + outputKey) read as a
// big-endian integer modulo 10^12, zero-padded. The NUL separator keeps ("ab","c")
// and ("a","bc") apart. It is deterministic, so a stub quoting it is byte-stable
// across steps and processes (docs/DESIGN.md step 6, "an applied stub is frozen").
// Anyone who knows the session id and the call id can compute it: an Advisor with a
// RecallSecret uses KeyedRecallID instead; ids made here stay valid (the store looks
// originals up by the id itself).
func RecallID(sessionID, outputKey string) string {
	sum := sha256.Sum256([]byte(sessionID + "\x00" + outputKey))
	return idOfDigest(sum[:])
}

// KeyedRecallID returns the recall id of output outputKey of session sessionID keyed
// with secret: "o_" followed by 12 decimal digits made as RecallID makes them, from
// HMAC-SHA256(secret, sessionID + "\x00" + outputKey) (RFC 2104). Without the secret
// the id cannot be derived from the session and call ids, which a client, a log or a
// transcript may show; it can only be read from the stub. An empty secret gives
// RecallID (the unkeyed ids of stores made before secrets existed).
func KeyedRecallID(secret []byte, sessionID, outputKey string) string {
	if len(secret) == 0 {
		return RecallID(sessionID, outputKey)
	}
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(sessionID + "\x00" + outputKey))
	return idOfDigest(mac.Sum(nil))
}

// recallID is the recall id of output key in st: the id of the stub already stored
// for it (a stub is frozen, and a store made before Advisor.RecallSecret was set
// holds unkeyed ids), else KeyedRecallID with a.RecallSecret.
func (a *Advisor) recallID(st *state, key string) string {
	if s, ok := st.frozen[key]; ok && ValidRecallID(s.RecallID) {
		return s.RecallID
	}
	return KeyedRecallID(a.RecallSecret, st.id, key)
}

// ValidRecallID reports whether id has a shape RecallID produces (RecallIDPattern):
// "o_" and exactly 12 decimal digits, or the legacy "o_" and exactly 10 lowercase hex
// digits of stores made before December 2026. It does not say whether any store
// holds the id.
func ValidRecallID(id string) bool {
	digits, ok := strings.CutPrefix(id, RecallIDPrefix)
	if !ok {
		return false
	}
	switch len(digits) {
	case RecallIDDigits:
		return strings.TrimLeft(digits, "0123456789") == ""
	case RecallIDLegacyHexDigits:
		return strings.TrimLeft(digits, "0123456789abcdef") == ""
	}
	return false
}
